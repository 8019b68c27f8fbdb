"""The house's layers (docs/architecture.md, "Layers"): a module imports only its own layer or those
below it. A new import that runs up a layer fails here, naming the file, the line and the module.
The lab (lab/: benchmarks and evidence) is above them all: it may import any product module, and no
product module imports it."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# bottom first; within a layer, the longest matching prefix decides
LAYERS: list[tuple[str, ...]] = [
    ("contract",),                        # the run directory's formats and the workload syntax (pure)
    ("engine_core",),                     # the pure engine core and the model/GPU catalogs, under server and calculators
    ("calculators",),                     # pure capacity models and the simulator
    ("reference_server", "loadgen"),      # the serving process; the load generator
    ("reports",),                         # run dir -> summary, report, predictions, the gate
    ("servecap",),                        # the front door, the orchestrators (sweep, compare), launch
]
PRODUCT = ("contract", "engine_core", "reference_server", "calculators", "loadgen", "reports", "servecap")


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    return None if best is None else best[0]


def imported_modules(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name


def product_files():
    for top in PRODUCT:
        yield from sorted((REPO / top).rglob("*.py"))


def upward_imports() -> list[str]:
    found = []
    for path in product_files():
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        own = layer_of(module)
        for line, target in imported_modules(path):
            other = layer_of(target)
            if other is not None and other > own:
                found.append(f"{path.relative_to(REPO)}:{line} imports {target} ({LAYERS[other][0]} is above "
                             f"{LAYERS[own][0]})")
    return found


def lab_imports() -> list[str]:
    return [f"{path.relative_to(REPO)}:{line} imports {target} (the product never imports the lab)"
            for path in product_files() for line, target in imported_modules(path)
            if target == "lab" or target.startswith("lab.")]


def test_no_module_imports_a_layer_above_its_own():
    assert upward_imports() == []


def test_no_product_module_imports_the_lab():
    assert lab_imports() == []
    assert not [path for path in product_files() if "bench" in path.relative_to(REPO).parts[:-1]], \
        "a product package has a bench/ folder again: benchmarks go to lab/<package>/"


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    assert layer_of("loadgen.scenario.load_run") > layer_of("contract.records")
    assert layer_of("engine_core.scheduling.block_manager") < layer_of("calculators.sim.sim_engine")
    assert layer_of("engine_core.architecture") < layer_of("calculators.kv")
    assert layer_of("reference_server.engine.model") > layer_of("engine_core.architecture")
    assert layer_of("reference_server.engine.model") > layer_of("calculators.sim.step_model")
    fake = tmp_path / "loadgen" / "x.py"
    fake.parent.mkdir()
    fake.write_text("def f():\n    from reports.summary import build\n")
    assert list(imported_modules(fake)) == [(2, "reports.summary")]
    monkeypatch.setitem(globals(), "REPO", tmp_path)
    monkeypatch.setitem(globals(), "product_files", lambda: iter([fake]))
    assert upward_imports() == ["loadgen/x.py:2 imports reports.summary (reports is above reference_server)"]
    fake.write_text("import lab.reports.synthetic\nfrom lab import reports\n")
    assert lab_imports() == ["loadgen/x.py:1 imports lab.reports.synthetic (the product never imports the lab)",
                             "loadgen/x.py:2 imports lab (the product never imports the lab)"]
