"""`servecap sweep --server-args-matrix`: one reference server per configuration, the same plan against each
(e.g. a classic model's batching off, then on)."""

from __future__ import annotations

import shlex


def parse_server_args_matrix(text: str) -> tuple[tuple[str, str], ...]:
    """'off:--classifier-batching off|on:--classifier-batching on' -> (("off", "--classifier-batching off"),
    ("on", "--classifier-batching on")): each entry LABEL:FLAGS (FLAGS may be empty), labels distinct."""
    entries = []
    for part in str(text).split("|"):
        label, sep, flags = part.partition(":")
        label = label.strip()
        if not sep or not label or "/" in label or " " in label:
            raise ValueError(f"--server-args-matrix: {part.strip()!r} is not LABEL:FLAGS (a label without '/' or "
                             f"spaces, e.g. off:--classifier-batching off)")
        try:
            shlex.split(flags)
        except ValueError as exc:
            raise ValueError(f"--server-args-matrix: {label}'s flags are not valid shell quoting: {exc}") from None
        entries.append((label, flags.strip()))
    labels = [label for label, _ in entries]
    if len(set(labels)) != len(labels):
        raise ValueError("--server-args-matrix names a label twice")
    return tuple(entries)
