"""servecap/sweep."""
