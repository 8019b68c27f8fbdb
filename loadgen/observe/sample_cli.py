"""`servecap sample`: sample the device (NVML or host) and optionally scrape /metrics.

    servecap sample --out DIR [--interval S] [--pid PID] [--metrics-url URL] [--duration S]

Writes DIR/samples.csv (and DIR/server_metrics.csv with --metrics-url) until
--duration passes or Ctrl-C / SIGTERM; for servers on another host, run it there.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from contract.options import CommandParser, add_options, add_output_arguments
from loadgen.observe.periodic_csv import IntervalOption
from loadgen.observe.samplers import start_sampler
from loadgen.observe.scraper import start_scraper


def main(argv: list[str]) -> int:
    parser = CommandParser(prog="servecap sample", description=__doc__.split("\n")[0])
    add_output_arguments(parser, out="directory for samples.csv and server_metrics.csv", required=True, report=False)
    add_options(parser, IntervalOption, typed=True)
    parser.set_defaults(interval=1.0)
    parser.add_argument("--pid", type=int, default=None, help="server process to sample on the host fallback")
    parser.add_argument("--metrics-url", default=None, help="Prometheus endpoint to scrape, e.g. http://h:8000/metrics")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--all-metrics", action="store_true",
                        help="keep every family /metrics exposes (default: those servecap's report reads)")
    args = parser.parse_args(argv)
    if args.interval <= 0:
        parser.error("--interval must be > 0")
    if args.duration is not None and args.duration <= 0:
        parser.error("--duration must be > 0")
    out = Path(args.out)
    try:
        sampler = start_sampler(out / "samples.csv", args.interval, args.pid)
        scraper = (start_scraper(args.metrics_url, out / "server_metrics.csv", args.interval, keep_all=args.all_metrics)
                   if args.metrics_url else None)
    except ValueError as exc:
        print(f"servecap sample: error: {exc}", file=sys.stderr)
        return 2
    if sampler.note:
        print(sampler.note, file=sys.stderr)
    print(f"sampling {sampler.kind} every {args.interval:g} s -> {out / 'samples.csv'}"
          + (f"; scraping {args.metrics_url} -> {out / 'server_metrics.csv'}" if scraper else ""), flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait(args.duration)
    sampler.stop()
    if scraper is not None:
        scraper.stop()
    print(f"wrote {sampler.rows_written} sample rows"
          + (f", {scraper.scrapes} scrapes ({scraper.failures} failed)" if scraper else ""), flush=True)
    return 0
