"""The packet-capture truth: a hand-built pcap read back exactly, and (with tcpdump) a real loopback capture
whose times agree with the scripted server's own log."""

import json
import os
import shutil
import struct
import subprocess

import numpy as np
import pytest

from lab.loadgen.capture_accuracy import Capture, compare_with_capture
from lab.loadgen.packet_capture import read_truth
from contract.records import read_records
from loadgen_helpers import LOCUST, CHAT, REPO, _env, read_truth as scripted_truth, scripted_server

CLIENT, SERVER = ("127.0.0.1", 40000), ("127.0.0.1", 8000)


def _frame(src, dst, seq, payload: bytes) -> bytes:
    tcp = struct.pack(">HHIIBBHHH", src[1], dst[1], seq, 0, 5 << 4, 0x18, 65535, 0, 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0, 64, 6, 0,
                     bytes(map(int, src[0].split("."))), bytes(map(int, dst[0].split("."))))
    return b"\0" * 12 + b"\x08\x00" + ip + tcp


def _pcap(path, packets):
    out = struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1)   # nanosecond timestamps, Ethernet
    for t, frame in packets:
        out += struct.pack("<IIII", int(t), round((t % 1) * 1e9), len(frame), len(frame)) + frame
    path.write_bytes(out)


def _sse(event: dict) -> bytes:
    data = b"data: " + json.dumps(event).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


def test_a_hand_built_capture_gives_request_and_chunk_times(tmp_path):
    body = json.dumps({"messages": [{"role": "user", "content": "POST / inside a prompt"}]}).encode()
    request = b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    first = _sse({"id": "r1", "choices": [{"delta": {"role": "assistant"}}]})
    token = _sse({"id": "r1", "choices": [{"delta": {"content": "Hi"}}]})
    second = _sse({"id": "r1", "choices": [{"delta": {"content": " there"}}]})
    done = b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n"
    split = len(token) // 2
    packets = [
        (100.0, _frame(CLIENT, SERVER, 1000, request[:30])),
        (100.001, _frame(CLIENT, SERVER, 1030, request[30:])),
        (100.002, _frame(SERVER, CLIENT, 5000, head + first)),
        (100.050, _frame(SERVER, CLIENT, 5000 + len(head + first), token[:split])),
        (100.051, _frame(SERVER, CLIENT, 5000 + len(head + first), token[:split])),   # a retransmission
        (100.060, _frame(SERVER, CLIENT, 5000 + len(head + first) + split, token[split:])),   # completes the line
        (100.070, _frame(SERVER, CLIENT, 5000 + len(head + first + token), second + done)),
        # a second request on the same connection, whose response says nothing
        (101.0, _frame(CLIENT, SERVER, 1000 + len(request), request)),
    ]
    _pcap(tmp_path / "c.pcap", packets)
    truth = read_truth(tmp_path / "c.pcap")
    assert set(truth) == {"r1"}
    assert truth["r1"]["t_read"] == pytest.approx(100.0)
    assert truth["r1"]["t_chunks"] == pytest.approx([100.060, 100.070])
    (tmp_path / "bad.pcap").write_bytes(b"not a capture at all, really")
    with pytest.raises(ValueError, match="not a classic pcap"):
        read_truth(tmp_path / "bad.pcap")


def _capture_unavailable() -> str | None:
    if shutil.which("tcpdump") is None:
        return "tcpdump is not installed (Debian: apt-get install -y tcpdump)"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "capturing on lo needs root"
    return None


@pytest.mark.slow
@pytest.mark.skipif(_capture_unavailable() is not None, reason=str(_capture_unavailable()))
@pytest.mark.e2e
def test_a_loopback_capture_agrees_with_the_scripted_servers_log(tmp_path):
    records, pcap = tmp_path / "r.jsonl", tmp_path / "cap.pcap"
    with scripted_server(tmp_path, "--ttft", "0.03", "--itl", "0.005") as (url, truth_path):
        with Capture(pcap) as capture:
            proc = subprocess.run([LOCUST, "-f", CHAT, "--headless", "--only-summary", "--host", url, "-u", "4",
                                   "-r", "4", "-t", "2s", "--warmup", "0", "--output-tokens", "8", "--records", str(records)],
                                  capture_output=True, text=True, timeout=60, env=_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    captured, server = read_truth(pcap), scripted_truth(truth_path)
    ok = [r for r in read_records(records) if r["status"] == "ok"]
    if capture.dropped:   # a busy box: the kernel dropped packets, and with them the rest of those connections
        pytest.skip(f"tcpdump: {capture.dropped} packets dropped by the kernel; the capture is incomplete")
    assert ok and {r["response_id"] for r in ok} <= set(captured)
    # the kernel saw each chunk leave right after the server logged writing it (both on the system clock)
    lag = [c - (s + server[rid]["wall_offset_s"]) for rid in captured if rid in server
           for c, s in zip(captured[rid]["t_chunks"], server[rid]["t_chunks"])]
    assert len(lag) >= 8 * len(ok) and abs(float(np.median(lag))) < 0.002
    comparison, lags = compare_with_capture(records, pcap)
    assert comparison.matched == len(ok) and comparison.unmatched == 0
    assert comparison.ttft.count == len(ok) and comparison.itl.count == 7 * len(ok)
    assert comparison.ttft.p50_abs_ms < 3   # loose: a shared box; the benchmark gives the figures
    assert lags["c=4"]["loop_lag_p99_s"] is not None


@pytest.mark.slow
@pytest.mark.skipif(_capture_unavailable() is not None, reason=str(_capture_unavailable()))
@pytest.mark.e2e
@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
def test_the_first_answer_token_agrees_with_the_wire_after_a_reasoning_models_reasoning(tmp_path, key):
    """vLLM's reasoning chunk shapes (both names) before the answer: each record's TTFA against the packet that
    carried the first answer chunk; without usage, the load generator's count of reasoning chunks is the truth's."""
    records, pcap = tmp_path / "r.jsonl", tmp_path / "cap.pcap"
    with scripted_server(tmp_path, "--ttft", "0.02", "--itl", "0.004", "--reasoning-tokens", "5",
                         "--reasoning-key", key, "--no-usage") as (url, truth_path):
        with Capture(pcap) as capture:
            proc = subprocess.run([LOCUST, "-f", CHAT, "--headless", "--only-summary", "--host", url, "-u", "4",
                                   "-r", "4", "-t", "2s", "--warmup", "0", "--output-tokens", "8", "--records", str(records)],
                                  capture_output=True, text=True, timeout=60, env=_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    if capture.dropped:
        pytest.skip(f"tcpdump: {capture.dropped} packets dropped by the kernel; the capture is incomplete")
    ok = [r for r in read_records(records) if r["status"] == "ok"]
    assert ok and all((r["reasoning_tokens"], r["answer_tokens"], r["output_tokens"]) == (5, 3, 8) for r in ok)
    assert all(r["ttft_s"] < r["ttfa_s"] for r in ok)
    comparison, _ = compare_with_capture(records, pcap)
    assert comparison.ttfa is not None and comparison.ttfa.count == comparison.matched == len(ok)
    assert comparison.ttfa.p50_abs_ms < 3   # loose: a shared box; the benchmark gives the figures
    server = scripted_truth(truth_path)
    assert all(server[r["response_id"]]["answer_index"] == 5 for r in ok)
