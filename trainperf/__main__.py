from trainperf.cli import main

raise SystemExit(main())
