"""reference_server/scheduling."""
