"""The training text: the Python standard library's own source, split by file into training and held-out.

    corpus = stdlib_corpus()            Corpus(train: bytes, held_out: bytes, files, held_out_files)

Every machine that runs servecap has it (the interpreter's `sysconfig` stdlib path), nothing is
downloaded, and the same Python version gives the same bytes. Test suites (`test/`, `tests/`,
`idlelib/idle_test/`) and `site-packages` are left out. A file goes to the held-out part when the CRC32
of its path relative to the stdlib is 0 mod `held_out_every` (one file in 20 by default), so the split
is fixed by the names, not by the order the filesystem lists them in.
"""

from __future__ import annotations

import sysconfig
import zlib
from dataclasses import dataclass
from pathlib import Path

LEFT_OUT = ("test", "tests", "idle_test", "site-packages", "__pycache__")


@dataclass(frozen=True)
class Corpus:
    train: bytes
    held_out: bytes
    files: int
    held_out_files: int
    root: str


def stdlib_corpus(held_out_every: int = 20, root: str | None = None) -> Corpus:
    base = Path(root or sysconfig.get_paths()["stdlib"])
    if not base.is_dir():
        raise ValueError(f"the standard library's source is not at {base}")
    train, held = [], []
    for path in sorted(base.rglob("*.py")):
        relative = path.relative_to(base)
        if any(part in LEFT_OUT for part in relative.parts[:-1]):
            continue
        try:
            text = path.read_bytes()
        except OSError:
            continue
        (held if zlib.crc32(str(relative).encode()) % held_out_every == 0 else train).append(text)
    if not train or not held:
        raise ValueError(f"{base}: too few Python files to split into training and held-out text")
    return Corpus(b"\n\n".join(train), b"\n\n".join(held), len(train) + len(held), len(held), str(base))
