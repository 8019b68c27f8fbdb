"""engine_core/scheduling."""
