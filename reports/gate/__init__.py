"""reports/gate."""
