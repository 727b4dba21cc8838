"""Redaction at the way in (invariant 2): every byte that enters a workspace passes the redactor
first, so no code in a sandbox can read, transform or exfiltrate a raw secret: it only ever
holds placeholders. An output-side redactor cannot win against code that picks its own
encoding (every character as \\u00XX, XOR, base32 ...); a sandbox that never held the value has
nothing to encode.

- `redact_bytes`: a file's bytes as the sandbox may see them. In UTF-8 text, registered values
  and rule findings become placeholders (personal data and high-entropy tokens are left to the
  way out: in code they are mostly false alarms, and no secret); other
  bytes pass only where the redactor finds nothing in them (read as Latin-1, byte for byte),
  and are withheld otherwise: a placeholder cannot be spliced into a binary format.
- `redact_tree`: a folder copied that way (the task files a job stages, a user's folder served
  to an IDE), regular files only, links never followed, with what was withheld said.
- `own_placeholders`: the placeholders a file's own redaction put in, with their values, so a
  file written back to the user's folder gets the user's own secrets back where they stood,
  and nothing else (see tools/view.py).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from assay.policies.redaction.redactor import Redactor
from assay.policies.redaction.vault import PLACEHOLDER_RE

# Folders never mirrored into a workspace: version-control internals (a remote URL with a token
# lives there), environments and caches; rebuilt or not needed by a sandbox.
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".mypy_cache", ".ruff_cache"}
)
MAX_FILES = 5000
MAX_FILE_BYTES = 64 << 20


@dataclass
class Staged:
    """What `redact_tree` did, file by file (paths relative to the source)."""

    copied: list[str] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    withheld: list[str] = field(default_factory=list)  # binary holding a finding, or too large
    skipped: list[str] = field(default_factory=list)  # links, devices, SKIP_DIRS, past MAX_FILES

    def note(self) -> str:
        parts = [f"{len(self.copied)} files"]
        if self.redacted:
            parts.append(f"{len(self.redacted)} with secrets replaced by placeholders")
        if self.withheld:
            parts.append(f"{len(self.withheld)} withheld ({', '.join(self.withheld[:5])})")
        return ", ".join(parts)


def redact_bytes(data: bytes, redactor: Redactor) -> bytes | None:
    """`data` as a sandbox may hold it, or None when it must be withheld."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # Latin-1 maps every byte to one character: a finding there is a secret in these bytes.
        return data if not redactor.holds_secret(data.decode("latin-1")) else None
    out = redactor.redact_secrets(text)
    return data if out == text else out.encode("utf-8")


def own_placeholders(redacted: bytes, redactor: Redactor) -> dict[bytes, bytes]:
    """The placeholders in `redacted` that this run's redactor issued, each with its value."""
    found: dict[bytes, bytes] = {}
    for m in PLACEHOLDER_RE.finditer(redacted):
        placeholder = m.group()
        assert isinstance(placeholder, bytes)  # a bytes pattern over bytes
        value = redactor.value_of(placeholder)
        if value is not None:
            found[placeholder] = value
    return found


def files(root: Path, limit: int = MAX_FILES) -> tuple[list[str], list[str]]:
    """Regular files under `root` (relative, sorted), and what was skipped; never follows a link."""
    out: list[str] = []
    skipped: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root)
        keep = []
        for d in sorted(dirnames):
            if d in SKIP_DIRS or (Path(dirpath) / d).is_symlink():
                skipped.append((rel_dir / d).as_posix())
            else:
                keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            rel = (rel_dir / name).as_posix()
            mode = os.lstat(Path(dirpath) / name).st_mode
            if not stat.S_ISREG(mode) or len(out) >= limit:
                skipped.append(rel)
                continue
            out.append(rel)
    return out, skipped


def read_regular(path: Path, cap: int = MAX_FILE_BYTES) -> bytes | None:
    """A regular file's bytes, opened without following a link; None if it is not one or too big."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
            return None
        chunks, left = [], st.st_size + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return None if len(data) > cap else data
    finally:
        os.close(fd)


def redact_tree(src: Path, dst: Path, redactor: Redactor) -> Staged:
    """Copy `src` into `dst` through the redactor (see the module docstring)."""
    staged = Staged()
    names, staged.skipped = files(src)
    for rel in names:
        data = read_regular(src / rel)
        out = redact_bytes(data, redactor) if data is not None else None
        if out is None:
            staged.withheld.append(rel)
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(out)
        staged.copied.append(rel)
        if out is not data:
            staged.redacted.append(rel)
    return staged
