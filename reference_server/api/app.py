"""The FastAPI app factory: `create_app(engine_config, server_config, classifier_config)`.

Routes: OpenAI (/v1), the engine's step record (/v1/engine/steps, /requests), KServe V2 (/v2),
ops (/health, /ready, /metrics). The engine thread and the classifier batcher start in the
app's lifespan and stop with it; the lifespan also sends the app its warm-up request
(`api.warmup`) once the engine is ready.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from reference_server.api import (embedding_routes, engine_record_routes, fault_routes, kserve_routes, kv_transfer,
                                  openai_routes, ops_routes)
from reference_server.api.auth import ApiKeyMiddleware
from reference_server.api.body_limit import BodyLimitMiddleware
from reference_server.api.errors import install_error_handlers
from reference_server.api.replica_header import ReplicaHeaderMiddleware
from reference_server.api.runtime import ServingRuntime
from reference_server.api.settings import ServerConfig
from reference_server.api.warmup import warm_http_path
from reference_server.classifier.config import ClassifierConfig
from reference_server.embedding.config import EmbeddingConfig
from reference_server.engine.config import EngineConfig


def create_app(engine_config: EngineConfig | None = None, server_config: ServerConfig | None = None,
               classifier_config: ClassifierConfig | None = None, *,
               build_engine: Callable[[], object] | None = None,
               embedding_config: EmbeddingConfig | None = None) -> FastAPI:
    """A new app with its own runtime and metrics registry (`app.state.runtime`); the embedding model
    is served only when its config is given (`servecap serve` gives it unless --no-embedding)."""
    engine_config = engine_config or EngineConfig()
    server_config = server_config or ServerConfig()
    classifier_config = classifier_config or ClassifierConfig()
    runtime = ServingRuntime(engine_config, server_config, classifier_config, build_engine=build_engine,
                             embedding_config=embedding_config)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        await runtime.start()
        warmup = asyncio.create_task(warm_http_path(app, runtime))
        try:
            yield
        finally:
            warmup.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await warmup
            await runtime.stop()

    app = FastAPI(
        title="servecap reference server",
        version="0.1.0",
        description="OpenAI-compatible completions and chat, KServe V2 classifier, Prometheus metrics.",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    app.state.metrics = runtime.metrics
    install_error_handlers(app)
    # added last = outermost: the body limit, then auth, run before any route reads the body
    app.add_middleware(ApiKeyMiddleware, api_key=server_config.api_key)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=server_config.max_body_bytes)
    if server_config.replica_name is not None:   # outermost: every response is named, refusals too
        app.add_middleware(ReplicaHeaderMiddleware, name=server_config.replica_name)
    app.include_router(ops_routes.router)
    app.include_router(openai_routes.router)
    app.include_router(engine_record_routes.router)
    app.include_router(kv_transfer.router)
    app.include_router(fault_routes.router)
    app.include_router(kserve_routes.router)
    app.include_router(embedding_routes.router)
    return app
