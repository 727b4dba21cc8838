"""The folder an MCP client works on, as its sandbox sees it: a redacted view (invariant 2).

`assay mcp -w DIR` serves a user's folder to an IDE. The sandbox never mounts DIR: it works on
a view of it under the run's folder, every file copied through the redactor (registered values
and rule findings become placeholders; a binary file holding a finding is withheld). So no code
in the sandbox can read, transform or exfiltrate a raw secret of the folder, in any encoding.

The view is synced both ways around every tool call:
- pull (before): files the user changed in DIR since the last sync come into the view, redacted;
  files the user deleted leave it, unless the agent changed them since;
- push (after): files the agent changed, made or deleted in the view go back to DIR. A file of
  the user's gets its own secrets back where its placeholders still stand (the value is the
  user's, in the user's file); a placeholder from anywhere else stays a placeholder, so no secret
  is ever written where the user did not have it. A file the user changed meanwhile is kept, and
  the agent's version is written beside it as NAME.assay-conflict.

Reads of the view go through the workspace's no-follow descriptor walk (tools/files.py): code in
the sandbox may plant links there, and nothing of the host outside the view is ever read back.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from assay.policies.redaction import Redactor
from assay.policies.redaction.inbound import MAX_FILE_BYTES, files, own_placeholders, read_regular, redact_bytes
from assay.tools.files import open_in_workspace, read_bytes, write_single_name
from assay.tools.registry import ToolFailure

CONFLICT = ".assay-conflict"


@dataclass
class _Entry:
    source_sig: tuple[int, int] | None  # (mtime_ns, size) of the user's file when last synced
    view_digest: str | None  # sha256 of what the view held then (None: withheld from the view)
    own: dict[bytes, bytes] = field(default_factory=dict)  # the file's own placeholders -> values


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _sig(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size) if stat.S_ISREG(st.st_mode) else None


class WorkspaceView:
    def __init__(self, source: Path, view: Path, redactor: Redactor):
        self.source, self.view, self.redactor = source, view, redactor
        view.mkdir(parents=True, exist_ok=True)
        self._state: dict[str, _Entry] = {}
        self.withheld: list[str] = []
        self.conflicts: list[str] = []

    # -- DIR -> view -----------------------------------------------------------------------

    def pull(self) -> None:
        names, _ = files(self.source)
        for rel in names:
            if rel.endswith(CONFLICT):
                continue
            sig = _sig(self.source / rel)
            entry = self._state.get(rel)
            if entry is not None and entry.source_sig == sig:
                continue
            if entry is not None and entry.view_digest is not None and self._view_digest(rel) != entry.view_digest:
                continue  # the agent changed it too: push decides (the user's copy wins there)
            data = read_regular(self.source / rel)
            out = redact_bytes(data, self.redactor) if data is not None else None
            if out is None:
                self._remove_from_view(rel)
                self._state[rel] = _Entry(sig, None)
                if rel not in self.withheld:
                    self.withheld.append(rel)
                continue
            try:
                write_single_name(self.view, rel, out)
            except (ToolFailure, OSError):  # a hard link or a link planted in the view: not written
                continue
            self._state[rel] = _Entry(sig, _digest(out), own_placeholders(out, self.redactor))
        gone = [rel for rel in self._state if rel not in set(names)]
        for rel in gone:
            entry = self._state.pop(rel)
            if entry.view_digest is not None and self._view_digest(rel) == entry.view_digest:
                self._remove_from_view(rel)

    # -- view -> DIR -----------------------------------------------------------------------

    def push(self) -> None:
        names, _ = files(self.view)
        present = set(names)
        for rel in names:
            data = self._view_bytes(rel)
            if data is None:
                continue
            entry = self._state.get(rel)
            digest = _digest(data)
            if entry is not None and entry.view_digest == digest:
                continue
            own = entry.own if entry is not None else {}
            out = data
            for placeholder, value in own.items():
                out = out.replace(placeholder, value)
            target = self.source / rel
            if entry is not None and entry.source_sig is not None and _sig(target) != entry.source_sig:
                self._write_source(target.with_name(target.name + CONFLICT), out)
                self.conflicts.append(rel)
                self._state[rel] = _Entry(entry.source_sig, digest, own)
                continue
            if entry is None and os.path.lexists(target):
                # Something of the user's the view never had (a link, past MAX_FILES): not overwritten.
                self._write_source(target.with_name(target.name + CONFLICT), out)
                self.conflicts.append(rel)
                continue
            self._write_source(target, out)
            self._state[rel] = _Entry(_sig(target), digest, own)
        for rel in [r for r, e in self._state.items() if e.view_digest is not None and r not in present]:
            entry = self._state.pop(rel)
            target = self.source / rel
            if _sig(target) == entry.source_sig:  # the user has not changed it since: the agent's delete holds
                try:
                    target.unlink()
                except OSError:
                    pass

    # -- helpers -----------------------------------------------------------------------------

    def _view_bytes(self, rel: str) -> bytes | None:
        try:
            data, size = read_bytes(self.view, rel, MAX_FILE_BYTES)
        except ToolFailure:
            return None
        return data if size <= MAX_FILE_BYTES else None

    def _view_digest(self, rel: str) -> str | None:
        data = self._view_bytes(rel)
        return None if data is None else _digest(data)

    def _remove_from_view(self, rel: str) -> None:
        parent, _, name = rel.rpartition("/")
        try:
            fd = open_in_workspace(self.view, parent or ".", os.O_RDONLY | os.O_DIRECTORY)
        except ToolFailure:
            return
        try:
            os.unlink(name, dir_fd=fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _write_source(self, target: Path, data: bytes) -> None:
        """Into the user's folder: parents made as needed, never through a link (a link of the
        user's where a folder or the file would go: the write is skipped and said)."""
        try:
            if any(p.is_symlink() for p in (target.parent, *target.parent.parents) if p.is_relative_to(self.source)):
                raise OSError("a link on the way")
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        except OSError:
            self.conflicts.append(str(target.relative_to(self.source)))
            return
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
