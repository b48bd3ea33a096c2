"""What tests, benchmarks and report scripts share, kept out of the product package:
``serving`` (a real ``factcheck serve`` child process), ``crashpoints`` (SIGKILL at a
named point of a write), ``measure`` (timing, process-tree memory, the floor, report
writing). Run benchmarks and scripts from the repository root as modules
(``python -m benchmarks.tagging``), so this package is importable without path edits."""
