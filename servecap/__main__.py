from servecap.cli import main

raise SystemExit(main())
