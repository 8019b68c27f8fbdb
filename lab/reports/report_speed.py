"""Benchmark `servecap report` on a big synthetic run: the target is 1,000,000 records in under 15 s.

    python -m lab.reports.report_speed --records 1000000 [--dir runs/bench-1m] [--keep]

Prints the time of each phase (read, summary, figures, write) and the total
against the 15 s target, plus the read rate in MB/s and records/s.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from contract.slo import SLO
from reports import report as report_module
from reports.page.render import sections, to_html, to_markdown
from reports.run_data import load_run
from lab.reports.synthetic import write_synthetic_run

TARGET_S = 15.0


def run_bench(run_dir: Path, records: int, regenerate: bool) -> dict:
    marker = run_dir / "bench.json"
    if regenerate or not marker.exists() or json.loads(marker.read_text()).get("records") != records:
        started = time.perf_counter()
        write_synthetic_run(run_dir, records=records)
        marker.write_text(json.dumps({"records": records}))
        print(f"generated {records:,} records in {time.perf_counter() - started:.1f} s (not timed below)")
    size_mb = (run_dir / "requests.jsonl").stat().st_size / 1e6
    options = report_module.ReportOptions(slo=SLO(ttft_ms=200, tpot_ms=20))
    phases, cpu_phases = {}, {}
    t0, cpu0 = time.perf_counter(), time.process_time()

    def lap(name: str, t: float, c: float) -> tuple[float, float]:
        phases[name], cpu_phases[name] = time.perf_counter() - t, time.process_time() - c
        return time.perf_counter(), time.process_time()

    data = load_run(run_dir)
    t, c = lap("read", t0, cpu0)
    summary = report_module.write_summary(report_module.build_summary(data, options), run_dir / "summary.json")
    t, c = lap("summary", t, c)
    figures = report_module.make_figures(data, summary, run_dir)
    t, c = lap("figures", t, c)
    parts = sections(summary, figures)
    (run_dir / "report.md").write_text(to_markdown("bench", parts))
    (run_dir / "report.html").write_text(to_html("bench", parts, run_dir))
    lap("write", t, c)
    total, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {"cpu_s": cpu, "cpu_phases_s": cpu_phases, "load_avg_1m": os.getloadavg()[0], "cpus": os.cpu_count(),"records": len(data.records), "itl_gaps": len(data.itl_gaps), "jsonl_mb": size_mb,
            "phases_s": phases, "total_s": total, "target_s": TARGET_S}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, help="where to write the synthetic run (default: a temp dir)")
    parser.add_argument("--regenerate", action="store_true", help="rewrite the synthetic run even if present")
    args = parser.parse_args(argv)
    if args.records <= 0:
        parser.error("--records must be positive")
    with tempfile.TemporaryDirectory(prefix="servecap-bench-") as tmp:
        run_dir = args.dir or Path(tmp) / "run"
        result = run_bench(run_dir, args.records, args.regenerate)
    phases = ", ".join(f"{k} {v:.2f} s" for k, v in result["phases_s"].items())
    read_s = result["phases_s"]["read"]
    print(f"{result['records']:,} records ({result['itl_gaps']:,} inter-token gaps, {result['jsonl_mb']:.0f} MB "
          f"of JSONL): {phases}")
    print(f"read rate: {result['jsonl_mb'] / read_s:.0f} MB/s, {result['records'] / read_s:,.0f} records/s")
    cpu_phases = ", ".join(f"{k} {v:.2f} s" for k, v in result["cpu_phases_s"].items())
    print(f"CPU time per phase (all threads): {cpu_phases}")
    print(f"process CPU time (all threads): {result['cpu_s']:.2f} s on {result['cpus']} CPUs, "
          f"1-minute load average {result['load_avg_1m']:.1f} (others' work slows the wall time)")
    verdict = "OK" if result["total_s"] < TARGET_S else "OVER TARGET"
    if result["records"] < 1_000_000:
        verdict = "target applies to 1,000,000 records"
    print(f"report total: {result['total_s']:.2f} s (target < {TARGET_S:.0f} s for 1,000,000 records): {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
