"""The kernel's view of streamed requests: a loopback packet capture (tcpdump) read into per-response truth.

`read_truth(pcap)` returns {response_id: {"t_read": t, "t_chunks": [t, ...]}}, the shape of the
scripted server's truth log (lab.loadgen.accuracy.compare), where
  t_read    = kernel timestamp of the packet that carried the request's first bytes ("POST ..."),
  t_chunks  = kernel timestamps of the packets that completed each content chunk's SSE line.
So recorded TTFT/ITL are compared with when the bytes crossed loopback, not with what a server
says about itself. Requests and responses pair up in order on each keep-alive connection
(HTTP/1.1 without pipelining); a response is named by the first `id` of its events.

Reads classic pcap (tcpdump -w, micro- or nanosecond timestamps) of Ethernet (`-i lo`) or
Linux-cooked (`-i any`) frames, IPv4 or IPv6, TCP only; segments already seen (retransmissions)
are skipped. Pure: no gevent; standard library and loadgen.client.sse.
"""

from __future__ import annotations

import bisect
import json
import re
import struct
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from loadgen.client.sse import chunk_kinds, chunk_text

_MAGIC = {0xA1B2C3D4: 1e-6, 0xA1B23C4D: 1e-9}
_LINK_HEADER = {1: 14, 113: 16, 276: 20}   # Ethernet, Linux cooked v1, v2
_DATA_LINE = re.compile(rb"data: ?([^\n]*)\n")


@dataclass
class _Direction:
    """One direction of one TCP connection: payload bytes in order and the time each packet ended."""

    data: bytearray = field(default_factory=bytearray)
    ends: list[tuple[int, float]] = field(default_factory=list)   # (end offset in data, packet time)
    next_seq: int | None = None

    def add(self, seq: int, payload: bytes, t: float) -> None:
        after = (seq + len(payload)) & 0xFFFFFFFF
        if self.next_seq is not None:
            behind = (self.next_seq - seq) & 0xFFFFFFFF
            if behind < 2**31:               # starts at or before what we have
                if behind >= len(payload):   # all seen before: a retransmission
                    return
                payload = payload[behind:]
        self.data += payload
        self.ends.append((len(self.data), t))
        self.next_seq = after

    def time_at(self, offset: int) -> float:
        """Time of the packet that carried byte `offset`."""
        low, high = 0, len(self.ends) - 1
        while low < high:
            mid = (low + high) // 2
            if self.ends[mid][0] > offset:
                high = mid
            else:
                low = mid + 1
        return self.ends[low][1]


def _packets(path: Path):
    """(time s, src (addr, port), dst (addr, port), seq, payload) per TCP packet with a payload."""
    raw = path.read_bytes()
    if len(raw) < 24:
        raise ValueError(f"{path}: not a pcap file (too short)")
    magic = struct.unpack("<I", raw[:4])[0]
    endian = "<"
    if magic not in _MAGIC:
        magic, endian = struct.unpack(">I", raw[:4])[0], ">"
        if magic not in _MAGIC:
            raise ValueError(f"{path}: not a classic pcap file (magic {raw[:4].hex()}); write it with tcpdump -w")
    unit = _MAGIC[magic]
    link = struct.unpack(endian + "I", raw[20:24])[0]
    if link not in _LINK_HEADER:
        raise ValueError(f"{path}: link type {link} is not Ethernet or Linux cooked")
    offset, skip = 24, _LINK_HEADER[link]
    while offset + 16 <= len(raw):
        seconds, fraction, caplen, _ = struct.unpack(endian + "IIII", raw[offset:offset + 16])
        frame = raw[offset + 16:offset + 16 + caplen]
        offset += 16 + caplen
        packet = frame[skip:]
        if not packet:
            continue
        version = packet[0] >> 4
        if version == 4:
            header, proto, src, dst = (packet[0] & 0x0F) * 4, packet[9], packet[12:16], packet[16:20]
            total = struct.unpack(">H", packet[2:4])[0]
            packet = packet[:total]
        elif version == 6:
            header, proto, src, dst = 40, packet[6], packet[8:24], packet[24:40]
        else:
            continue
        if proto != 6:
            continue
        tcp = packet[header:]
        if len(tcp) < 20:
            continue
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload:
            yield seconds + fraction * unit, (src, sport), (dst, dport), seq, payload


def read_truth(path: str | Path) -> dict[str, dict]:
    """{response_id: {"t_read", "t_chunks"}} of every streamed response in the capture (see the module doc)."""
    streams: dict[tuple, _Direction] = defaultdict(_Direction)
    for t, src, dst, seq, payload in _packets(Path(path)):
        streams[(src, dst)].add(seq, payload, t)
    truth: dict[str, dict] = {}
    for (src, dst), requests in streams.items():
        responses = streams.get((dst, src))
        if responses is None or not requests.data.startswith((b"POST ", b"GET ")):
            continue
        starts = [requests.time_at(offset) for offset, _ in _messages(bytes(requests.data))]
        for t_read, (begin, body) in zip(starts, _messages(bytes(responses.data))):
            response_id, chunks, answers = _events(responses, body)
            if response_id is not None and chunks:
                truth[response_id] = {"t_read": t_read, "t_chunks": chunks,
                                      "t_answer": answers[0] if answers else None}
    return truth


def _messages(data: bytes):
    """(start offset, [(raw offset, body bytes), ...]) per HTTP/1.1 message in one direction of a connection:
    Content-Length bodies whole, chunked bodies chunk by chunk (raw offset: where the chunk's bytes start)."""
    position = 0
    while position < len(data):
        head_end = data.find(b"\r\n\r\n", position)
        if head_end < 0:
            return
        headers = data[position:head_end].lower()
        body_start, parts = head_end + 4, []
        if b"transfer-encoding: chunked" in headers:
            cursor = body_start
            while True:
                line_end = data.find(b"\r\n", cursor)
                if line_end < 0:
                    yield position, parts
                    return
                size = int(data[cursor:line_end].split(b";")[0] or b"0", 16)
                if size == 0:
                    cursor = line_end + 4
                    break
                parts.append((line_end + 2, data[line_end + 2:line_end + 2 + size]))
                cursor = line_end + 2 + size + 2
        else:
            match = re.search(rb"content-length: *(\d+)", headers)
            length = int(match.group(1)) if match else 0
            parts.append((body_start, data[body_start:body_start + length]))
            cursor = body_start + length
        yield position, parts
        position = cursor


def _events(direction: _Direction, parts: list[tuple[int, bytes]]) -> tuple[str | None, list[float], list[float]]:
    """The response id and, per content chunk (and per answer chunk: after any reasoning), the time of
    the packet that completed its SSE line."""
    body = b"".join(chunk for _, chunk in parts)
    starts, raw = [], []   # body offset where each part starts, and its raw offset
    total = 0
    for offset, chunk in parts:
        starts.append(total)
        raw.append(offset)
        total += len(chunk)
    response_id, chunks, answers = None, [], []
    for match in _DATA_LINE.finditer(body):
        try:
            event = json.loads(match.group(1))
        except ValueError:   # [DONE]
            continue
        if not isinstance(event, dict):
            continue
        if response_id is None and isinstance(event.get("id"), str):
            response_id = event["id"]
        if chunk_text(event):
            last = match.end() - 1
            part = bisect.bisect_right(starts, last) - 1
            chunks.append(direction.time_at(raw[part] + last - starts[part]))
            if chunk_kinds(event)[0]:
                answers.append(chunks[-1])
    return response_id, chunks, answers
