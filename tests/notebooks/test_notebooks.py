"""The two notebooks run headless in this venv's kernel and say what the package computes.

Each is executed from a fresh copy (the committed .ipynb stays stripped), with the working
directory set to notebooks/ as Jupyter would. The load-test notebook is pointed at an empty
runs directory, so it always takes the generate-a-sample-run path (a real `servecap sweep`
of the reference server), whatever a developer left under runs/.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

# nbformat and nbclient are imported in the tests that use them: nbformat pulls in jsonschema, whose
# format checkers build a grammar at import (~2.7 s), and every pytest worker collects this module
from calculators.fleet import fleet, replica_from_roofline
from engine_core.gpus import get_gpu
from engine_core.models import resolve_model
from reports.report import ReportOptions, build_summary
from reports.run_data import load_run
from waiting import wait_until

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
CAPACITY = NOTEBOOKS / "capacity_planning.ipynb"
LOAD_TEST = NOTEBOOKS / "load_test_analysis.ipynb"


def _execute(path: Path, out_dir: Path):
    """Run a copy of `path` to the end (CellExecutionError on any error); keep it in out_dir for debugging."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    # "python3" resolves to the interpreter running this test: the project's venv
    client = NotebookClient(nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}})
    try:
        client.execute()
    finally:
        nbformat.write(nb, out_dir / path.name)
    return nb


def _outputs(nb, mime: str) -> list[str]:
    found = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.output_type == "stream" and mime == "text/plain":
                found.append(out.text)
            elif mime in out.get("data", {}):
                found.append(out.data[mime])
    return found


def _parameters(nb) -> dict:
    """The values of the notebook's parameters cell (the one tagged `parameters`)."""
    cell, = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    namespace: dict = {}
    exec(cell.source, namespace)  # plain assignments only
    return namespace


@pytest.mark.parametrize("path", [CAPACITY, LOAD_TEST], ids=lambda p: p.stem)
def test_committed_notebooks_are_stripped_with_parameters_first(path):
    import nbformat

    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code), "strip outputs before committing"
    assert "parameters" in code[0].metadata.get("tags", [])
    assert nb.metadata["kernelspec"]["name"] == "python3"


@pytest.mark.slow  # a Jupyter kernel process
@pytest.mark.e2e
def test_capacity_notebook_answers_with_the_calculators(tmp_path):
    nb = _execute(CAPACITY, tmp_path)
    p = _parameters(nb)
    arch, gpu = resolve_model(p["MODEL"]), get_gpu(p["GPU"], hourly_usd=p["HOURLY_USD"])
    rep = replica_from_roofline(arch, gpu, dtype=p["DTYPE"], tp=p["TP"], prompt_tokens=p["PROMPT_TOKENS"],
                                output_tokens=p["OUTPUT_TOKENS"], max_num_seqs=p["MAX_NUM_SEQS"],
                                gpu_memory_utilization=p["GPU_MEMORY_UTILIZATION"], max_model_len=p["MAX_MODEL_LEN"])
    plan = fleet(p["TARGET_RATE_RPS"], p["SLO_P99_S"], rep, arrival_cv2=p["ARRIVAL_CV2"], service_cv2=p["SERVICE_CV2"])

    answer = _outputs(nb, "text/markdown")[-1]
    assert f"**Fit**: {arch.name} in {p['DTYPE']} on {p['TP']} x {gpu.name}: fits" in answer
    assert f"**Fleet**: {plan.replicas} replicas ({plan.gpus} GPUs) carry {p['TARGET_RATE_RPS']:g} req/s" in answer
    assert "**Cost**: $" in answer and "**Cheapest compared**" in answer
    # every speed carries its published-point error band, and the fleet the replicas that band spans
    assert "ms (±" in answer and f"published points on {gpu.family}" in answer
    assert f"{plan.replicas_range[0]} to {plan.replicas_range[1]} replicas within the speed band" in answer

    comparison = next(html for html in _outputs(nb, "text/html") if "usd_per_million_output_tokens" in html)
    for name in p["COMPARE_GPUS"] + p["COMPARE_DTYPES"]:
        assert name in comparison
    assert len(_outputs(nb, "image/png")) == 2  # concurrency vs context, cost vs utilization
    text = "\n".join(_outputs(nb, "text/plain"))   # section 9: servecap predict on the simulated sample run
    assert "calibrated on" in text and "max load under the SLO:" in text
    assert f"EXTRAPOLATION to {p['GPU']}" in text
    predicted = next(html for html in _outputs(nb, "text/html") if "ttft_s p99 (ms)" in html)
    assert all(f"c={c}" in predicted for c in p["PREDICT_CONCURRENCY"])


