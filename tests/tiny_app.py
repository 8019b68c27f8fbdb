"""The tiny model's app in-process, ready, for the API tests that need a live engine but no process."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def tiny_app(max_model_len: int = 128, engine: dict | None = None, **server):
    """A TestClient on the tiny model's app (engine on a thread, no classifier), once /ready answers 200;
    `engine`: more EngineConfig flags (`EngineConfig.from_flags`), `server`: ServerConfig fields."""
    from fastapi.testclient import TestClient

    from reference_server.api import create_app
    from reference_server.api.settings import ServerConfig
    from reference_server.classifier.config import ClassifierConfig
    from reference_server.engine.config import EngineConfig
    from waiting import wait_until

    app = create_app(EngineConfig.from_flags(model="tiny", max_model_len=max_model_len, **(engine or {})),
                     ServerConfig(engine_mode="thread", **server), ClassifierConfig(enabled=False))
    with TestClient(app) as client:
        wait_until(lambda: client.get("/ready").status_code == 200, timeout=120, what="the in-process server ready")
        yield client
