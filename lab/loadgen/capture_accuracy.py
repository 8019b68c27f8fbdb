"""The load generator's timing error against a loopback packet capture (tcpdump), around any command.

    python -m lab.loadgen.capture_accuracy --records runs/cap/requests.jsonl --pcap /tmp/cap.pcap -- \
        servecap sweep --model tiny --strategies continuous --concurrency 16 --duration 20 --out runs/cap --no-report

Starts `tcpdump -i lo` (full packets, nanosecond kernel timestamps), runs the command, stops the
capture, reads it (lab.loadgen.packet_capture) and compares each `ok` record's TTFT and ITL with
the capture's (lab.loadgen.accuracy.compare): |error| p50/p99/max in ms, next to the loop lag
(p50/p99/max) the generator measured itself (requests.meta.json), which bounds the error.

tcpdump needs root (or CAP_NET_RAW) and runs on the same cores as everything else: on a small
machine it adds load of its own, so a capture measures a slightly busier box than the run alone.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from lab.loadgen.accuracy import Comparison, compare
from lab.loadgen.packet_capture import read_truth
from contract.loadgen_meta import read_meta
from contract.records import read_records

READY_TIMEOUT_S = 10.0
BUFFER_KIB = 65536   # the kernel's capture buffer: a burst on a busy box must not overflow it


class Capture:
    """`tcpdump -i lo -w PATH` for the life of a `with` block."""

    def __init__(self, pcap: Path, interface: str = "lo") -> None:
        if shutil.which("tcpdump") is None:
            raise RuntimeError("tcpdump is not installed (Debian: apt-get install -y tcpdump)")
        self.pcap, self.interface = pcap, interface
        self.process: subprocess.Popen | None = None
        self.dropped: int | None = None   # packets the kernel dropped before tcpdump read them (a busy box)

    def __enter__(self) -> "Capture":
        self.pcap.parent.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            # --immediate-mode: libpcap hands over each packet at once; without it the kernel's ring delivers
            # whole blocks (on a ~1 s timeout), and the block still filling when tcpdump is stopped is lost
            # uncounted (the last requests of a run went missing from about one capture in three)
            ["tcpdump", "-i", self.interface, "-n", "-U", "--immediate-mode", "-s", "0", "-B", str(BUFFER_KIB),
             "--time-stamp-precision=nano",
             "-w", str(self.pcap), "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        line = self.process.stderr.readline()   # "listening on lo, ..." once it captures
        if "listening on" not in line:
            self.process.kill()
            raise RuntimeError(f"tcpdump did not start: {line.strip() or self.process.stderr.read()[-500:]}")
        return self

    def __exit__(self, *exc) -> None:
        time.sleep(0.2)   # the last packets reach the capture
        self.process.send_signal(signal.SIGINT)
        try:
            _, tail = self.process.communicate(timeout=READY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, tail = self.process.communicate()
        match = re.search(r"(\d+) packets? dropped by kernel", tail or "")
        self.dropped = int(match.group(1)) if match else None


def compare_with_capture(records: Path, pcap: Path) -> tuple[Comparison, dict]:
    """(the comparison of ok measure records with the capture, the loop lag per level from the meta file)."""
    rows = [r for r in read_records(records) if r["phase"] == "measure"]
    lags = {level: {key: meta.get(key) for key in ("loop_lag_p50_s", "loop_lag_p99_s", "loop_lag_max_s")}
            for level, meta in (read_meta(records).get("levels") or {}).items()}
    return compare(rows, read_truth(pcap)), lags


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.loadgen.capture_accuracy", description=__doc__.split("\n")[0])
    parser.add_argument("--records", required=True, type=Path, help="the requests.jsonl the command writes")
    parser.add_argument("--pcap", required=True, type=Path, help="where the capture goes")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run under capture")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to capture after --")
    try:
        with Capture(args.pcap) as capture:
            code = subprocess.run(command).returncode
    except RuntimeError as exc:
        print(f"capture_accuracy: {exc}", file=sys.stderr)
        return 2
    if code != 0:
        print(f"capture_accuracy: the command exited {code}", file=sys.stderr)
        return 1
    comparison, lags = compare_with_capture(args.records, args.pcap)
    if args.json:
        print(json.dumps({"comparison": asdict(comparison), "loop_lag": lags, "dropped": capture.dropped}))
        return 0
    print(f"matched {comparison.matched} ok records to the capture ({comparison.unmatched} unmatched: a packet the "
          f"kernel dropped loses the rest of its connection; dropped {capture.dropped}), {comparison.chunks} content chunks")
    rows = [("TTFT", comparison.ttft), ("ITL", comparison.itl), ("send", comparison.send_delay)]
    if comparison.ttfa is not None:
        rows.insert(1, ("TTFA", comparison.ttfa))
    for name, s in rows:
        print(f"{name:>5} |error| ms: p50 {s.p50_abs_ms:.3f}  p99 {s.p99_abs_ms:.3f}  max {s.max_abs_ms:.2f}  "
              f"(mean signed {s.mean_ms:+.3f}, n={s.count})")
    for level, lag in lags.items():
        if lag["loop_lag_p99_s"] is not None:
            print(f"loop lag {level}: p50 {lag['loop_lag_p50_s'] * 1e3:.3f}  p99 {lag['loop_lag_p99_s'] * 1e3:.3f}  "
                  f"max {lag['loop_lag_max_s'] * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
