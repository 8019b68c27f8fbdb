"""reference_server/engine."""
