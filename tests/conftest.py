"""Shared fixtures (small ones only)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def reference_server_tiny():
    """One live `python -m reference_server` (tiny preset, seed 7) shared by the test modules that
    only send it requests, so the suite pays for one server start instead of one per module.
    Its classifier is `iris-like` (6 features, 3 classes) batching at 4 or 8 rows within 1 s."""
    from reference_server.launch import ServerProcess

    args = ["--model", "tiny", "--seed", "7", "--classifier-name", "iris-like", "--classifier-features", "6",
            "--classifier-classes", "3", "--classifier-max-batch-size", "8",
            "--classifier-preferred-batch-sizes", "4,8", "--classifier-max-queue-delay-us", "1000000"]
    with ServerProcess(args) as server:
        yield server
