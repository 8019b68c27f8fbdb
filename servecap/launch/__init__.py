"""servecap/launch."""
