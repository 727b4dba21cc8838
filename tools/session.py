"""A server session: one run, one role, one workspace, one signed manifest, one gateway.

The session assembles the gateway around the registry's tools, innermost first:

    tool  <-  policy check  <-  redaction  <-  padding  <-  audit  <-  (MCP client)

so a call is decided before it runs, its result is redacted before anything else sees it,
held to the padding schedule, and recorded with the decision that let it through.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import pydantic_core

from assay.errors import UserError
from assay.ledger import Ledger, RunStatus, utcnow
from assay.policies.capabilities import CapabilityPolicy, Decision, RateCounts
from assay.policies.manifest import resolve_manifest
from assay.policies.padding import PAD_KEY, PaddingPolicy, pad_to_bucket
from assay.policies.redaction import Redactor
from assay.policies.signing import load_signed_manifest
from assay.sandbox import SandboxPool, SandboxSpec, default_limits
from assay.settings import settings
from assay.tools.context import ToolContext
from assay.tools.gate_audit import Audit
from assay.tools.gate_padding import Padding
from assay.tools.gate_policy import PolicyCheck
from assay.tools.gate_redaction import Redaction
from assay.tools.registry import Registry, ToolSpec, default_registry
from assay.tools.seam import ToolCall, ToolOutcome
from assay.tools.view import WorkspaceView

Progress = Callable[[float, float | None, str | None], Awaitable[None]]


@dataclass
class SessionConfig:
    workspace: Path
    # A shipped role name or a path; the caller picks it (a job: its kind's default).
    manifest: str
    role: str | None = None
    run_id: str | None = None
    kind: str | None = None
    job: dict[str, Any] = field(default_factory=dict)
    padding: PaddingPolicy = field(default_factory=PaddingPolicy)
    ledger_url: str | None = None
    sandbox_backend: str | None = None
    # Files whose contents are secret (key files); their values are redacted everywhere.
    key_files: tuple[str, ...] = ()
    # Workspace files no tool may change, exec included: bound read-only into every sandbox
    # (every kind's task file is task.py, the reference a submission is judged against).
    read_only: tuple[str, ...] = ("task.py",)


def _refuse_trusted_inside(workspace: Path) -> None:
    """Code in the sandbox may write anywhere in its workspace, so the workspace must hold none
    of the trusted state: ASSAY_HOME (ledger, keys, trust store, criteria caches) or a ledger file."""
    from assay.settings import settings

    s = settings()
    home = s.home.resolve()
    trusted = [home]
    url = s.resolved_ledger_url
    if url.startswith("sqlite:///"):
        trusted.append(Path(url.removeprefix("sqlite:///")).resolve())
    for t in trusted:
        if t == workspace or t.is_relative_to(workspace):
            raise UserError(
                f"workspace {workspace} contains assay's trusted state ({t})",
                "give a workspace folder that holds only the agent's files, e.g. a project subfolder",
            )
    if workspace.is_relative_to(home) and not workspace.is_relative_to(home / "runs"):
        raise UserError(f"workspace {workspace} is inside ASSAY_HOME", "give a workspace outside ASSAY_HOME")


class LedgerApprovals:
    """Approvals live in the ledger, where `assay approve` and the TUI write them."""

    def __init__(self, ledger: Ledger, run_id: str, redact_json: Callable[[Any], Any]):
        self.ledger, self.run_id, self.redact_json = ledger, run_id, redact_json

    def _latest(self, fp: str) -> tuple[str | None, list[str]]:
        events = [e for e in self.ledger.approval_events(self.run_id) if e.fingerprint == fp]
        requests = [e for e in events if e.event == "requested"]
        if not requests:
            return None, []
        req = requests[-1].key
        return req, [e.event for e in events if e.request_key == req and e.event != "requested"]

    def status(self, call: ToolCall) -> str | None:
        req, outcomes = self._latest(call.fingerprint())
        if req is None or "used" in outcomes:
            return None
        if "denied" in outcomes:
            return "denied"
        if "approved" in outcomes:
            return "approved"
        return "pending"

    def request(self, call: ToolCall, reason: str) -> str:
        fp = call.fingerprint()
        req, outcomes = self._latest(fp)
        if req is not None and not outcomes:
            return req  # already pending: asking again must not queue a second approval
        n = sum(1 for e in self.ledger.approval_events(self.run_id) if e.event == "requested") + 1
        key = f"approval-{n}"
        self.ledger.record_approval(
            self.run_id,
            key=key,
            event="requested",
            request_key=key,
            fingerprint=fp,
            tool=call.name,
            arguments=self.redact_json(call.arguments),
            reason=reason,
            actor="gateway",
        )
        return key

    def consume(self, call: ToolCall) -> None:
        req, _ = self._latest(call.fingerprint())
        if req is not None:
            self.ledger.record_approval(
                self.run_id,
                key=f"{req}:used",
                event="used",
                request_key=req,
                fingerprint=call.fingerprint(),
                tool=call.name,
                actor="gateway",
            )


class Session:
    def __init__(self, cfg: SessionConfig, registry: Registry | None = None, ledger: Ledger | None = None):
        self.cfg = cfg
        self.workspace = cfg.workspace.resolve()
        if not self.workspace.is_dir():
            raise UserError(f"workspace {cfg.workspace} is not a directory", "create it or pass --workspace DIR")
        _refuse_trusted_inside(self.workspace)
        if cfg.kind is not None:
            from assay.tools.kinds import rows

            if cfg.kind not in rows():
                raise UserError(
                    f"unknown job kind {cfg.kind!r}", f"use one of: {', '.join(sorted(rows()))}, or no --kind"
                )
        self.manifest = load_signed_manifest(resolve_manifest(cfg.manifest), role=cfg.role)
        self.warning = self.manifest.provenance.warning if self.manifest.provenance else None
        self.registry = registry or default_registry()
        self.tools: dict[str, ToolSpec] = {t.name: t for t in self.registry.for_kind(cfg.kind)}
        leaky = [
            n
            for n, t in sorted(self.tools.items())
            if t.reaches_sandbox and n in self.manifest.tools and self.manifest.tools[n].restore_placeholders
        ]
        if leaky:  # before any row is written: such a manifest never serves a call
            raise UserError(
                f"manifest {cfg.manifest} lets {', '.join(leaky)} receive restored secrets, but "
                f"{'it hands' if len(leaky) == 1 else 'they hand'} arguments to the workspace or a sandbox",
                "remove restore_placeholders from those tools: secrets are restored only for tools that keep them on the trusted side",
            )
        self.ledger = ledger or Ledger.open(cfg.ledger_url)
        self.run_id = self._bind_run()
        self.redactor = Redactor.for_run(os.environ, key_files=cfg.key_files)
        self.policy = CapabilityPolicy(self.manifest, counts=self._counts())
        # Keys recorded before this server started (a resumed run): only these can replay,
        # so a fresh key costs no lookup. This server records every key it sees itself.
        self._recorded_before = {c.key for c in self.ledger.tool_calls(self.run_id)}
        self._recorded_here: set[str] = set()
        # A folder of the user's is never mounted: tools and sandboxes work on its redacted view.
        # A run's own workspace (under ASSAY_HOME/runs) was staged through the redactor already.
        self.source = self.workspace
        self.view: WorkspaceView | None = None
        if not self.workspace.is_relative_to(settings().home.resolve() / "runs"):
            self.view = WorkspaceView(self.source, settings().home / "runs" / self.run_id / "view", self.redactor)
            self.view.pull()
            self.workspace = self.view.view.resolve()
        self._sync = anyio.Lock()
        self.pool = SandboxPool(cfg.sandbox_backend)
        self.spec = SandboxSpec(
            workspace=self.workspace,
            limits=default_limits(),
            ro_binds=self.registry.binds_for(cfg.kind) + self._read_only_binds(),
        )
        self._progress: dict[str, Progress] = {}
        ctx = ToolContext(
            run_id=self.run_id,
            role=self.manifest.role,
            workspace=self.workspace,
            sandbox=lambda: self.pool.get(self.spec),
            ledger=self.ledger,
            job=dict(cfg.job) or self._job_of_run(),
        )
        inner = self.registry.handler(ctx, cfg.kind, progress=self._report)
        policy = PolicyCheck(
            inner,
            decide=self._decide,
            record=self._record_decision,
            approvals=LedgerApprovals(self.ledger, self.run_id, self.redactor.redact_json),
            restore=self.redactor.restore,
            inbound=self.redactor.redact_secrets_json,
        )
        redaction = Redaction(policy, self.redactor.redact, self.redactor.redact_json)
        padding = Padding(redaction, cfg.padding)
        self.gateway = Audit(padding, record=self._record_call, replay=self._replay)

    # -- binding -----------------------------------------------------------------------

    def _bind_run(self) -> str:
        if self.cfg.run_id:
            run = self.ledger.get_run(self.cfg.run_id)
            if run is None:
                raise UserError(
                    f"no run {self.cfg.run_id!r} in the ledger",
                    "omit --run to start a new run, or check `assay verdicts`",
                )
            if RunStatus(run.status).finished:
                raise UserError(
                    f"run {run.id} is already {run.status}", "start a new run; a finished run takes no more tool calls"
                )
            return run.id
        run = self.ledger.create_run(job=str(self.workspace), kind=self.cfg.kind or "mcp", brain="mcp-client")
        self.ledger.set_run_status(run.id, RunStatus.running)
        return run.id

    def _job_of_run(self) -> dict[str, Any]:
        """The bound run's job as its spec recorded it (a kind's tools read their options
        there: a compile job's backend), or nothing for a run the server made itself."""
        run = self.ledger.get_run(self.run_id)
        spec = run.spec if run is not None and isinstance(run.spec, dict) else {}
        return {"options": spec["options"]} if isinstance(spec.get("options"), dict) else {}

    def _counts(self) -> RateCounts:
        admitted = [
            (d.tool, d.created_at.timestamp())
            for d in self.ledger.policy_decisions(self.run_id)
            if d.decision in ("allow", "approve")
        ]
        return RateCounts.from_calls(admitted)

    # -- what clients see ------------------------------------------------------------------

    def listed_tools(self) -> list[ToolSpec]:
        """Tools this role may call (or ask approval for); the rest exist but would be denied."""
        return [t for name, t in sorted(self.tools.items()) if self.policy.capability(name) is not None]

    def instructions(self) -> str:
        text = (
            f"assay gateway for run {self.run_id}, role '{self.manifest.role}'. "
            "Every call is checked against a signed capability manifest, runs in a sandbox with no "
            "network, and is recorded. Secrets appear as [[SECRET:...]] placeholders. Only verifiers "
            "declare success: submit your candidate with the submit tool."
        )
        return text

    # -- the call path -------------------------------------------------------------------------

    async def call(
        self, name: str, arguments: dict[str, Any], *, key: str, progress: Progress | None = None
    ) -> ToolOutcome:
        call = ToolCall(name=str(name)[:128], arguments=arguments, key=key)
        # With padding on, progress is not sent: its count, sizes and times (a cached autotune
        # reports at once, a cold one when its rounds finish) would show what the padded
        # result hides.
        if progress is not None and not self.cfg.padding.enabled:
            self._progress[call.key] = progress
        try:
            if self.view is None:
                return await self.gateway(call)
            async with self._sync:  # the user's edits in, before the call sees the view
                await anyio.to_thread.run_sync(self.view.pull)
            try:
                return await self.gateway(call)
            finally:
                async with self._sync:  # the agent's edits out, as soon as the call is done
                    await anyio.to_thread.run_sync(self.view.push)
        finally:
            self._progress.pop(call.key, None)

    def _read_only_binds(self) -> tuple[tuple[Path, str], ...]:
        """Each read-only file that exists as a regular file, bound read-only over itself."""
        binds = []
        for rel in self.cfg.read_only:
            path = self.workspace / rel
            if path.is_file() and not path.is_symlink():
                binds.append((path, f"/workspace/{rel}"))
        return tuple(binds)

    async def _report(self, call: ToolCall, done: float, total: float | None, message: str | None) -> None:
        cb = self._progress.get(call.key)
        if cb is not None:
            await cb(done, total, self.redactor.redact(message) if message else None)

    def _decide(self, call: ToolCall) -> Decision:
        args = self._as_tool_sees_it(call)
        spec = self.tools.get(call.name)
        paths = [args.get(a, "") for a in spec.path_args] if spec is not None and spec.path_args else None
        return self.policy.decide(call.name, args, paths=paths)

    def _as_tool_sees_it(self, call: ToolCall) -> dict[str, Any]:
        """Arguments with the tool's defaults filled in, so the policy judges what will run."""
        spec = self.tools.get(call.name)
        if spec is None:
            return call.arguments
        try:
            return spec.input_model.model_validate(call.arguments).model_dump()
        except Exception:
            return call.arguments  # the tool layer reports the invalid arguments

    def _record_decision(self, call: ToolCall, d: Decision) -> None:
        self.ledger.record_policy_decision(
            self.run_id,
            key=call.key,
            tool=call.name,
            decision=d.effect,
            reason=self.redactor.redact(d.reason),
            detail={"rule": d.rule, "fingerprint": call.fingerprint()},
            fetch=False,
        )

    def _record_call(self, call: ToolCall, outcome: ToolOutcome, timing: dict[str, Any]) -> None:
        finished = utcnow()
        started = finished - timedelta(milliseconds=timing["duration_ms"])
        self.ledger.record_tool_call(
            self.run_id,
            key=call.key,
            tool=call.name,
            arguments=self.redactor.redact_json(call.arguments),
            decision=outcome.decision or "deny",
            result=outcome.text,
            started_at=started,
            finished_at=finished,
            error=outcome.text[:500] if outcome.is_error else None,
            fingerprint=call.fingerprint(),
            outcome={
                "text": outcome.text,
                "structured": outcome.structured,
                "is_error": outcome.is_error,
                "rule": outcome.rule,
                "duration_ms": timing["duration_ms"],
            },
            fetch=False,
        )

    def _replay(self, call: ToolCall) -> ToolOutcome | None:
        if call.key.startswith("s:"):
            return None  # a key the server made up this instant cannot have been recorded
        if call.key not in self._recorded_before and call.key not in self._recorded_here:
            self._recorded_here.add(call.key)
            return None
        row = self.ledger.recorded_outcome(self.run_id, call.key)
        if row is None:
            # Taken here but not recorded yet: a call with this key is still running. Run this
            # one under a key of its own, or the ledger would keep only one of the two
            # (decision rows too, so a denial would go unrecorded and per-run counts on resume
            # would miss it).
            call.key = f"{call.key}:{secrets.token_hex(4)}"
            return None
        fingerprint, decision, o = row
        if fingerprint != call.fingerprint() or not o:
            # Same key, different call: never replay it, record it as a call of its own.
            call.key = f"{call.key}:{secrets.token_hex(4)}"
            return None
        return ToolOutcome(
            text=o["text"],
            structured=o.get("structured"),
            is_error=o["is_error"],
            decision=decision,
            rule=o.get("rule"),
        )

    # -- padding of the serialized result ---------------------------------------------------

    def pad(self, result: Any) -> Any:
        """Pad a CallToolResult to the bucket, measured as the SDK will serialize it."""
        if not self.cfg.padding.enabled:
            return result

        def size() -> int:
            return len(pydantic_core.to_json(result.model_dump(by_alias=True, mode="json", exclude_none=True)))

        def set_padding(filler: str) -> None:
            result.meta = {PAD_KEY: filler}

        pad_to_bucket(size, set_padding, self.cfg.padding)
        return result

    def close(self) -> None:
        try:
            if self.view is not None:
                self.view.push()
        finally:
            self.pool.close()
            self.ledger.close()
