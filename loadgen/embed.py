"""Locust scenario: OpenAI embeddings (`POST /v1/embeddings`), for embedding models.

    locust -f loadgen/embed.py --host http://127.0.0.1:8000 --headless -u 16 -t 60s \
        --model servecap-embed --rows uniform:1:8 --prompt-tokens uniform:16:256 \
        --records runs/x/requests.jsonl

Flags: the workload's (contract.workload: --rows SPEC, inputs per request, and --prompt-tokens SPEC,
bytes of seeded ASCII text per input, which a byte-level model counts as its tokens, both in the
length forms, 8, uniform:1:8, ...; --seed), --model NAME (default servecap-embed), plus the records
and arrival flags of chat.py (--records, --rates, --arrival, --level, --warmup, ...).

Records have `api: "embed"`, e2e_s as the latency, no TTFT/ITL, the inputs' tokens in
`prompt_tokens` (the server's usage where it gives one) and the inputs sent in
`output_tokens_asked`. Locust's stats show it under `E2E`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from locust import events

from contract.distributions import LengthDistribution, parse_length_distribution
from contract.workload import add_workload_arguments
from loadgen.client.request_bytes import Target, http_request
from loadgen.scenario.hooks import LoadUser, install  # noqa: F401 - LoadUser: the user class Locust runs
from loadgen.scenario.route import Prepared
from loadgen.scenario.run_settings import RunSettings, add_common_arguments
from loadgen.scenario.scenario_workload import scenario_workload
from loadgen.workload.prompts import ascii_text

PATH = "/v1/embeddings"


@dataclass(frozen=True)
class EmbedConfig:
    model: str = "servecap-embed"
    inputs: LengthDistribution = parse_length_distribution("1", "--rows")
    input_tokens: LengthDistribution = parse_length_distribution("uniform:32:128", "--prompt-tokens")

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("--model must not be empty")

    @classmethod
    def from_options(cls, options) -> "EmbedConfig":
        """From Locust's parsed options (web-UI values may arrive as strings); None gives the defaults."""
        if options is None:
            return cls()
        workload = scenario_workload(options, "embed")
        return cls(str(getattr(options, "model", "") or "servecap-embed"), workload.row_counts,
                   workload.prompt_lengths)


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
    add_workload_arguments(parser, title=None)
    add_common_arguments(parser)


def build(options, environment, role: str, settings: RunSettings) -> EmbedScenario | None:
    config = EmbedConfig.from_options(options)
    if role in ("check", "master"):
        return None
    return EmbedScenario(config, Target.from_url(environment.host or ""))


install(events, add_embed_arguments, build)
