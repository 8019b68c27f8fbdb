"""The held-out serving curves (roofline_fit/published_serving_curves.csv): they parse, name their sources,
stay inside the catalogs and share no source with the roofline fit. Reads files only; simulates nothing."""

from __future__ import annotations

import csv
from importlib import resources

import pytest

from lab.calculators.serving_curves import (
    COLUMNS,
    METRICS,
    SIM_ENGINES,
    load_curve_sources,
    load_rows,
    simulate_argv,
    simulator_engine,
)
from calculators.cli.args import build_parser
from engine_core.dtypes import parse_dtype
from engine_core.gpus import gpu_names
from engine_core.models import model_names
from calculators.roofline_fit.dataset import load_points, load_sources


@pytest.fixture(scope="module")
def rows():
    return load_rows()


def test_the_csv_parses_with_its_columns_and_unique_ids(rows):
    text = resources.files("calculators").joinpath("roofline_fit/published_serving_curves.csv").read_text()
    assert tuple(csv.DictReader(text.splitlines()).fieldnames) == COLUMNS
    assert rows and len({r.id for r in rows}) == len(rows)
    assert {r.metric for r in rows} <= set(METRICS)
    for r in rows:
        assert r.value > 0 and r.load > 0 and r.tp >= 1 and r.input_tokens >= 1 and r.output_tokens >= 1
        assert r.unit == ("tok/s" if r.metric == "output_tok_s" else "ms")


def test_a_malformed_row_is_named_by_its_line():
    header = ",".join(COLUMNS)
    good = "x-1,s,vllm,0,llama-3.1-8b,h100-sxm,bf16,1,100,100,concurrency,4,ttft_ms,mean,12.5,ms,"
    assert len(load_rows(f"{header}\n{good}\n")) == 1
    with pytest.raises(ValueError, match="line 2: .*statistic"):
        load_rows(f"{header}\n{good.replace(',mean,', ',p42,')}\n")
    with pytest.raises(ValueError, match="line 3: .*positive"):
        load_rows(f"{header}\n{good}\n{good.replace('x-1', 'x-2').replace(',12.5,', ',-1,')}\n")
    with pytest.raises(ValueError, match="unique"):
        load_rows(f"{header}\n{good}\n{good}\n")


def test_every_source_is_described_with_where_to_read_it(rows):
    sources = load_curve_sources()
    assert {r.source for r in rows} <= set(sources)
    for name in {r.source for r in rows}:
        entry = sources[name]
        assert entry["url"].startswith("https://"), name
        assert entry["title"] and entry["read"] and entry["accessed"], name


def test_models_gpus_and_dtypes_are_in_the_catalog(rows):
    assert {r.model for r in rows} <= set(model_names())
    assert {r.gpu for r in rows} <= set(gpu_names())
    for dtype in {r.dtype for r in rows}:
        assert parse_dtype(dtype).name == dtype


def test_no_source_is_one_the_roofline_was_fitted_on(rows):
    fitted = set(load_sources()) | {p.source for p in load_points()}
    assert not {r.source for r in rows} & fitted
    assert not set(load_curve_sources()) & fitted


def test_each_curve_becomes_a_calc_simulate_command_with_only_its_configuration(rows):
    row = rows[0]
    curve = {k: getattr(row, k) for k in ("model", "gpu", "dtype", "tp", "input_tokens", "output_tokens",
                                          "load_kind")}
    argv = simulate_argv(curve, [1, 5.0, 25], simulator_engine(row.engine, "published"))
    args = build_parser().parse_args(argv)
    assert args.command == "simulate" and args.json and args.model == row.model and args.tp == row.tp
    assert args.prompt_tokens == str(row.input_tokens)   # the workload's forms: N
    assert args.concurrency == "1,5,25"                 # the load's own syntax, read by LoadSpec
    flags = {a for a in argv if a.startswith("--")}   # the configuration only: every other setting is the default
    assert flags <= {"--json", "--model", "--gpu", "--dtype", "--tp", "--prompt-tokens", "--output-tokens",
                     "--concurrency", "--rates", "--engine"}
    assert simulator_engine("sglang", "published") == "sglang" and simulator_engine("tgi", "published") == "vllm"
    assert simulator_engine("tensorrt-llm", "vllm") == "vllm" and simulator_engine("vllm", "none") is None
    for engine in SIM_ENGINES:   # every engine the rule can pick is one calc simulate takes
        assert build_parser().parse_args([*argv[:-2], "--engine", engine]).engine == engine
