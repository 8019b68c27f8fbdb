"""Locust scenario: KServe V2 inference (`POST /v2/models/{name}/infer`) for non-LLM models.

    locust -f loadgen/classify.py --host http://127.0.0.1:8000 --headless -u 16 -t 60s \
        --model tabular-mlp --rows 1 --records runs/x/requests.jsonl

    locust -f loadgen/classify.py --host http://127.0.0.1:8000 --headless -u 16 -t 60s \
        --protocol grpc --grpc-target 127.0.0.1:8001 --rows 64

Flags: the workload's (contract.workload: --rows SPEC, rows per request in the length forms,
1, uniform:1:8, ...; --protocol rest|grpc, KServe V2 over HTTP/JSON, or over gRPC with raw
tensor bytes as tritonclient sends them; --seed), --model NAME (default tabular-mlp),
--features N (default: the model's metadata, GET /v2/models/NAME), --input-name (default
features), --grpc-target HOST:PORT (default: --host's host, port 8001), plus the records and
arrival flags of chat.py (--records, --rates, --arrival, --level, --warmup, ...).

Each request carries its own `id`, which the server echoes: it is the record's
`response_id`. Records have `api: "classify"`, e2e_s as the latency, no TTFT/ITL, and
the rows sent in `prompt_tokens_asked`, and `protocol` ("rest" or "grpc"). Locust's stats
show it under `E2E`. A gRPC error is recorded as `grpc_<status>` (e.g. grpc_invalid_argument).
"""

from __future__ import annotations

import json
import logging
import random
import struct
from dataclasses import dataclass

from locust import events

from contract.options import parse_int
from loadgen.scenario.run_settings import RunSettings, add_common_arguments
from contract.distributions import LengthDistribution, parse_length_distribution
from contract.workload import PROTOCOLS, add_workload_arguments
from loadgen.client.exchange import Exchange
from loadgen.client.http_stream import ConnectionPool, run_exchange
from loadgen.scenario.route import Prepared
from loadgen.client.request_bytes import Target, http_request
from loadgen.scenario.hooks import LoadUser, install  # noqa: F401 - LoadUser: the user class Locust runs
from loadgen.scenario.scenario_workload import scenario_workload

log = logging.getLogger(__name__)
DEFAULT_GRPC_PORT = 8001   # Triton's


@dataclass(frozen=True)
class ClassifyConfig:
    model: str = "tabular-mlp"
    features: int = 0              # 0 = ask the model's metadata
    rows: LengthDistribution = parse_length_distribution("1", "--rows")
    input_name: str = "features"
    protocol: str = "rest"
    grpc_target: str | None = None   # HOST:PORT; None = --host's host, port 8001

    def __post_init__(self) -> None:
        if not self.model or "/" in self.model:
            raise ValueError(f"--model must be a KServe name without '/', got {self.model!r}")
        if self.features < 0:
            raise ValueError(f"--features must be >= 0, got {self.features}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"--protocol must be one of {', '.join(PROTOCOLS)}, got {self.protocol!r}")
        if self.grpc_target is not None and not _is_host_port(self.grpc_target):
            raise ValueError(f"--grpc-target must be HOST:PORT, got {self.grpc_target!r}")

    @classmethod
    def from_options(cls, options) -> "ClassifyConfig":
        """Build from Locust's parsed options (web-UI values may arrive as strings); None gives the defaults."""
        if options is None:
            return cls()
        get = lambda name, default=None: getattr(options, name, default)  # noqa: E731
        workload = scenario_workload(options, "classify")
        return cls(str(get("model") or "tabular-mlp"), parse_int(get("features", 0), "--features"),
                   workload.row_counts, str(get("input_name", "features")), workload.protocol,
                   get("grpc_target") or None)


def _is_host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host) and port.isdigit() and 0 < int(port) < 65536


class ClassifyScenario:
    """KServe V2 inference requests of seeded rows, over REST (JSON) or gRPC (raw FP32 bytes)."""

    api = "classify"
    stream = False

    def __init__(self, config: ClassifyConfig, target: Target, features: int) -> None:
        self.config, self.target, self.features = config, target, features
        self.protocol = config.protocol
        self.transport = None   # gRPC: the call (LoadRun sends through it instead of HTTP)
        if config.protocol == "grpc":
            from loadgen.client.grpc_unary import INFER_METHOD, GrpcUnary

            self.path = INFER_METHOD
            self.transport = GrpcUnary(config.grpc_target or f"{target.host}:{DEFAULT_GRPC_PORT}")
        else:
            self.path = f"/v2/models/{config.model}/infer"

    def prepare(self, rng: random.Random) -> Prepared:
        rows = self.config.rows.sample(rng)
        data = [round(rng.uniform(-2.0, 2.0), 4) for _ in range(rows * self.features)]
        request_id = f"req-{rng.getrandbits(64):016x}"
        if self.transport is not None:
            return Prepared(self._grpc_request(request_id, rows, data), rows, None)
        body = {"id": request_id,
                "inputs": [{"name": self.config.input_name, "shape": [rows, self.features],
                            "datatype": "FP32", "data": data}]}
        return Prepared(http_request("POST", self.target, self.path, body), rows, None)

    def _grpc_request(self, request_id: str, rows: int, data: list[float]) -> bytes:
        from contract.open_inference.open_inference_pb2 import ModelInferRequest

        request = ModelInferRequest(model_name=self.config.model, id=request_id)
        request.inputs.add(name=self.config.input_name, datatype="FP32", shape=[rows, self.features])
        request.raw_input_contents.append(struct.pack(f"<{len(data)}f", *data))
        return request.SerializeToString()


def discover_features(target: Target, model: str) -> int:
    pool = ConnectionPool(target)
    exchange = Exchange()
    try:
        run_exchange(pool, http_request("GET", target, f"/v2/models/{model}"), exchange, stream=False, timeout_s=10.0)
    finally:
        pool.close()
    try:
        if exchange.status_code != 200:
            raise ValueError
        return int(json.loads(bytes(exchange.body))["inputs"][0]["shape"][-1])
    except (ValueError, KeyError, IndexError, TypeError):
        reason = exchange.failure_message or f"HTTP {exchange.status_code}"
        raise ValueError(f"--features not given and GET /v2/models/{model} gave no input shape ({reason})") from None


def add_classify_arguments(parser) -> None:
    add_workload_arguments(parser, title=None)
    parser.add_argument("--features", default=0, type=int, help="input row width (default: from model metadata)")
    parser.add_argument("--input-name", default="features", help="name of the input tensor")
    parser.add_argument("--grpc-target", default=None,
                        help=f"HOST:PORT of the gRPC service (default: --host's host, port {DEFAULT_GRPC_PORT})")
    add_common_arguments(parser)


def build(options, environment, role: str, settings: RunSettings) -> ClassifyScenario | None:
    config = ClassifyConfig.from_options(options)
    if role in ("check", "master"):
        return None
    target = Target.from_url(environment.host or "")
    if config.protocol == "grpc":
        from loadgen.client.grpc_unary import use_gevent

        use_gevent()   # before the first channel
    return ClassifyScenario(config, target, config.features or discover_features(target, config.model))


install(events, add_classify_arguments, build)
