from factcheck.cli import main

raise SystemExit(main())
