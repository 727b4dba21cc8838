"""What each screen shows, read from the ledger and nothing else.

Every function here takes an open Ledger and the current time and returns plain frozen
dataclasses; the screens only lay them out. That keeps the TUI's one source of truth the
ledger (a view is rebuilt on every poll, never patched by hand), keeps the reads off the UI
thread, and lets tests check the reading without a terminal.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from assay.ledger import Approval, Ledger, PolicyDecision, Run, RunStatus, Step, ToolCall, Verdict
from assay.verifiers.outcome import Figures, Shown

# A TUI lists what a person can scan; older runs stay one `assay verdicts` away.
RUNS_LIMIT = 500


# --- small formatting helpers, shared by the screens ---------------------------------------


def seconds(s: float | None) -> str:
    """1m05s style, short enough for a table column."""
    if s is None:
        return "-"
    s = max(0, int(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def offset(s: float) -> str:
    """Time since the run started, +m:ss: readable and the same on every machine."""
    s = max(0, int(s))
    if s < 3600:
        return f"+{s // 60}:{s % 60:02d}"
    return f"+{s // 3600}h{s % 3600 // 60:02d}" if s < 100 * 3600 else f"+{s // 86400}d"


def size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "kB", "MB"):
        if value < 1000 or unit == "MB":
            return f"{n}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1000
    return str(n)


def one_line(text: Any, width: int) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= width else s[: max(0, width - 1)] + "…"


def short_job(job: str) -> str:
    """A job file's name; the full path is in the run's detail."""
    return Path(job).name or job


def describe_args(tool: str, arguments: dict[str, Any]) -> str:
    """What a call would do, as a person reads it: a command line for exec, else the JSON."""
    cmd = arguments.get("command")
    if isinstance(cmd, list) and all(isinstance(c, str) for c in cmd):
        line = shlex.join(cmd)
        if "timeout_s" in arguments:
            line += (
                f"  (timeout {arguments['timeout_s']:g} s)" if isinstance(arguments["timeout_s"], (int, float)) else ""
            )
        return line
    return json.dumps(arguments, sort_keys=True, separators=(", ", ": "), default=str)


def pretty(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str)


def _since(a: datetime | None, b: datetime | None) -> float | None:
    return (b - a).total_seconds() if a and b else None


# --- runs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRow:
    id: str
    job: str
    kind: str
    brain: str
    status: str
    verdict: str  # PASS, FAIL, INCONCLUSIVE (failed only on a figure the machine's load decided) or "" when none
    headline: str | None  # the verdict's headline figure as text (a kernel's "1.84x"), or None
    duration_s: float | None
    created_at: datetime

    def matches(self, text: str) -> bool:
        hay = " ".join((self.id, self.job, self.kind, self.brain, self.status, self.verdict)).lower()
        return all(word in hay for word in text.lower().split())


def duration(run: Run, now: datetime) -> float | None:
    """Wall time from the run's creation: starting the tool server and sandbox is part of
    what a person waits for."""
    return _since(run.created_at, run.finished_at or now)


def latest_verdicts(ledger: Ledger, run_ids: list[str]) -> dict[str, Verdict]:
    """The newest verdict of each run, in one query rather than one per run."""
    if not run_ids:
        return {}
    with ledger.session() as s:
        rows = s.exec(select(Verdict).where(col(Verdict.run_id).in_(run_ids)).order_by(col(Verdict.id)))
        return {v.run_id: v for v in rows}


def verdict_word(payload: dict[str, Any]) -> str:
    return Shown.of(payload).word


def run_rows(ledger: Ledger, now: datetime, limit: int = RUNS_LIMIT) -> list[RunRow]:
    runs = ledger.list_runs(limit=limit)
    verdicts = latest_verdicts(ledger, [r.id for r in runs])
    rows = []
    for r in runs:
        v = verdicts.get(r.id)
        p = v.payload if v else {}
        head = Shown.of(p).headline if v else None
        rows.append(
            RunRow(
                id=r.id,
                job=r.job,
                kind=r.kind,
                brain=r.brain,
                status=r.status,
                verdict=verdict_word(p) if v else "",
                headline=head.text() if head is not None and head.value is not None else None,
                duration_s=duration(r, now),
                created_at=r.created_at,
            )
        )
    return rows


# Sort orders the Runs screen cycles through: (label, key, newest-first).
SORTS: tuple[tuple[str, Any, bool], ...] = (
    ("newest", lambda r: (r.created_at, r.id), True),
    ("oldest", lambda r: (r.created_at, r.id), False),
    ("status", lambda r: (r.status, r.id), False),
    ("job", lambda r: (short_job(r.job), r.id), False),
    ("longest", lambda r: (r.duration_s or 0.0, r.id), True),
)


def arrange(rows: list[RunRow], text: str, sort: int) -> list[RunRow]:
    _, key, reverse = SORTS[sort % len(SORTS)]
    return sorted((r for r in rows if r.matches(text)), key=key, reverse=reverse)


# --- one run, live -----------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One line of a run's timeline: a step, a tool call (with its policy decision), or an
    approval event. `key` stays the same while the line changes (a call in flight, then done)."""

    key: str
    at: float  # seconds since the run was created
    what: str
    tool: str
    decision: str
    summary: str
    detail: str


