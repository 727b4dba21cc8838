"""`exec`: one command in the run's sandbox, under the foundation's limits and the call's grants."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from assay.tools.context import ToolContext
from assay.tools.files import cut_at_boundary
from assay.tools.registry import registry

# Linux refuses one argument over 128 KiB (MAX_ARG_STRLEN) and an argv over ARG_MAX, so
# longer ones could only fail in the sandbox; refused here, they never reach the sandbox or
# the ledger (which records every call's arguments).
MAX_ARG_BYTES = 128 * 1024
MAX_ARGV_BYTES = 1024 * 1024


class ExecArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: list[Annotated[str, Field(max_length=MAX_ARG_BYTES)]] = Field(
        ..., min_length=1, max_length=256, description="argv, e.g. ['python', 'test.py']"
    )
    timeout_s: float = Field(default=30.0, gt=0, le=3600)
    stdin: str | None = Field(default=None, max_length=1 << 20)

    @field_validator("command")
    @classmethod
    def _argv_fits(cls, command: list[str]) -> list[str]:
        sizes = [len(a.encode("utf-8", "surrogatepass")) + 1 for a in command]
        if max(sizes, default=0) > MAX_ARG_BYTES or sum(sizes) > MAX_ARGV_BYTES:
            raise ValueError(
                f"each argument must be under {MAX_ARG_BYTES >> 10} KiB and all together under {MAX_ARGV_BYTES >> 20} MiB"
            )
        return command


class ExecOutput(BaseModel):
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    killed: str | None
    truncated: bool


def _drop_partial_line(text: str) -> str:
    """A stream the sandbox cut, without its unfinished last line (which may end inside a
    secret the redactor could then not recognise)."""
    if not text or text.endswith("\n"):
        return text
    data = text.encode("utf-8", "surrogateescape")
    return cut_at_boundary(data, len(data) - 1).decode("utf-8", "ignore")


def _cap(text: str, limit: int) -> tuple[str, bool]:
    """Output over the limit is cut between lines, never inside a word (see cut_at_boundary)."""
    data = text.encode("utf-8", "surrogateescape")
    if len(data) <= limit:
        return text, False
    return cut_at_boundary(data, limit).decode("utf-8", "ignore"), True


@registry.tool(destructive=True)
def exec(ctx: ToolContext, args: ExecArgs) -> ExecOutput:  # noqa: A001 - the tool's public name
    """Run a command in the run's sandbox (no network, workspace the only writable place)."""
    timeout = min(args.timeout_s, float(ctx.grants.get("max_timeout_s", args.timeout_s)))
    res = ctx.sandbox().exec(args.command, timeout=timeout, stdin=args.stdin)
    limit = int(ctx.grants.get("max_output_bytes", 1 << 20))
    stdout, stderr = res.stdout, res.stderr
    if res.truncated:  # the sandbox cut a stream at its own limit, maybe inside a word
        stdout, stderr = _drop_partial_line(stdout), _drop_partial_line(stderr)
    out, t1 = _cap(stdout, limit)
    err, t2 = _cap(stderr, limit)
    return ExecOutput(
        exit_code=res.exit_code,
        stdout=out,
        stderr=err,
        duration_s=round(res.duration_s, 4),
        killed=res.killed,
        truncated=res.truncated or t1 or t2,
    )
