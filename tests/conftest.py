"""Shared fixtures (small ones only)."""

from __future__ import annotations

import pytest

pytest_plugins = ["process_guard"]  # fails a test that starts a process unless it is marked slow


@pytest.fixture(scope="session")
def reference_server_tiny():
    """One live `python -m reference_server` (tiny preset, seed 7) shared by the test modules that
    only send it requests, so the suite pays for one server start instead of one per module.
    Its classifier is `iris-like` (6 features, 3 classes) batching at 4 or 8 rows within 1 s,
    over REST and over gRPC (`server.grpc_target`)."""
    from servecap.launch.process import ServerProcess
    from servecap.launch.spec import ReferenceServerSpec

    args = ["--model", "tiny", "--seed", "7", "--classifier-name", "iris-like", "--classifier-features", "6",
            "--classifier-classes", "3", "--classifier-max-batch-size", "8",
            "--classifier-preferred-batch-sizes", "4,8", "--classifier-max-queue-delay-us", "1000000",
            "--grpc-port", "0"]
    with ServerProcess(ReferenceServerSpec.from_flags(args)) as server:
        yield server


@pytest.fixture(scope="module")
def one_torch_thread():
    """For modules that run the tiny model in-process (`pytestmark = usefixtures(...)`).
    The tiny model gains nothing from intra-op threads, and on a shared 2-core box they
    stall each other at every op's barrier (10x slower measured): use one, restore after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
