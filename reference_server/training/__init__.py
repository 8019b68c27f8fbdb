"""A small byte-level model trained here, seeded, on text every machine has: Python's own standard library."""
