"""reference_server/classifier."""
