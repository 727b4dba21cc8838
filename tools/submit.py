"""`submit`: the agent's only handle on the outcome.

The workspace is copied to a read-only snapshot outside every workspace and hashed; the
ledger records the submission. Nothing here writes a verdict or reads criteria: the
verifier process takes the snapshot from the ledger and decides on its own.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from assay.settings import settings
from assay.tools.context import ToolContext
from assay.tools.files import open_in_workspace, read_bytes
from assay.tools.registry import ToolFailure, registry

MAX_FILES = 500
MAX_BYTES = 64 * 1024 * 1024
# Build products are rebuilt by the verifier in its own sandbox; snapshotting them would only
# let a stale or planted binary ride along.
SKIP_DIRS = {".cache", "__pycache__", "build", "torch_extensions", ".torch_extensions"}


class SubmitArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    entry: str = Field(..., max_length=1024, description="the candidate file, e.g. candidate.py")


class Submitted(BaseModel):
    submission: str
    sha256: str
    files: int
    note: str


def _files(ws: Path) -> list[Path]:
    out: list[Path] = []
    for root, dirs, names in os.walk(ws, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            p = Path(root) / name
            if stat.S_ISREG(p.lstat().st_mode):
                out.append(p)
    return out


@registry.tool(destructive=False, path_args=("entry",))
def submit(ctx: ToolContext, args: SubmitArgs) -> Submitted:
    """Submit the workspace with `entry` as the candidate. Verifiers decide; you cannot."""
    fd = open_in_workspace(ctx.workspace, args.entry, os.O_RDONLY)
    os.close(fd)
    files = _files(ctx.workspace)
    if len(files) > MAX_FILES or sum(p.stat().st_size for p in files) > MAX_BYTES:
        raise ToolFailure(f"the workspace is too large to submit (at most {MAX_FILES} files, {MAX_BYTES >> 20} MiB)")
    n = len(ctx.ledger.submissions(ctx.run_id)) + 1
    dest = settings().home / "runs" / ctx.run_id / "submissions" / str(n)
    if dest.exists():
        shutil.rmtree(dest)
    digests: dict[str, str] = {}
    whole = hashlib.sha256()
    for src in files:
        rel = src.relative_to(ctx.workspace).as_posix()
        # Read through the workspace's own descriptors, never by path: code in the sandbox can
        # swap a listed file or folder for a symlink between the listing and this read.
        data, size = read_bytes(ctx.workspace, rel, MAX_BYTES + 1)
        if size > MAX_BYTES:
            raise ToolFailure(f"{rel} is too large to submit")
        digests[rel] = hashlib.sha256(data).hexdigest()
        whole.update(rel.encode() + b"\0" + digests[rel].encode() + b"\n")
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        target.chmod(0o444)
    sha = whole.hexdigest()
    key = f"submission-{n}"
    ctx.ledger.record_submission(
        ctx.run_id, key=key, snapshot=str(dest), sha256=sha, files=digests, entry=Path(args.entry).as_posix()
    )
    return Submitted(submission=key, sha256=f"sha256:{sha}", files=len(files), note="submitted; the verifiers decide")
