"""requests.meta.json: per-level load-generator health merged atomically beside the records."""

import os

from contract.loadgen_meta import meta_path, read_meta, update_meta


def test_meta_merges_levels(tmp_path):
    records = tmp_path / "requests.jsonl"
    assert meta_path(records).name == "requests.meta.json"
    assert read_meta(records) == {}
    update_meta(records, "c=1", {"limited_by_loadgen": False})
    update_meta(records, "c=2", {"limited_by_loadgen": True})
    assert read_meta(records)["levels"] == {"c=1": {"limited_by_loadgen": False}, "c=2": {"limited_by_loadgen": True}}
    assert not [p for p in os.listdir(tmp_path) if ".tmp" in p]
