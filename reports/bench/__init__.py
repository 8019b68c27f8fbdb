"""reports/bench."""
