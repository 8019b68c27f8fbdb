"""loadgen/bench."""
