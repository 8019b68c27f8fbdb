"""LoRA adapters through the OpenAI API with the official client: listed, selected by `model`, 404 for an
unknown one, base requests as without LoRA, and the per-adapter metrics."""

from __future__ import annotations

import re

import openai
import pytest

from tiny_app import tiny_app

pytestmark = [pytest.mark.usefixtures("one_torch_thread"),
              pytest.mark.slow]   # the openai client runs `uname -p` (platform.processor) for its headers
LORA = {"strategy": "continuous", "enable_lora": True, "lora_modules": (("sql", "random"), ("chat", "random:4")),
        "max_loras": 1}


def _client(http) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=http, max_retries=0)


def _greedy(client: openai.OpenAI, model: str) -> str:
    return client.completions.create(model=model, prompt="select * from", max_tokens=12, temperature=0,
                                     extra_body={"ignore_eos": True}).choices[0].text


def test_adapters_are_listed_selected_by_model_and_base_requests_stay_the_same():
    with tiny_app(engine={"strategy": "continuous"}) as http:
        plain = _greedy(_client(http), "tiny")
    with tiny_app(engine=LORA) as http:
        client = _client(http)
        models = {m.id: m for m in client.models.list().data}
        assert list(models) == ["tiny", "sql", "chat"]
        assert models["sql"].model_extra["parent"] == "tiny" and models["chat"].model_extra["root"] == "random:4"
        assert client.models.retrieve("sql").id == "sql"
        assert _greedy(client, "tiny") == plain
        response = client.completions.create(model="sql", prompt="select * from", max_tokens=12, temperature=0,
                                             extra_body={"ignore_eos": True})
        assert response.model == "sql" and response.usage.completion_tokens == 12
        chat = client.chat.completions.create(model="chat", messages=[{"role": "user", "content": "hi"}],
                                              max_tokens=4)
        assert chat.model == "chat"
        with pytest.raises(openai.NotFoundError) as missing:
            client.completions.create(model="nope", prompt="x", max_tokens=2)
        assert "the model 'nope' does not exist" in str(missing.value) and "2 LoRA adapters" in str(missing.value)
        engine = http.get("/v1/engine").json()["lora"]
        assert engine["max_loras"] == 1 and set(engine["adapters"]) == {"sql", "chat"}
        metrics = http.get("/metrics").text
    assert re.search(r'^servecap_lora_requests_total\{lora_name="sql"\} 1\.0$', metrics, re.M)
    assert re.search(r'^servecap_lora_requests_total\{lora_name="chat"\} 1\.0$', metrics, re.M)
    assert re.search(r'^servecap_lora_slot_wait_seconds_count\{lora_name="sql"\} 1\.0$', metrics, re.M)
    assert float(re.search(r"^servecap_lora_loads_total (\S+)$", metrics, re.M)[1]) == 2.0
    assert re.search(r'^servecap_lora_requests_info\{max_lora="1",running_lora_adapters="",'
                     r'waiting_lora_adapters=""\} \d', metrics, re.M)
