"""Every request of a session carries its key in --session-header (default x-session-id, the first header
vllm-router's consistent_hash and sticky_least_loaded read): a trace's session_id or user, a --turns
conversation; a request of no session carries none, and `--session-header none` sends none at all."""

from __future__ import annotations

import json

import pytest

from loadgen_helpers import run_python

SCRIPT = """
import json, random
from loadgen.chat import ChatScenario
from loadgen.client.request_bytes import Target
from loadgen.scenario.chat_config import ChatConfig
from loadgen.workload.traces import load_trace
from contract.workload import WorkloadSpec

def headers(prepared):
    head = prepared.request.split(b"\\r\\n\\r\\n", 1)[0].decode().split("\\r\\n")[1:]
    return {name.lower(): value for name, value in (line.split(": ", 1) for line in head)}

path, name = PATH, NAME
target = Target.from_url("http://127.0.0.1:9")
trace = load_trace(path)
scenario = ChatScenario(ChatConfig(WorkloadSpec(trace=path, session_header=name)), target, "tiny", 0, trace=trace)
rows = [headers(scenario.trace.prepare(i, random.Random(i), turn=1 if trace.rows[i].session else None))
        for i in range(len(trace.rows))]
turns = ChatScenario(ChatConfig(WorkloadSpec(turns=2, session_header=name)), target, "tiny", 0)
conversation = turns.conversation(random.Random(1), "w0/c5")
talk = [headers(conversation.prepare(0))]
conversation.answered("fine")
talk.append(headers(conversation.prepare(1)))
plain = ChatScenario(ChatConfig(WorkloadSpec(session_header=name)), target, "tiny", 0)
single = headers(plain.prepare(random.Random(2)))
print(json.dumps({"rows": rows, "talk": talk, "single": single}))
"""


@pytest.mark.slow   # loadgen.chat imports locust, which patches the process with gevent: its own process
@pytest.mark.parametrize("name", ["x-session-id", "X-User-Id", "none"])
def test_each_request_of_a_session_carries_its_key(tmp_path, name):
    path = tmp_path / "t.jsonl"
    path.write_text('{"session_id": "a", "timestamp": 0, "input_length": 8, "output_length": 2}\n'
                    '{"timestamp": 5, "input_length": 8, "output_length": 2, "user": "u9"}\n'
                    '{"timestamp": 6, "input_length": 8, "output_length": 2}\n'
                    '{"session_id": "a", "delay": 10, "input_length": 12, "output_length": 2}\n'
                    '{"session_id": "sesi\\u00f3n", "timestamp": 7, "input_length": 8, "output_length": 2}\n')
    proc = run_python(f"PATH, NAME = {str(path)!r}, {name!r}\n" + SCRIPT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    key = name.lower()
    sent = [row.get(key) for row in out["rows"]]   # in time order: a, a's second turn (at a's time), u9, plain, sesión
    if name == "none":
        assert sent == [None] * 5 and all("x-session-id" not in row for row in out["rows"] + out["talk"])
        return
    assert sent[:4] == ["a", "a", "u9", None]
    assert sent[4].startswith("sha1-")   # a key that is not visible ASCII goes as its digest
    assert [row.get(key) for row in out["talk"]] == ["w0/c5", "w0/c5"]   # a conversation's every turn
    assert key not in out["single"]   # a request of no session carries none