@pytest.mark.slow
@pytest.mark.e2e
def test_load_test_notebook_generates_a_sample_run_and_reaches_the_verdict(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    monkeypatch.setenv("SERVECAP_RUNS_DIR", str(runs))
    monkeypatch.delenv("SERVECAP_RUN_DIR", raising=False)
    notebook_files = sorted(NOTEBOOKS.iterdir())
    nb = _execute(LOAD_TEST, tmp_path)

    run_dir, = [d for d in runs.iterdir() if (d / "requests.jsonl").is_file()]
    assert run_dir.name.startswith("notebook-sample-")
    data = load_run(run_dir)
    strategies = sorted(data.records["strategy"].unique())
    assert strategies == ["continuous", "none"]
    summary = build_summary(data, ReportOptions())

    text = "\n".join(_outputs(nb, "text/plain"))
    assert f"run directory: {run_dir.resolve()}" in text
    for level in summary.levels:
        assert level.level in text and level.requests > 0
    verdict = _outputs(nb, "text/markdown")[-1]
    assert "SLOs (p99): ttft_ms = 250, tpot_ms = 20." in verdict  # the sample sweep's SLOs, from run.json
    point = summary.verdict.operating_point  # None only if a loaded CI box misses the SLOs at c=1
    assert (f"Operating point: **{point.level}**" if point else "Operating point: none") in verdict
    # 4 latency curves, throughput vs latency, goodput, CDFs, timelines, batch/KV, predicted vs measured
    assert len(_outputs(nb, "image/png")) == 10
    assert (run_dir / "notebook_figures" / "predicted_vs_measured.png").is_file()
    assert sorted(NOTEBOOKS.iterdir()) == notebook_files  # nothing written beside the notebooks


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.e2e
def test_jupyter_lab_from_the_venv_serves_the_notebooks_with_the_venv_kernel(tmp_path):
    port, token = _free_port(), "servecap-test"
    lab = subprocess.Popen(
        [str(Path(sys.executable).with_name("jupyter-lab")), "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={NOTEBOOKS.parent}",
         "--allow-root"],  # CI containers often run as root; jupyter refuses root without it
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path), "JUPYTER_RUNTIME_DIR": str(tmp_path)})
    base, headers = f"http://127.0.0.1:{port}", {"Authorization": f"token {token}"}
    try:
        def serving() -> bool:
            assert lab.poll() is None, f"jupyter lab exited with {lab.returncode}"
            try:
                return requests.get(f"{base}/api/status", headers=headers, timeout=2).ok
            except requests.ConnectionError:
                return False

        wait_until(serving, timeout=60, interval=0.1, what="jupyter lab answering /api/status")
        assert requests.get(f"{base}/lab", headers=headers, timeout=10).status_code == 200
        listing = requests.get(f"{base}/api/contents/notebooks", headers=headers, timeout=10).json()
        assert {CAPACITY.name, LOAD_TEST.name} <= {item["name"] for item in listing["content"]}
        specs = requests.get(f"{base}/api/kernelspecs", headers=headers, timeout=10).json()
        assert specs["default"] == "python3" and "python3" in specs["kernelspecs"]
    finally:
        lab.terminate()
        lab.wait(timeout=30)
