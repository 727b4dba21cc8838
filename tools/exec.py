"""`exec`: one command in the run's sandbox, under the foundation's limits and the call's grants."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from assay.tools.context import ToolContext
from assay.tools.registry import registry


class ExecArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    command: list[str] = Field(..., min_length=1, max_length=256, description="argv, e.g. ['python', 'test.py']")
    timeout_s: float = Field(30.0, gt=0, le=3600)
    stdin: str | None = Field(None, max_length=1 << 20)


class ExecOutput(BaseModel):
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    killed: str | None
    truncated: bool


def _cap(text: str, limit: int) -> tuple[str, bool]:
    data = text.encode()
    if len(data) <= limit:
        return text, False
    return data[:limit].decode("utf-8", "ignore"), True


@registry.tool(destructive=True)
def exec(ctx: ToolContext, args: ExecArgs) -> ExecOutput:  # noqa: A001 - the tool's public name
    """Run a command in the run's sandbox (no network, workspace the only writable place)."""
    timeout = min(args.timeout_s, float(ctx.grants.get("max_timeout_s", args.timeout_s)))
    res = ctx.sandbox().exec(args.command, timeout=timeout, stdin=args.stdin)
    limit = int(ctx.grants.get("max_output_bytes", 1 << 20))
    out, t1 = _cap(res.stdout, limit)
    err, t2 = _cap(res.stderr, limit)
    return ExecOutput(
        exit_code=res.exit_code,
        stdout=out,
        stderr=err,
        duration_s=round(res.duration_s, 4),
        killed=res.killed,
        truncated=res.truncated or t1 or t2,
    )
