from governor.cli import main

raise SystemExit(main())
