"""The engine bench's printed tables (`python -m reference_server.engine_bench` without --json): one
pass's figures (`print_table`), and with --repeats each figure's spread over the passes (`print_spread`).
A log or a pipe gets the whole width (160 columns); a terminal its own."""

from __future__ import annotations

import sys

from rich.console import Console


def print_table(result: dict) -> None:
    from rich.table import Table

    fwd, bound = result["forward_only"], result["bound"]
    batch = result["workload"]["max_batch"]
    console = Console(width=None if sys.stdout.isatty() else 160)   # a log or pipe gets the whole table
    console.print(f"{result['preset']} on {result['device']} ({result['dtype']}, {result['threads']} threads); "
                  f"forward pass alone: {fwd['tokens_per_s_b1']:.1f} tok/s at batch 1, gain x{fwd['gain']:.2f} "
                  f"at batch {batch} (x{fwd['gain_mixed']:.2f} with mixed contexts; mean context {fwd['context']}), "
                  f"prefill {fwd['prefill_tokens_per_s']:.0f} tok/s; ideal for this workload "
                  f"{bound['ideal_tokens_per_s']:.1f} tok/s ({bound['prefill_share_of_ideal']:.0%} of it prefill)")
    table = Table("strategy", "requests", "output tok/s", "of ideal", "mean batch", "gain vs none",
                  "of ceiling", "prefill share", "decode step p50/p99 ms", "wall s")
    for name, s in result["strategies"].items():
        gain = f"x{s['gain_vs_none']:.2f}" if "gain_vs_none" in s else "-"
        ceiling = f"{s['share_of_ceiling']:.0%}" if "share_of_ceiling" in s else "-"
        step = s["decode_step_ms"]
        table.add_row(name, str(s["num_requests"]), f"{s['output_tokens_per_s']:.1f}", f"{s['share_of_ideal']:.0%}",
                      f"{s['mean_batch_size']:.1f}", gain, ceiling, f"{s['prefill_share']:.1%}",
                      f"{step['p50']:.0f}/{step['p99']:.0f}" if step else "-", f"{s['wall_s']:.1f}")
    console.print(table)
    sheet = result.get("datasheet")
    line = (f"memory bandwidth achieved by the bare decode pass: {fwd['achieved_gb_s_b1']:.1f} GB/s at batch 1, "
            f"{fwd[f'achieved_gb_s_b{batch}']:.1f} GB/s at batch {batch}")
    if sheet and sheet["bandwidth_gb_s"]:
        line += (f" ({fwd['share_of_datasheet_b1']:.1%} and {fwd[f'share_of_datasheet_b{batch}']:.1%} of the "
                 f"{sheet['device_name']}'s {sheet['bandwidth_gb_s']:.0f} GB/s datasheet figure, catalog {sheet['gpu']})")
    elif sheet:
        line += f" ({sheet['device_name']} is not in the GPU catalog: give --gpu for its datasheet figure)"
    console.print(line)


def print_spread(spread: dict) -> None:
    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print("over the repeats (median, min-max):")
    for key, s in spread.items():
        values = " ".join(f"{v:.3g}" for v in s["values"])
        console.print(f"  {key:<34} {s['median']:>9.3g}  ({s['min']:.3g}-{s['max']:.3g})   [{values}]")
