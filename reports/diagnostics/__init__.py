"""Opt-in instruments for a machine whose speed drifts (a shared VM): the canary's per-core speed and
the engine's own speed per level. Run only with `--diagnostics`."""
