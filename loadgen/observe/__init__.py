"""loadgen/observe."""
