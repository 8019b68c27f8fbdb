"""reference_server/runtime."""
