"""reference_server/bench."""
