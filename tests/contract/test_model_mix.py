"""--model-mix: weighted names or a Zipf over N adapters, drawn from the request's seeded RNG."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from scipy import stats

from contract.model_mix import parse_model_mix
from loadgen_helpers import run_python


def test_weights_are_normalized_and_base_is_the_servers_model():
    mix = parse_model_mix("sql:5, chat:3 ,base:2")
    assert mix.names == ("sql", "chat", "base") and mix.share("sql") == pytest.approx(0.5)
    rng = random.Random(0)
    picks = Counter(mix.pick(rng, base="tiny") for _ in range(20_000))
    assert set(picks) == {"sql", "chat", "tiny"}
    observed = [picks["sql"], picks["chat"], picks["tiny"]]
    assert stats.chisquare(observed, [10_000, 6_000, 4_000]).pvalue > 1e-3


def test_zipf_over_n_adapters_is_skewed_as_its_exponent_says():
    mix = parse_model_mix("zipf:64:1.1")
    assert mix.names[0] == "lora-1" and mix.names[-1] == "lora-64"
    harmonic = sum(k ** -1.1 for k in range(1, 65))
    assert mix.share("lora-1") == pytest.approx(1 / harmonic) and mix.share("lora-2") == pytest.approx(2 ** -1.1 / harmonic)
    assert parse_model_mix("zipf:3").share("lora-3") == pytest.approx((1 / 3) / (1 + 1 / 2 + 1 / 3))


@pytest.mark.parametrize("spec, message", [
    ("sql", "expected NAME:WEIGHT"), ("sql:x", "the weight must be a number"), ("sql:0", "must be > 0"),
    ("a:1,a:2", "'a' is given twice"), ("zipf:0", "N must be >= 1"), ("zipf:4:x", "must be an integer"),
    ("zipf:4:1:2", "expected zipf:N"),
])
def test_bad_mixes_name_the_part(spec, message):
    with pytest.raises(ValueError, match=message):
        parse_model_mix(spec)


@pytest.mark.slow   # loadgen.chat imports locust, which patches the process with gevent: its own process
def test_a_scenario_sends_each_requests_drawn_model_and_records_it():
    script = """
import json, random
from loadgen.chat import ChatScenario
from loadgen.client.request_bytes import Target
from loadgen.scenario.chat_config import ChatConfig
from contract.workload import WorkloadSpec
target = Target.from_url("http://127.0.0.1:9")
mixed = ChatScenario(ChatConfig(WorkloadSpec(model_mix="sql:1,base:1", api="completions")), target, "tiny", 0)
plain = ChatScenario(ChatConfig(WorkloadSpec(api="completions")), target, "tiny", 0)
out = []
for i in range(40):
    m, p = mixed.prepare(random.Random(i)), plain.prepare(random.Random(i))
    out.append([json.loads(m.request.split(b"\\r\\n\\r\\n", 1)[1])["model"], m.model, p.model,
                m.prompt_tokens_asked, p.prompt_tokens_asked])
print(json.dumps(out))
"""
    proc = run_python(script)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(proc.stdout)
    assert all(sent == recorded for sent, recorded, *_ in rows)
    assert {row[1] for row in rows} == {"sql", "tiny"}
    assert all(row[2] is None for row in rows)          # no mix: the records keep no model
    assert all(row[3] == row[4] for row in rows)        # the mix leaves the lengths as they were
