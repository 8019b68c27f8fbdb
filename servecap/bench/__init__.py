"""servecap/bench."""
