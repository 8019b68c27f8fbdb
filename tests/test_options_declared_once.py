"""Every option is declared once (issue 53, item 4): by the module that owns what it means, and every
command that takes it adds that declaration (contract.options: `add_options`, or an owner's
`add_*_arguments`). A second declaration of a long option name fails here, naming both places, unless
the allow-list below says why the two are different options.

A declaration is a literal long option of an `add_argument` call, an `option(...)` field of a dataclass
(its `flag=`, else its name; with `prefix=` where the class is added with one), or a strategy's
`limit(...)` field (all strategies' limits are one declaration: `add_limit_arguments`). The product
packages' `add_argument(` calls are counted too: they stay at most MAX_ADD_ARGUMENT.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("contract", "engine_core", "reference_server", "loadgen", "calculators", "reports", "servecap")
MAX_ADD_ARGUMENT = 220   # 443 when the issue was written; the groups' declarations replaced the copies
LIMITS = "engine_core/scheduling/strategies"

# Long options that mean different things to different commands, each owner's declaration its own.
DIFFERENT = {
    "--model": ({"engine_core/options.py", "loadgen/scenario/run_settings.py", "servecap/experiment/targets.py"},
                "the model an engine loads, sizes or emulates vs the model name the load generator's requests "
                "carry (an endpoint routes on it); the target's: see PENDING"),
    "--seed": ({"contract/workload.py", "engine_core/options.py"},
               "what is sent (lengths, prompts, arrival times) vs the engine's weights and sampling"),
    "--reasoning-tokens": ({"contract/workload.py", "reference_server/cli.py"},
                           "what each request asks for vs the server's own budget for requests that ask none"),
    "--api-key": ({"loadgen/scenario/chat_config.py", "reference_server/cli.py"},
                  "the key a client sends vs the key a server requires"),
    "--config": ({"contract/config_file.py", "reports/gate/cli.py"},
                 "a command's options from a file vs the gate's thresholds (gate.toml), which are not options"),
    "--duration": ({"contract/load.py", "loadgen/observe/sample_cli.py"},
                   "a load level's measured window vs how long `servecap sample` samples (default: until stopped)"),
    **{flag: ({"calculators/cli/args.py", "reference_server/training/train.py"},
              "calc's decode batch, cached context and step-time CSV vs training's sequences per optimizer step, "
              "bytes per sequence and step count") for flag in ("--batch", "--context", "--steps")},
}
# The same option declared twice, the second a pass-through: the experiment's target and run options that
# the runner hands on unchanged to the process or report that declares it too (serve's --emulate, Locust's
# --grpc-target, the report's --diagnostics and --model-config, the engine bench's --strategies). Each is
# one concept; folding the higher declaration into the lower one is left to do.
PENDING = {
    "--emulate": {"reference_server/cli.py", "servecap/experiment/targets.py"},        # serve's, passed through
    "--strategies": {"reference_server/engine_bench/run.py", "servecap/experiment/targets.py"},
    "--grpc-target": {"loadgen/classify.py", "servecap/experiment/targets.py"},        # Locust's, passed through
    "--diagnostics": {"reports/cli.py", "servecap/experiment/run_options.py"},          # the report's, and more
    "--model-config": {"reports/cli.py", "servecap/experiment/run_options.py"},
}


def product_files() -> list[Path]:
    return [path for top in PRODUCT for path in sorted((REPO / top).rglob("*.py")) if "__pycache__" not in path.parts]


def _literal(node: ast.AST):
    return node.value if isinstance(node, ast.Constant) else None


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
    return None


def _prefixes(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """class name -> the prefixes `add_options(parser, Class, prefix=...)` adds it with ("*": not a literal;
    None: added without one too)."""
    found: dict[str, set[str | None]] = defaultdict(set)
    for tree in trees.values():
        for node in ast.walk(tree):
            if _call_name(node) == "add_options" and len(node.args) >= 2 and isinstance(node.args[1], ast.Name):
                prefix = [k.value for k in node.keywords if k.arg == "prefix"]
                found[node.args[1].id].add((_literal(prefix[0]) or "*") if prefix else None)
    return found


@functools.cache
def declarations() -> dict[str, set[str]]:
    """long option -> the places declaring it ("file:line"; the strategies' limits: one place)."""
    trees = {str(path.relative_to(REPO)): ast.parse(path.read_text(), filename=str(path)) for path in product_files()}
    prefixes = _prefixes(trees)
    found: dict[str, set[str]] = defaultdict(set)
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if _call_name(node) == "add_argument":
                for arg in node.args:
                    if isinstance(_literal(arg), str) and arg.value.startswith("--"):
                        found[arg.value].add(f"{name}:{node.lineno}")
            if not isinstance(node, ast.ClassDef):
                continue
            for stmt in node.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                kind = _call_name(stmt.value)
                if kind == "limit" and name.startswith(LIMITS):
                    found["--" + stmt.target.id.replace("_", "-")].add(LIMITS)
                if kind != "option":
                    continue
                keywords = {k.arg: k.value for k in stmt.value.keywords}
                flags = [_literal(keywords["flag"]) if "flag" in keywords else "--" + stmt.target.id.replace("_", "-")]
                if "aliases" in keywords and isinstance(keywords["aliases"], ast.Tuple):
                    flags += [_literal(item) for item in keywords["aliases"].elts]
                for flag in flags:
                    for prefix in prefixes.get(node.name, {None}):
                        found[f"--{prefix}-{flag[2:]}" if prefix else flag].add(f"{name}:{stmt.lineno}")
    return found


def _file(place: str) -> str:
    return place.split(":")[0]


def test_add_argument_calls_stay_within_the_target():
    count = sum(path.read_text().count("add_argument(") for path in product_files())
    assert count <= MAX_ADD_ARGUMENT, (f"{count} add_argument( calls in the product packages (at most "
                                       f"{MAX_ADD_ARGUMENT}): add an owner's declaration instead of a copy")


def test_each_long_option_is_declared_once():
    allowed = {flag: files for flag, (files, _) in DIFFERENT.items()}
    for flag, files in PENDING.items():
        allowed[flag] = allowed.get(flag, set()) | files
    twice = {flag: places for flag, places in declarations().items() if len(places) > 1}
    wrong = [f"{flag}: {', '.join(sorted(places))}" for flag, places in sorted(twice.items())
             if {_file(place) for place in places} - allowed.get(flag, set())
             or len(places) > len(allowed.get(flag, ()))]
    assert not wrong, ("declared in more than one place (add the owner's declaration, or say in DIFFERENT why "
                       "these are different options):\n  " + "\n  ".join(wrong))


def test_the_allow_lists_name_only_options_still_declared_twice():
    twice = {flag for flag, places in declarations().items() if len(places) > 1}
    stale = sorted(set(DIFFERENT) - twice) + sorted(set(PENDING) - twice)
    assert not stale, f"declared once now: drop {', '.join(stale)} from the allow-lists"


def test_the_scan_finds_the_shared_groups():
    found = declarations()
    # option fields (with their flag=), a prefixed group, and the strategies' limits as one declaration
    assert {_file(p) for p in found["--warmup"]} == {"contract/load.py"}
    assert {_file(p) for p in found["--prompt-tokens"]} == {"contract/workload.py"}
    assert {_file(p) for p in found["--tp"]} == {"engine_core/options.py"}
    assert found["--classifier-max-batch-size"] and found["--embedding-max-batch-size"]
    assert found["--max-num-seqs"] == {LIMITS}