@dataclass(frozen=True)
class Activity:
    """What the run is busy with right now, for the progress line."""

    label: str
    elapsed: float
    busy: bool  # True: work under way (show a moving bar); False: waiting on a person


@dataclass(frozen=True)
class LiveView:
    run: Run
    events: list[Event]
    activity: Activity | None
    pending: dict[str, Any] | None
    steps_used: int
    steps_budget: int | None
    budget_line: str
    verdicts: int
    elapsed_s: float | None = None
    submissions: int = 0


def _rule(d: PolicyDecision | None, tc: ToolCall | None) -> str:
    if d is not None and (d.detail or {}).get("rule"):
        return str(d.detail["rule"])
    return str((tc.outcome or {}).get("rule") or "") if tc is not None else ""


def _call_event(key: str, d: PolicyDecision | None, tc: ToolCall | None, start: datetime, now: datetime) -> Event:
    tool = d.tool if d else tc.tool if tc else "?"
    decision = d.decision if d else (tc.decision if tc else "")
    rule = _rule(d, tc)
    when = d.created_at if d else (tc.started_at or tc.created_at) if tc else start
    at = _since(start, when) or 0.0
    lines = [f"tool call {key}: {tool}", f"policy: {decision}" + (f" by rule {rule}" if rule else "")]
    if d is not None and d.reason:
        lines.append(f"reason: {d.reason}")
    if tc is None:
        running = _since(d.created_at, now) if d else None
        summary = f"running {seconds(running)}" if decision == "allow" else (d.reason if d else "")
        lines.append("not finished yet")
        return Event(f"call:{key}", at, "call", tool, _decision_cell(decision, rule, tool), summary, "\n".join(lines))
    out = tc.outcome or {}
    text = str(out.get("text") or "")
    args = describe_args(tool, tc.arguments or {})
    if tc.error or out.get("is_error"):
        result = "error: " + one_line(tc.error or text, 200)
    else:
        result = f"ok {seconds((tc.duration_ms or 0) / 1000)} {size(tc.result_size)}"
    # The result first: at 80 columns the arguments are what gets cut off.
    summary = f"{result} · {args}" if decision == "allow" else one_line(text or tc.error or "", 200)
    lines += [
        "arguments (redacted as recorded):",
        pretty(tc.arguments or {}),
        f"duration: {tc.duration_ms:.0f} ms" if tc.duration_ms is not None else "duration: -",
        f"result: {tc.result_digest or '-'} ({size(tc.result_size)})",
    ]
    if tc.error:
        lines.append(f"error: {tc.error}")
    if text:
        lines += ["output (redacted):", text[:4000]]
    return Event(f"call:{key}", at, "call", tool, _decision_cell(decision, rule, tool), summary, "\n".join(lines))


