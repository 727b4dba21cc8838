"""Workspace file tools: list, read, write, diff. Nothing outside the workspace, ever.

Paths are checked twice: lexically and with symlinks resolved by the capability layer, and
again on the opened file descriptor, because code in the sandbox can swap a directory for a
symlink between the check and the open.

Code in the sandbox can also plant things that are neither files nor folders: a FIFO would
block an open() forever (no writer, or no reader) and with it a worker of the server, so
every open is non-blocking and anything but a regular file or a folder is refused. A hard
link is a second name for a file, one a path rule may forbid (`task.py`), so writes refuse
a file with more than one name. Listings walk the opened folder by descriptor, never by
path, so a folder swapped for a symlink mid-walk is not followed out of the workspace.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from assay.policies.paths import PathRefused, normalize_relpath
from assay.tools.context import ToolContext
from assay.tools.registry import ToolFailure, registry

MAX_LIST = 2000
READ_CAP = 256 * 1024
DIFF_LINES = 10_000
WRITE_CAP = 4 * 1024 * 1024


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _inside(ws: Path, fd: int) -> bool:
    real = os.readlink(f"/proc/self/fd/{fd}")
    root = str(ws.resolve())
    return real == root or real.startswith(root + os.sep)


def _rel(path: str) -> str:
    try:
        return normalize_relpath(path)
    except PathRefused as exc:
        raise ToolFailure(str(exc)) from None


def _own_like_workspace(ws: Path, fd: int) -> None:
    """Files the host writes must stay usable by the sandbox's unprivileged user."""
    if os.geteuid() == 0:
        st = ws.stat()
        os.fchown(fd, st.st_uid, st.st_gid)


def open_in_workspace(ws: Path, path: str, flags: int, mode: int = 0o644) -> int:
    """Open `path` under `ws` without following a symlink anywhere along the way."""
    rel = Path(_rel(path) or ".")
    dir_fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        parts = () if str(rel) == "." else rel.parts
        for i, part in enumerate(parts[:-1]):
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
            except FileNotFoundError:
                if not flags & os.O_CREAT:
                    raise ToolFailure(f"{path!r} does not exist") from None
                os.mkdir(part, 0o755, dir_fd=dir_fd)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=dir_fd)
                _own_like_workspace(ws, nxt)
            except OSError:
                raise ToolFailure(f"{'/'.join(parts[: i + 1])!r} is a symlink or not a directory; refused") from None
            os.close(dir_fd)
            dir_fd = nxt
        if not parts:
            return os.dup(dir_fd)
        try:
            # O_NONBLOCK: opening a FIFO must fail or return at once, never wait for a peer.
            fd = os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, mode, dir_fd=dir_fd)
        except FileNotFoundError:
            raise ToolFailure(f"{path!r} does not exist") from None
        except IsADirectoryError:
            raise ToolFailure(f"{path!r} is a directory") from None
        except OSError as exc:
            raise ToolFailure(
                f"cannot open {path!r}: {exc.strerror} (symlinks and special files are refused)"
            ) from None
        mode_now = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode_now) or stat.S_ISDIR(mode_now)):
            os.close(fd)
            raise ToolFailure(f"{path!r} is not a regular file or folder (a FIFO, socket or device); refused")
        os.set_blocking(fd, True)
        if not _inside(ws, fd):
            os.close(fd)
            raise ToolFailure(f"{path!r} resolves outside the workspace; refused")
        if flags & os.O_CREAT:
            _own_like_workspace(ws, fd)
        return fd
    finally:
        os.close(dir_fd)


def write_single_name(ws: Path, path: str, data: bytes) -> None:
    """Create or overwrite a workspace file, refusing one with other names (hard links): another
    name may be one the caller's role must not write, like the task a candidate is judged on."""
    # Truncated only once we know this name is the file's only one.
    fd = open_in_workspace(ws, path, os.O_WRONLY | os.O_CREAT)
    with os.fdopen(fd, "wb") as fh:
        st = os.fstat(fh.fileno())
        if st.st_nlink > 1:
            raise ToolFailure(
                f"{path!r} has {st.st_nlink} names (hard links); refused: another name may be one "
                "this role must not write. Remove the extra links or write a new file"
            )
        os.ftruncate(fh.fileno(), 0)
        fh.write(data)


def cut_at_boundary(data: bytes, limit: int) -> bytes:
    """At most `limit` bytes of `data`, cut after a line (or, on a line longer than the limit,
    after a space), never inside a word.

    Redaction runs after the cut, and a secret cut in two is a prefix no detector knows: with
    a cut the caller chooses (read_file's max_bytes) it would hand out a secret's first bytes.
    A token or password sits on one line, so a cut between lines keeps it whole or drops it.
    Without any line end or space before the limit nothing is returned rather than half a word.
    """
    if len(data) <= limit:
        return data
    head = data[:limit]
    nl = head.rfind(b"\n")
    if nl >= 0:
        return head[: nl + 1]
    spaces = [head.rfind(c) for c in (b" ", b"\t", b"\r", b"\f", b"\v")]
    return head[: max(spaces) + 1] if max(spaces) >= 0 else b""


