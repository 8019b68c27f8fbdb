"""Locust scenario: OpenAI embeddings (`POST /v1/embeddings`), for embedding models.

    locust -f loadgen/embed.py --host http://127.0.0.1:8000 --headless -u 16 -t 60s \
        --embed-model servecap-embed --inputs uniform:1:8 --input-tokens uniform:16:256 \
        --records runs/x/requests.jsonl

Flags: --embed-model NAME (default servecap-embed), --inputs SPEC (inputs per request) and
--input-tokens SPEC (bytes of seeded ASCII text per input, which a byte-level model counts as its
tokens), both in the length forms of chat.py (8, uniform:1:8, ...), plus the records and arrival
flags of chat.py (--records, --seed, --arrival, --rate, --level, --warmup, ...).

Records have `api: "embed"`, e2e_s as the latency, no TTFT/ITL, the inputs' tokens in
`prompt_tokens` (the server's usage where it gives one) and the inputs sent in
`output_tokens_asked`. Locust's stats show it under `E2E`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from locust import events

from contract.distributions import LengthDistribution, parse_length_distribution
from loadgen.client.request_bytes import Target, http_request
from loadgen.scenario.hooks import LoadUser, install  # noqa: F401 - LoadUser: the user class Locust runs
from loadgen.scenario.route import Prepared
from loadgen.scenario.run_settings import RunSettings, add_common_arguments
from loadgen.workload.prompts import ascii_text

PATH = "/v1/embeddings"


@dataclass(frozen=True)
class EmbedConfig:
    model: str = "servecap-embed"
    inputs: LengthDistribution = parse_length_distribution("1", "--inputs")
    input_tokens: LengthDistribution = parse_length_distribution("uniform:16:128", "--input-tokens")

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("--embed-model must not be empty")

    @classmethod
    def from_options(cls, options) -> "EmbedConfig":
        """From Locust's parsed options (web-UI values may arrive as strings); None gives the defaults."""
        if options is None:
            return cls()
        get = lambda name, default: getattr(options, name, default)  # noqa: E731
        return cls(str(get("embed_model", "servecap-embed")),
                   parse_length_distribution(str(get("inputs", "1")), "--inputs"),
                   parse_length_distribution(str(get("input_tokens", "uniform:16:128")), "--input-tokens"))


class EmbedScenario:
    api = "embed"
    stream = False
    path = PATH

    def __init__(self, config: EmbedConfig, target: Target) -> None:
        self.config, self.target = config, target

    def prepare(self, rng: random.Random) -> Prepared:
        count = self.config.inputs.sample(rng)
        texts = [ascii_text(max(1, self.config.input_tokens.sample(rng)), rng) for _ in range(count)]
        body = {"model": self.config.model, "input": texts, "encoding_format": "float"}
        return Prepared(http_request("POST", self.target, PATH, body), sum(len(t.encode()) for t in texts), count)


def add_embed_arguments(parser) -> None:
    parser.add_argument("--embed-model", default="servecap-embed", help="the embedding model's name")
    parser.add_argument("--inputs", default="1", help="inputs per request: N | uniform:LO:HI | ...")
    parser.add_argument("--input-tokens", default="uniform:16:128", help="bytes (tokens) per input: N | uniform:LO:HI | ...")
    add_common_arguments(parser)


def build(options, environment, role: str, settings: RunSettings) -> EmbedScenario | None:
    config = EmbedConfig.from_options(options)
    if role in ("check", "master"):
        return None
    return EmbedScenario(config, Target.from_url(environment.host or ""))


install(events, add_embed_arguments, build)