def _decision_cell(decision: str, rule: str, tool: str) -> str:
    """ "allow #0": the tool column already names the tool, so its rule id drops the name
    (the detail pane has the whole of it)."""
    word = {"approve": "ask"}.get(decision, decision)
    if rule.startswith(f"{tool}#"):
        rule = rule[len(tool) :]
    return f"{word} {rule}".strip()


def _step_event(s: Step, start: datetime) -> Event:
    p = s.payload or {}
    calls = [c.get("tool", "?") for c in p.get("tool_calls") or []]
    if p.get("error"):
        summary = "error: " + one_line(p["error"], 200)
    elif p.get("final") is not None:
        summary = "final: " + one_line(p["final"], 200)
    else:
        summary = "called " + (", ".join(calls) if calls else "no tool")
    detail = f"step {s.key} ({s.name})\n" + pretty(p)
    label = s.key.replace("-", " ") if s.name == "agent" else f"{s.name} {s.key}"
    return Event(f"step:{s.key}", _since(start, s.created_at) or 0.0, "step", label, "", summary, detail)


def _approval_event(a: Approval, start: datetime) -> Event:
    if a.event == "requested":
        summary = f"{a.key}: {describe_args(a.tool, a.arguments or {})}"
    else:
        summary = a.request_key + (f" by {a.actor}" if a.actor else "")
    detail = "\n".join(
        [
            f"approval event {a.key}: {a.event}",
            f"request: {a.request_key}",
            f"tool: {a.tool}",
            f"actor: {a.actor or '-'}",
            f"reason: {a.reason or '-'}",
            "arguments (redacted as recorded):",
            pretty(a.arguments or {}),
        ]
    )
    return Event(f"approval:{a.key}", _since(start, a.created_at) or 0.0, "approval", a.tool, a.event, summary, detail)


def _budget_line(run: Run) -> str:
    """Tokens, time and requests used against the budget (steps have a bar of their own)."""
    b, u = run.budget or {}, run.budget_used or {}
    tokens = b.get("tokens")
    parts = [f"tokens {u.get('tokens', 0)}" + (f"/{tokens}" if tokens else "")]
    if b.get("minutes") is not None:
        parts.append(f"time {seconds(u.get('seconds'))}/{seconds(float(b['minutes']) * 60)}")
    parts.append(f"requests {u.get('requests', 0)}")
    return "  ".join(parts)


def live_view(ledger: Ledger, run_id: str, now: datetime) -> LiveView | None:
    from assay.agents.workflow import pending_approval

    run = ledger.get_run(run_id)
    if run is None:
        return None
    start = run.created_at
    decisions = {d.key: d for d in ledger.policy_decisions(run_id)}
    calls = {c.key: c for c in ledger.tool_calls(run_id)}
    events: list[Event] = []
    for key in dict.fromkeys([*decisions, *calls]):
        events.append(_call_event(key, decisions.get(key), calls.get(key), start, now))
    events += [_step_event(s, start) for s in ledger.steps(run_id)]
    approvals = ledger.approval_events(run_id)
    events += [_approval_event(a, start) for a in approvals]
    events.sort(key=lambda e: e.at)
    pending = pending_approval(ledger, run_id)
    status = RunStatus(run.status)
    activity = None
    if pending is not None and not status.finished:
        asked = next((a.created_at for a in approvals if a.key == pending["id"]), now)
        activity = Activity(
            f"waiting for approval {pending['id']}: {pending['tool']} (press a)", _since(asked, now) or 0.0, False
        )
    elif status == RunStatus.verifying:
        activity = Activity("verifying: fresh sandboxes, held-out inputs", _since(run.updated_at, now) or 0.0, True)
    elif not status.finished:
        flying = [d for k, d in decisions.items() if k not in calls and d.decision == "allow"]
        if flying:
            d = flying[-1]
            activity = Activity(f"{d.tool} {d.key} running", _since(d.created_at, now) or 0.0, True)
        elif status == RunStatus.running:
            activity = Activity("agent thinking", _since(run.updated_at, now) or 0.0, True)
        elif status == RunStatus.created:
            activity = Activity("starting the tool server and sandbox", _since(run.created_at, now) or 0.0, True)
    budget = run.budget or {}
    return LiveView(
        run=run,
        events=events,
        activity=activity,
        pending=pending,
        steps_used=int((run.budget_used or {}).get("steps", 0)),
        steps_budget=int(budget["steps"]) if isinstance(budget.get("steps"), int) else None,
        budget_line=_budget_line(run),
        verdicts=len(ledger.verdicts(run_id)),
        elapsed_s=duration(run, now),
        submissions=len(ledger.submissions(run_id)),
    )


