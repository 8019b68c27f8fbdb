"""servecap/contract."""
