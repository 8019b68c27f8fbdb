"""`python -m reference_server`: the same as `servecap serve`."""

from reference_server.cli import main

raise SystemExit(main())
