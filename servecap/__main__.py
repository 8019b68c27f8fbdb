from servecap.cli import main

if __name__ == "__main__":   # a spawned engine process imports this module as __mp_main__
    raise SystemExit(main())
