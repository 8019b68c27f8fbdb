"""reference_server/embedding: a small seeded text-embedding model served at /v1/embeddings."""
