"""`python -m reference_server`: the same as `servecap serve`."""

from reference_server.cli import main

if __name__ == "__main__":   # the spawned engine process imports this module as __mp_main__
    raise SystemExit(main())
