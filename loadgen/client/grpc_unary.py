"""One unary gRPC call, timed like an HTTP exchange: the load generator's KServe V2 gRPC transport.

The call is grpcio's blocking unary call with bytes in and bytes out (the scenario serialises the
request before the clock starts). Under Locust it must run cooperatively: `use_gevent()` switches
grpcio to gevent before the first channel, as Locust's own gRPC example does. One channel per
Locust process carries every user's calls (HTTP/2 multiplexes them).

It fills an `Exchange`: t_start just before the call, t_last when the reply (or the error) arrived,
the reply's bytes as the body, and `grpc_status` ("OK" or the status code's name) with the
server's details as the failure message.
"""

from __future__ import annotations

import time

import grpc

from loadgen.client.exchange import Exchange

INFER_METHOD = "/inference.GRPCInferenceService/ModelInfer"
_gevent_ready = False


def use_gevent() -> None:
    """grpcio cooperates with gevent from here on (call before any channel exists; idempotent)."""
    global _gevent_ready
    if not _gevent_ready:
        from grpc.experimental import gevent as grpc_gevent

        grpc_gevent.init_gevent()
        _gevent_ready = True


class GrpcUnary:
    """`run(request_bytes, exchange, timeout_s)` calls `method` on `target` (HOST:PORT)."""

    def __init__(self, target: str, method: str = INFER_METHOD) -> None:
        self.target = target
        self.channel = grpc.insecure_channel(target)
        self._call = self.channel.unary_unary(method)   # no serialisers: bytes in, bytes out

    def run(self, request: bytes, exchange: Exchange, timeout_s: float) -> None:
        exchange.t_start = time.perf_counter()
        try:
            reply = self._call(request, timeout=timeout_s)
        except grpc.RpcError as exc:
            exchange.t_last = time.perf_counter()
            code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
            exchange.grpc_status = code.name
            exchange.failure_message = (exc.details() if hasattr(exc, "details") else str(exc)) or code.name
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                exchange.failure = "timeout"
            exchange.complete = True
            return
        exchange.t_last = time.perf_counter()
        exchange.grpc_status = "OK"
        exchange.body = bytearray(reply)
        exchange.complete = True

    def close(self) -> None:
        self.channel.close()
