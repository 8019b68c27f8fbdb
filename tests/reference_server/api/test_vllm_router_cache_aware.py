"""vLLM's router's `cache_aware` policy in front of two reference servers routes on their render endpoint's
token ids: a request whose prompt repeats a prefix goes to the replica that was sent it, even while
that replica is the busier one; a request with nothing in common goes to the idler one.

Without `/v1/chat/completions/render` the router's cache_aware has no tokens and routes on load alone
(its log says "Prefix input preparation unavailable ... render_unavailable"), which is what a fleet
of reference servers behind it measured before the endpoint existed.
"""

from __future__ import annotations

import random
import threading
import time

import httpx
import pytest

from servecap.fleet.router import VllmRouter
from servecap.launch.process import ServerProcess
from servecap.launch.spec import ReferenceServerSpec

pytestmark = [pytest.mark.slow, pytest.mark.engine, pytest.mark.timeout(240)]   # vLLM's router: the real-engine suite (make test-engines)

HEADER = "x-servecap-replica"


def _text(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def test_a_repeated_prefix_goes_where_it_was_sent_even_to_the_busier_replica():
    flags = ["--model", "tiny", "--seed", "7", "--max-model-len", "2048", "--engine-mode", "thread",
             "--no-classifier", "--inject-step-delay-ms", "20"]
    with ServerProcess(ReferenceServerSpec.from_flags([*flags, "--replica-name", "a"]), startup_timeout_s=120) as a, \
            ServerProcess(ReferenceServerSpec.from_flags([*flags, "--replica-name", "b"]), startup_timeout_s=120) as b, \
            VllmRouter("cache_aware") as router:
        router.add(a.base_url)
        router.add(b.base_url)
        rng = random.Random(0)
        prefix = _text(rng, "abcdefghij ", 600)

        def chat(content: str, max_tokens: int = 1) -> str:
            answer = httpx.post(router.url + "/v1/chat/completions", timeout=60, json={
                "model": "tiny", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens,
                "ignore_eos": True})
            assert answer.status_code == 200, answer.text
            return answer.headers[HEADER]

        first = chat(prefix + _text(rng, "xyz", 100))
        held: list[str] = []   # the same prefix, held for ~2 s: that replica is now the busier
        holder = threading.Thread(target=lambda: held.append(chat(prefix + _text(rng, "xyz", 100), 100)))
        holder.start()
        time.sleep(0.5)
        again = chat(prefix + _text(rng, "klm", 100))
        other = chat(_text(rng, "qrstuvw", 700))
        holder.join()
        assert held == [first] and again == first and other != first, (first, held, again, other)