def output_cap(ctx: ToolContext, default: int) -> int:
    """`default`, or less where the call's capability grants less (max_output_bytes)."""
    granted = ctx.grants.get("max_output_bytes")
    return default if granted is None else max(0, min(default, int(granted)))


def read_bytes(ws: Path, path: str, cap: int) -> tuple[bytes, int]:
    """At most `cap` bytes of a workspace file (cut as `cut_at_boundary` does), and its size."""
    fd = open_in_workspace(ws, path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ToolFailure(f"{path!r} is not a regular file")
        return cut_at_boundary(fh.read(cap + 1), cap), st.st_size


class ListArgs(_Args):
    path: str = Field(default=".", max_length=1024, description="folder inside the workspace")


class Entry(BaseModel):
    path: str
    size: int
    is_dir: bool


class Listing(BaseModel):
    entries: list[Entry]
    truncated: bool


@registry.tool(read_only=True, idempotent=True)
def list_files(ctx: ToolContext, args: ListArgs) -> Listing:
    """List files under a folder of the workspace (recursively, symlinks not followed)."""
    fd = open_in_workspace(ctx.workspace, args.path, os.O_RDONLY | os.O_DIRECTORY)
    base = _rel(args.path)
    entries: list[Entry] = []
    budget = output_cap(ctx, 1 << 30)  # bytes of paths, as a stand-in for the result's size
    # By descriptor: fwalk checks each folder it enters is the one it listed (no symlink
    # swapped in since), and stats names relative to the folder's descriptor.
    walker = os.fwalk(".", dir_fd=fd, follow_symlinks=False)
    try:
        for root, dirs, files, root_fd in walker:
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                try:
                    st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed while we listed
                rel = os.path.normpath(os.path.join(base or ".", root, name))
                budget -= len(rel) + 32
                if budget < 0:
                    return Listing(entries=entries, truncated=True)
                entries.append(Entry(path=rel, size=st.st_size, is_dir=stat.S_ISDIR(st.st_mode)))
                if len(entries) >= MAX_LIST:
                    return Listing(entries=entries, truncated=True)
        return Listing(entries=entries, truncated=False)
    finally:
        walker.close()  # pyright: ignore[reportAttributeAccessIssue]  # os.fwalk is a generator; typeshed says Iterator
        os.close(fd)


class ReadArgs(_Args):
    path: str = Field(..., max_length=1024)
    max_bytes: int = Field(default=READ_CAP, ge=1, le=READ_CAP)


class FileText(BaseModel):
    path: str
    content: str
    size: int
    truncated: bool


@registry.tool(read_only=True, idempotent=True)
def read_file(ctx: ToolContext, args: ReadArgs) -> FileText:
    """Read a text file of the workspace."""
    data, size = read_bytes(ctx.workspace, args.path, output_cap(ctx, args.max_bytes))
    return FileText(path=args.path, content=data.decode("utf-8", "replace"), size=size, truncated=size > len(data))


class WriteArgs(_Args):
    path: str = Field(..., max_length=1024)
    content: str = Field(..., max_length=WRITE_CAP)


class Written(BaseModel):
    path: str
    bytes_written: int
    sha256: str


@registry.tool(destructive=True, idempotent=True)
def write_file(ctx: ToolContext, args: WriteArgs) -> Written:
    """Create or overwrite a text file in the workspace (parent folders are created)."""
    data = args.content.encode()
    write_single_name(ctx.workspace, args.path, data)
    # Labelled, so redaction keeps it for a hash instead of taking it for a high-entropy secret.
    return Written(path=args.path, bytes_written=len(data), sha256="sha256:" + hashlib.sha256(data).hexdigest())


class DiffArgs(_Args):
    a: str = Field(..., max_length=1024, description="a workspace file")
    b: str = Field(..., max_length=1024, description="another workspace file")
    context: int = Field(default=3, ge=0, le=20)


class Diff(BaseModel):
    diff: str
    identical: bool
    truncated: bool = False


@registry.tool(read_only=True, idempotent=True, path_args=("a", "b"))
def diff(ctx: ToolContext, args: DiffArgs) -> Diff:
    """Unified diff between two files of the workspace (each at most DIFF_LINES lines)."""
    a, _ = read_bytes(ctx.workspace, args.a, READ_CAP)
    b, _ = read_bytes(ctx.workspace, args.b, READ_CAP)
    sides = [x.decode("utf-8", "replace").splitlines(keepends=True) for x in (a, b)]
    for name, side in zip((args.a, args.b), sides, strict=False):
        # difflib's matching grows faster than the lines: two crafted 256 KiB files held the
        # gateway's CPU for 20 s. At this many lines the worst found takes a quarter second.
        if len(side) > DIFF_LINES:
            raise ToolFailure(
                f"{name!r} has {len(side)} lines, more than diff compares here ({DIFF_LINES}); "
                "run `diff -u` through exec in the sandbox instead"
            )
    text = "".join(difflib.unified_diff(*sides, fromfile=args.a, tofile=args.b, n=args.context))
    cap = output_cap(ctx, len(text))
    shown = cut_at_boundary(text.encode(), cap).decode("utf-8", "ignore") if len(text.encode()) > cap else text
    return Diff(diff=shown, identical=not text, truncated=shown != text)
