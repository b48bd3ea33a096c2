"""What a run reports: ``report.md``, its tables and plots."""
