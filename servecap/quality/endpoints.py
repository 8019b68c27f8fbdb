"""Quality over two OpenAI-compatible endpoints: the same greedy completions asked of both, compared.

    compare_endpoints(a, b, prompts, max_tokens, logprobs, seed) -> the measures' dict

Each prompt goes to both as a greedy completion of `max_tokens` tokens (`ignore_eos`, vLLM's extension).
The outputs are compared as token ids where the server returns them (`return_token_ids`), else as the
tokens its `logprobs` name, else as characters; the result says which. With `logprobs` K (servers that
give them, e.g. vLLM), the KL of next-token distributions is estimated from the top K at each position
the two outputs share (before the first divergence, both saw the same context); the teacher-forced
measures need the model in-process (`servecap quality --a-args/--b-args`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import requests

from reports.quality.measures import positional_agreement, prefix_agreement, summarize, top_logprob_kl

TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Endpoint:
    url: str          # base URL, e.g. http://127.0.0.1:8000
    model: str        # the `model` field the server serves


@dataclass(frozen=True)
class Completion:
    units: list       # what is compared: token ids, token strings or characters
    unit: str         # "token ids" | "tokens" | "characters"
    top_logprobs: list[dict[str, float]] | None
    text: str

    def as_characters(self) -> Completion:
        return Completion(list(self.text), "characters", None, self.text)


def complete(endpoint: Endpoint, prompt: str, max_tokens: int, logprobs: int | None) -> Completion:
    """One greedy completion; ValueError names the endpoint and what it answered."""
    body = {"model": endpoint.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0,
            "ignore_eos": True, "return_token_ids": True}
    if logprobs:
        body["logprobs"] = logprobs
    url = endpoint.url.rstrip("/") + "/v1/completions"
    try:
        response = requests.post(url, json=body, timeout=TIMEOUT_S)
    except requests.RequestException as exc:
        raise ValueError(f"{url}: {exc.__class__.__name__}: {exc}") from None
    if response.status_code != 200:
        raise ValueError(f"{url} answered {response.status_code}: {response.text[:300]}")
    choice = response.json()["choices"][0]
    given = choice.get("logprobs") or {}
    top = given.get("top_logprobs") if logprobs else None
    text = choice.get("text") or ""
    if choice.get("token_ids") is not None:
        return Completion(list(choice["token_ids"]), "token ids", top, text)
    if given.get("tokens"):
        return Completion(list(given["tokens"]), "tokens", top, text)
    return Completion(list(text), "characters", top, text)


def compare_endpoints(a: Endpoint, b: Endpoint, prompts: list[str], max_tokens: int, *,
                      logprobs: int | None = None, seed: int = 0, progress=None) -> dict:
    per_prompt, units = [], set()
    for i, prompt in enumerate(prompts):
        ca, cb = complete(a, prompt, max_tokens, logprobs), complete(b, prompt, max_tokens, logprobs)
        if ca.unit != cb.unit:   # the two servers give different units: compare what both give, the text
            ca, cb = ca.as_characters(), cb.as_characters()
        units.add(ca.unit)
        record = {"prefix_agreement": prefix_agreement(ca.units, cb.units),
                  "positional_agreement": positional_agreement(ca.units, cb.units),
                  "identical": ca.units == cb.units, "kl_mean": None}
        if ca.top_logprobs and cb.top_logprobs:
            shared = int(round(record["prefix_agreement"] * max(len(ca.units), len(cb.units))))
            shared = min(shared + 1, len(ca.top_logprobs), len(cb.top_logprobs))   # the divergent position too
            if shared:
                kls = [top_logprob_kl(ta, tb) for ta, tb in zip(ca.top_logprobs[:shared], cb.top_logprobs[:shared])
                       if ta and tb]   # a position a server gave no top log-probabilities for is left out
                record["kl_mean"] = float(np.mean(kls)) if kls else None
        per_prompt.append(record)
        if progress is not None:
            progress(i + 1, len(prompts))
    measures = {name: summarize([p[name] for p in per_prompt], seed)
                for name in ("prefix_agreement", "positional_agreement", "kl_mean")}
    measures["identical_outputs"] = sum(p["identical"] for p in per_prompt) / len(per_prompt)
    return {"measures": measures, "per_prompt": per_prompt, "compared_as": sorted(units)}
