"""Enforcement: the decision a capability manifest makes about one tool call.

`CapabilityPolicy(manifest).decide(tool, arguments)` is pure apart from the clock and the
rate counters it keeps: it reads no file and writes no ledger. The gateway records each
Decision; a denial's `reason` is written for the model, so it says what was refused and
what would be accepted.

Order of checks, each one able to deny: the tool is granted; the arguments are well
formed (paths relative and inside the workspace by name, command a list of strings,
timeout a positive number); hard constraints (paths, executables, max timeout); rules in
order, then the tool's default; finally rate limits, which only admitted calls consume.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from assay.policies.manifest import (
    COMMAND_ARG,
    PATH_ARG,
    TIMEOUT_ARG,
    Manifest,
    Rule,
    ToolCapability,
    to_ms,
)
from assay.policies.paths import PathRefused, glob_match, normalize_relpath
from assay.settings import Limits, settings

WINDOW_S = 60.0
MAX_SHOWN = 80


@dataclass(frozen=True)
class EffectiveLimits:
    """Limits the tool must apply to an admitted call: the tighter of manifest and settings."""

    timeout_ms: int
    output_bytes: int

    @property
    def timeout_s(self) -> float:
        return self.timeout_ms / 1000

    def deadline_ns(self, start_ns: int) -> int:
        # `analysis` proves this sum and product fit in a signed 64-bit integer.
        return start_ns + self.timeout_ms * 1_000_000


@dataclass(frozen=True)
class Decision:
    effect: Literal["allow", "deny", "approve"]
    rule: str
    reason: str
    tool: str
    limits: EffectiveLimits | None = None
    # Whether the gateway may restore placeholders into this call's arguments.
    restore_placeholders: bool = False
    egress: bool = False

    @property
    def allowed(self) -> bool:
        return self.effect == "allow"


@dataclass(frozen=True)
class ToolBudget:
    """The most one run can spend through a tool: per_run times each per-call limit."""

    calls: int
    wall_ms: int
    output_bytes: int


@dataclass(frozen=True)
class RunBudget:
    tools: dict[str, ToolBudget | None]
    # None when some granted tool has no per-run limit: the run is then unbounded.
    wall_ms: int | None
    output_bytes: int | None


@dataclass
class RateCounts:
    """Calls a run has made per tool, so limits survive a resume.

    `per_run` counts admitted calls; `recent` holds their wall-clock times within the last
    minute. Rebuild it from the ledger's recorded decisions with `from_calls`.
    """

    per_run: dict[str, int] = field(default_factory=dict)
    recent: dict[str, deque[float]] = field(default_factory=dict)

    @classmethod
    def from_calls(cls, calls: Iterable[tuple[str, float]]) -> RateCounts:
        """From (tool, unix time) of every call a run had admitted (allow or approve)."""
        counts = cls()
        for tool, at in sorted(calls, key=lambda c: c[1]):
            counts.record(tool, at)
        return counts

    def record(self, tool: str, at: float) -> None:
        self.per_run[tool] = self.per_run.get(tool, 0) + 1
        window = self.recent.setdefault(tool, deque())
        window.append(at)
        self._trim(window, at)

    def in_window(self, tool: str, now: float) -> deque[float]:
        window = self.recent.setdefault(tool, deque())
        self._trim(window, now)
        return window

    @staticmethod
    def _trim(window: deque[float], now: float) -> None:
        while window and window[0] <= now - WINDOW_S:
            window.popleft()


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def _seconds(ms: int) -> str:
    return f"{ms / 1000:g} s"


class CapabilityPolicy:
    """Decides tool calls for one role; one instance per run (it holds the run's counts)."""

    def __init__(self, manifest: Manifest, *, limits: Limits | None = None, counts: RateCounts | None = None):
        self.manifest = manifest
        self.global_limits = limits or settings().limits
        self.counts = counts or RateCounts()
        self._lock = threading.Lock()

    # -- what a tool may do, independent of a call ------------------------------------

    def capability(self, tool: str) -> ToolCapability | None:
        return self.manifest.tools.get(tool)

    def may_restore_placeholders(self, tool: str) -> bool:
        cap = self.capability(tool)
        return bool(cap and cap.restore_placeholders)

    def effective_limits(self, tool: str) -> EffectiveLimits:
        cap = self.capability(tool) or ToolCapability()
        timeout = to_ms(self.global_limits.timeout_s)
        if cap.max_timeout_s is not None:
            timeout = min(timeout, to_ms(cap.max_timeout_s))
        output = self.global_limits.output_bytes
        if cap.max_output_bytes is not None:
            output = min(output, cap.max_output_bytes)
        return EffectiveLimits(timeout_ms=timeout, output_bytes=output)

    def run_budget(self) -> RunBudget:
        tools: dict[str, ToolBudget | None] = {}
        for name, cap in self.manifest.tools.items():
            if not _grants_anything(cap):
                continue
            if cap.rate.per_run is None:
                tools[name] = None
                continue
            lim = self.effective_limits(name)
            n = cap.rate.per_run
            tools[name] = ToolBudget(calls=n, wall_ms=n * lim.timeout_ms, output_bytes=n * lim.output_bytes)
        bounded = [b for b in tools.values() if b is not None]
        if len(bounded) < len(tools):
            return RunBudget(tools, None, None)
        return RunBudget(tools, sum(b.wall_ms for b in bounded), sum(b.output_bytes for b in bounded))

    # -- one call ---------------------------------------------------------------------

    def decide(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        now: float | None = None,
        paths: list[Any] | None = None,
    ) -> Decision:
        """`paths`: every path the call touches, when the tool names them otherwise than `path`
        (diff's a and b, submit's entry). Each is judged as if it were the call's `path`, and
        the most restrictive answer stands, so no argument name escapes a path constraint."""
        now = time.time() if now is None else now
        cap = self.manifest.tools.get(tool) if isinstance(tool, str) else None
        if cap is None:
            granted = ", ".join(sorted(self.manifest.tools)) or "none"
            return Decision(
                "deny",
                "manifest#unlisted",
                f"denied: tool {_show(tool)} is not granted to role '{self.manifest.role}' (granted: {granted})",
                str(tool),
            )
        arguments = {} if arguments is None else arguments
        if paths is None or not isinstance(arguments, Mapping):
            decision = self._decide_call(tool, cap, arguments)
        else:
            each = [self._decide_call(tool, cap, {**arguments, PATH_ARG: p}) for p in paths] or [
                self._decide_call(tool, cap, arguments)
            ]
            decision = min(each, key=lambda d: _STRICTNESS[d.effect])
        if decision.effect == "deny":
            return decision
        with self._lock:
            refused = self._rate_refusal(tool, cap, now)
            if refused:
                return refused
            self.counts.record(tool, now)
        return decision

    def _decide_call(self, tool: str, cap: ToolCapability, arguments: Mapping[str, Any]) -> Decision:
        def deny(rule: str, reason: str) -> Decision:
            return Decision("deny", rule, f"denied by {rule}: {reason}", tool)

        if not isinstance(arguments, Mapping):
            return deny(f"{tool}#arguments", "arguments must be an object")
        limits = self.effective_limits(tool)

        # Path: a call without one acts on the workspace root, which is what list_files does.
        raw_path = arguments.get(PATH_ARG, "")
        try:
            path = normalize_relpath(raw_path)
        except PathRefused as exc:
            return deny(f"{tool}#{PATH_ARG}", str(exc))
        shown_path = _show(path or ".")

        command = arguments.get(COMMAND_ARG)
        executable = None
        if command is not None:
            if (
                not isinstance(command, list)
                or not command
                or not all(isinstance(a, str) for a in command)
                or not command[0]
            ):
                return deny(f"{tool}#{COMMAND_ARG}", "command must be a non-empty list of strings, program first")
            if any("\x00" in a for a in command):
                return deny(f"{tool}#{COMMAND_ARG}", "command arguments must not contain NUL bytes")
            executable = command[0]

        requested = arguments.get(TIMEOUT_ARG)
        if requested is None:
            t_ms = limits.timeout_ms
        else:
            if (
                isinstance(requested, bool)
                or not isinstance(requested, (int, float))
                or not math.isfinite(requested)
                or requested <= 0
            ):
                return deny(
                    f"{tool}#{TIMEOUT_ARG}", f"timeout_s must be a positive number of seconds, got {_show(requested)}"
                )
            t_ms = max(1, to_ms(requested)) if requested < 1e12 else math.inf
            if t_ms > limits.timeout_ms:
                return deny(
                    f"{tool}#max_timeout_s",
                    f"timeout_s {requested:g} exceeds the limit of {_seconds(limits.timeout_ms)}; ask for at most that",
                )

        if cap.paths is not None and not any(glob_match(p, path) for p in cap.paths):
            return deny(f"{tool}#paths", f"path {shown_path} is not inside the allowed paths [{', '.join(cap.paths)}]")
        if cap.executables is not None:
            if executable is None:
                return deny(
                    f"{tool}#executables",
                    f"give the program to run as command[0], one of [{', '.join(cap.executables)}]",
                )
            if executable not in cap.executables:
                hint = ""
                base = executable.rsplit("/", 1)[-1]
                if base in cap.executables:
                    hint = f"; call it by its bare name {base!r}, the sandbox resolves it on its PATH"
                return deny(
                    f"{tool}#executables",
                    f"executable {_show(executable)} is not in [{', '.join(cap.executables)}]{hint}",
                )

        call = _Call(path=path, executable=executable, t_ms=t_ms)
        misses = []
        for index, rule in enumerate(cap.rules):
            rid = self.manifest.rule_id(tool, index)
            why_not = _mismatch(rule, call)
            if why_not is None:
                return self._by_rule(tool, cap, rid, rule, limits)
            if rule.effect != "deny":
                misses.append(f"{rid} needs {why_not}")
        rid = f"{tool}#default"
        if cap.default == "deny":
            detail = (
                f"no rule admits this call ({'; '.join(misses)})"
                if misses
                else "this tool is not allowed for this role"
            )
            return deny(rid, detail)
        return self._admit(tool, cap, cap.default, rid, f"{rid}: no rule matched, default is {cap.default}", limits)

    def _by_rule(self, tool: str, cap: ToolCapability, rid: str, rule: Rule, limits: EffectiveLimits) -> Decision:
        label = f"{rid} ({rule.name})" if rule.name else rid
        what = rule.reason or (_describe(rule) if not rule.unconditional else "")
        if rule.effect == "deny":
            return Decision("deny", rid, f"denied by rule {label}" + (f": {what}" if what else ""), tool)
        if rule.effect == "approve":
            reason = f"rule {label} needs human approval" + (f": {what}" if what else "")
        else:
            reason = f"allowed by rule {label}"
        return self._admit(tool, cap, rule.effect, rid, reason, limits)

    @staticmethod
    def _admit(tool, cap, effect, rid, reason, limits) -> Decision:
        return Decision(effect, rid, reason, tool, limits, cap.restore_placeholders, cap.egress)

    def _rate_refusal(self, tool: str, cap: ToolCapability, now: float) -> Decision | None:
        per_run, per_minute = cap.rate.per_run, cap.rate.per_minute
        if per_run is not None and self.counts.per_run.get(tool, 0) >= per_run:
            rid = f"{tool}#rate.per_run"
            return Decision(
                "deny",
                rid,
                f"denied by {rid}: this run has used all {per_run} calls of {tool}; finish with what you have",
                tool,
            )
        if per_minute is not None:
            window = self.counts.in_window(tool, now)
            if len(window) >= per_minute:
                wait = max(0.0, window[0] + WINDOW_S - now)
                rid = f"{tool}#rate.per_minute"
                return Decision(
                    "deny",
                    rid,
                    f"denied by {rid}: at most {per_minute} calls of {tool} per minute; retry in {wait:.1f} s",
                    tool,
                )
        return None


# deny beats approve beats allow when a call touches several paths.
_STRICTNESS = {"deny": 0, "approve": 1, "allow": 2}


@dataclass(frozen=True)
class _Call:
    path: str
    executable: str | None
    t_ms: int | float


def _mismatch(rule: Rule, call: _Call) -> str | None:
    """None when every condition of `rule` holds for `call`, else the first that does not."""
    if rule.path is not None and not any(glob_match(p, call.path) for p in rule.path):
        return f"path in [{', '.join(rule.path)}], got {_show(call.path or '.')}"
    if rule.executable is not None and call.executable not in rule.executable:
        return f"executable in [{', '.join(rule.executable)}], got {_show(call.executable)}"
    if rule.timeout_s is not None:
        lo, hi = rule.timeout_s.min, rule.timeout_s.max
        if (lo is not None and call.t_ms < to_ms(lo)) or (hi is not None and call.t_ms > to_ms(hi)):
            return f"timeout_s {_range(lo, hi)}, got {call.t_ms / 1000:g}"
    return None


def _range(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"between {lo:g} and {hi:g}"
    return f"at least {lo:g}" if lo is not None else f"at most {hi:g}"


def _describe(rule: Rule) -> str:
    parts = []
    if rule.path is not None:
        parts.append(f"path in [{', '.join(rule.path)}]")
    if rule.executable is not None:
        parts.append(f"executable in [{', '.join(rule.executable)}]")
    if rule.timeout_s is not None:
        parts.append(f"timeout_s {_range(rule.timeout_s.min, rule.timeout_s.max)}")
    return "calls with " + " and ".join(parts)


def _grants_anything(cap: ToolCapability) -> bool:
    # Syntactic: a tool whose every outcome is deny grants nothing. `analysis` decides the
    # semantic question (is a non-deny outcome reachable at all) with z3.
    return cap.default != "deny" or any(r.effect != "deny" for r in cap.rules)
