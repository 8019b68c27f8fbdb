"""loadgen/client."""
