"""loadgen/sweep."""
