"""reports/figures."""
