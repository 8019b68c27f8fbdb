"""summary.json is read by attribute, never by string key: a level is a contract.level_result.LevelResult and
the summary a contract.summary.Summary from the records to the page, and only their owners (those two
modules, at the file boundary) turn them into JSON objects and back. A product module (or the notebooks'
code) that indexes a summary level or the summary by string fails here, naming the file, the line and the
read, so the untyped dict cannot come back as an internal bus.

What counts as such a read, precisely enough that the project's other JSON documents (predict's rows,
calc simulate's output, run.json, gate rows, bench results) with look-alike keys do not:
- a key only summary.json has (SUMMARY_ONLY: a level's sections, a distribution's intervals, the
  verdict's rows), on anything: `x["p99_ci95"]`, `x.get("server_latency")`;
- any field of a level or of the summary on a value named as a summary level or the summary
  (`level`, `lvl`, `summary`): `level["metrics"]`, `lvl.get("offered")`, `summary["levels"]` (a dict that
  is not one is named for what it is: `point`, `row`, `classic`, `document`);
- the `levels` of summary.json read straight from the file: `json.loads(summary_path.read_text())["levels"]`.
"""

import ast
import json
from dataclasses import fields
from pathlib import Path

from contract.level_result import LevelResult
from contract.summary import Summary

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("contract", "engine_core", "reference_server", "calculators", "loadgen", "reports", "servecap", "lab")
OWNERS = {"contract/summary.py", "contract/level_result.py"}   # the file boundary: JSON in and out
SUMMARY_ONLY = frozenset({
    "loadgen", "by_turn", "by_model", "lora_slot_waits", "server_latency", "host_steal", "client_vs_server",
    "energy_per_output_token_j", "slo_attainment", "goodput_rps", "lag_limited",
    "p50_ci95", "p95_ci95", "p99_ci95", "ci_method",
    "max_sustainable", "operating_point", "cost_by_strategy", "first_failing_level", "confident_level",
    "unstable_levels", "machine_drift_levels", "loadgen_warnings", "speculation_crossover",
})
SUMMARY_NAMES = frozenset({"level", "lvl", "summary"})
FIELDS = frozenset(f.name for cls in (LevelResult, Summary) for f in fields(cls)) - {"extra"}


def _string_read(node: ast.AST) -> tuple[ast.AST, str] | tuple[None, None]:
    """(the value read from, the key) of `x["key"]` and `x.get("key", ...)`."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
        return node.value, node.slice.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return node.func.value, node.args[0].value
    return None, None


def _summary_json_loaded(value: ast.AST) -> bool:
    """`json.load(s)(...)` of something that names summary.json (calc simulate's JSON on stdout is not it)."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and value.func.attr in ("load", "loads") and ast.unparse(value.func.value) == "json"
            and "summary" in ast.unparse(value))


def summary_reads(source: str, where: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        value, key = _string_read(node)
        if key is None:
            continue
        if (key in SUMMARY_ONLY
                or isinstance(value, ast.Name) and value.id in SUMMARY_NAMES and key in FIELDS
                or key == "levels" and _summary_json_loaded(value)):
            found.append((node.lineno, node.col_offset, f"{where}:{node.lineno}: {ast.unparse(node)}"))
    return [text for _, _, text in sorted(found)]


def _sources():
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            name = str(path.relative_to(REPO))
            if name not in OWNERS:
                yield name, path.read_text()
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for index, cell in enumerate(cells):
            if cell["cell_type"] == "code":
                code = "".join(line for line in cell["source"] if not line.lstrip().startswith(("%", "!")))
                yield f"{path.relative_to(REPO)} cell {index}", code


def test_no_product_module_reads_a_summary_level_by_string_key():
    found = [read for name, source in _sources() for read in summary_reads(source, name)]
    assert found == [], "read these by attribute (contract.summary, contract.level_result):\n" + "\n".join(found)


def test_the_check_sees_a_string_read_of_a_summary_and_leaves_other_documents_alone():
    reads = summary_reads(
        "p99 = level['metrics']['ttft_s']['p99']\n"
        "ci = stats.get('p99_ci95')\n"
        "levels = json.loads((run / 'summary.json').read_text())['levels']\n"
        "rate = lvl.get('output_tokens_per_s')\n"
        "row = summary['verdict']['max_sustainable'][0]\n", "x.py")
    assert reads == ["x.py:1: level['metrics']", "x.py:2: stats.get('p99_ci95')",
                     "x.py:3: json.loads((run / 'summary.json').read_text())['levels']",
                     "x.py:4: lvl.get('output_tokens_per_s')", "x.py:5: summary['verdict']",
                     "x.py:5: summary['verdict']['max_sustainable']"]
    others = ("tpot = row['metrics']['tpot_s']['p50']['value']\n"     # predict's rows
              "point = json.loads(done.stdout)['levels'][0]['output_tokens_per_s']\n"  # calc simulate's JSON
              "plan = run['load_plan']\n"
              "p99 = level.metrics['ttft_s'].p99\n")
    assert summary_reads(others, "y.py") == []
