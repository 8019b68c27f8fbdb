"""loadgen/scenario."""