# --- approvals ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PendingApproval:
    run_id: str
    id: str
    tool: str
    arguments: dict[str, Any]
    reason: str
    rule: str
    job: str
    run_status: str
    asked_at: datetime
    what: str


def pending_approvals(ledger: Ledger) -> list[PendingApproval]:
    """Every call waiting for a person, oldest first. Only unfinished runs can be waiting."""
    from assay.agents.workflow import pending_approval

    unfinished = {r.id: r for r in ledger.list_runs(limit=RUNS_LIMIT) if not RunStatus(r.status).finished}
    if not unfinished:
        return []
    # One query finds the few runs that ever asked; only those are asked what is pending.
    with ledger.session() as s:
        asked = set(
            s.exec(
                select(Approval.run_id).where(col(Approval.run_id).in_(list(unfinished)), Approval.event == "requested")
            )
        )
    out = []
    for run in (unfinished[rid] for rid in unfinished if rid in asked):
        p = pending_approval(ledger, run.id)
        if p is None:
            continue
        req = next(a for a in ledger.approval_events(run.id) if a.key == p["id"])
        rule = next(
            (
                str(d.detail.get("rule"))
                for d in ledger.policy_decisions(run.id)
                if d.decision == "approve"
                and (d.detail or {}).get("fingerprint") == req.fingerprint
                and d.detail.get("rule")
            ),
            "",
        )
        out.append(
            PendingApproval(
                run_id=run.id,
                id=p["id"],
                tool=p["tool"],
                arguments=dict(p["arguments"] or {}),
                reason=p["reason"] or "",
                rule=rule,
                job=run.job,
                run_status=run.status,
                asked_at=req.created_at,
                what=describe_args(p["tool"], p["arguments"] or {}),
            )
        )
    out.sort(key=lambda p: (p.asked_at, p.run_id))
    return out


# --- verdicts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class VerdictView:
    run: Run
    verdict: Verdict | None
    count: int  # verdicts this run has; the view shows the newest
    signature: str  # valid | invalid | unknown-key | no-key | -
    key_id: str

    @property
    def payload(self) -> dict[str, Any]:
        return self.verdict.payload if self.verdict else {}

    @property
    def figures(self) -> Figures | None:
        return Shown.of(self.payload).figures


def verdict_view(ledger: Ledger, run_id: str, home: Path) -> VerdictView | None:
    from assay.verifiers.signing import check_row, key_id, load_public_key

    run = ledger.get_run(run_id)
    if run is None:
        return None
    vs = ledger.verdicts(run_id)
    v = vs[-1] if vs else None
    public = load_public_key(home)
    sig = check_row(public, v.run_id, v.key, v.payload, v.signature) if v else "-"
    return VerdictView(run=run, verdict=v, count=len(vs), signature=sig, key_id=key_id(public) if public else "-")


@dataclass(frozen=True)
class ChainStatus:
    ok: bool
    summary: str
    bad_row: int | None


def chain_status(ledger: Ledger, home: Path) -> ChainStatus:
    """Walks the whole chain with signatures checked: slow on a big ledger, so callers run
    it in a worker."""
    from assay.verifiers.signing import chain_check

    report = ledger.verify_chain(signature_check=chain_check(home))
    return ChainStatus(report.ok, report.summary(), report.row_id)


def chain_position(status: ChainStatus, verdict_id: int) -> str:
    if status.ok or status.bad_row is None or verdict_id < status.bad_row:
        return "in an intact chain"
    return "the chain breaks here" if verdict_id == status.bad_row else "after a break in the chain"
