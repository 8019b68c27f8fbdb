"""The HTTP layer of the reference server: `create_app(...)` builds the FastAPI app."""

from reference_server.api.app import create_app

__all__ = ["create_app"]
