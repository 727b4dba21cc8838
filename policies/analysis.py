"""Proofs about capability manifests with z3, each failed one with a counterexample.

Properties, per manifest (one manifest is one role):
- `secrets-stay-in`: no tool that may receive restored placeholders is granted beside a
  tool whose output leaves the trust boundary (egress). "Granted" means z3 finds a call
  the manifest admits (allow or approve), so a tool whose rules deny everything is not.
- `paths-inside-workspace`: no path pattern in a constraint or in an allow/approve rule
  admits an absolute path, a `..` segment or NUL. Globs become z3 regular expressions
  with the semantics of `assay.policies.paths`.
- `no-dead-rules`: every rule matches some call the hard constraints admit.
- `no-shadowed-rules`: every rule matches some call no earlier rule matches.
- `limits-tighten-global`: in integer arithmetic, a tool's timeout and output caps are
  within the global limits (a manifest may only tighten them), and a per-minute rate
  limit below the per-run one (otherwise it can never bind).
- `no-int64-overflow`: in 64-bit two's complement, the sums and products the code computes
  from these numbers (`EffectiveLimits.deadline_ns`, `CapabilityPolicy.run_budget`) never
  overflow for any admitted call.

Every query has a timeout; `unknown` is reported as not proved.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

import z3

from assay.policies.capabilities import CapabilityPolicy
from assay.policies.manifest import Manifest, Rule, ToolCapability, to_ms
from assay.policies.paths import has_wildcard
from assay.settings import Limits, settings

Status = Literal["proved", "failed", "unknown"]
PROPERTIES = (
    "secrets-stay-in",
    "paths-inside-workspace",
    "no-dead-rules",
    "no-shadowed-rules",
    "limits-tighten-global",
    "no-int64-overflow",
)
DEFAULT_TIMEOUT_MS = 10_000
INT64_MAX = (1 << 63) - 1
# Deadlines start from time.time_ns() or monotonic_ns(); both stay below 2**62 until 2116.
START_NS_MAX = 1 << 62
NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class Finding:
    role: str
    property: str
    subject: str
    status: Status
    detail: str = ""


@dataclass
class Report:
    source: str
    role: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.status == "proved" for f in self.findings)


# ---------------------------------------------------------------------------------------
# Globs as z3 regular expressions.
#
# A path p is encoded in "prefixed" form: "" for the workspace root, "/" + p otherwise, so
# every segment reads as "/name" and `**` is simply (/name)*. An absolute path "/etc" has
# prefixed form "//etc": an empty first segment, which only a literal empty pattern
# segment (a leading "/") can produce. Everything is said with regular expressions alone
# (no string functions, no complement): z3 decides those quickly by derivatives, where the
# mixed encoding returned unknown on a pattern as plain as `**`.

_MAX_CHAR = "\\u{2ffff}"  # the top of z3's alphabet, written as a z3 escape
_NUL = "\\u{0}"
_SEGCHAR = z3.Union(z3.Range("\\u{1}", "."), z3.Range("0", _MAX_CHAR))  # not NUL, not '/'
_NONDOT = z3.Union(z3.Range("\\u{1}", "-"), z3.Range("0", _MAX_CHAR))  # nor '.'
_ANY = z3.Full(z3.ReSort(z3.StringSort()))
_NODOT_NAME = z3.Concat(_NONDOT, z3.Star(_SEGCHAR))
# A name that is neither "." nor "..": what normalization lets through.
_SAFE_NAME = z3.Union(
    _NODOT_NAME,
    z3.Concat(z3.Re("."), _NONDOT, z3.Star(_SEGCHAR)),
    z3.Concat(z3.Re(".."), z3.Plus(_SEGCHAR)),
)
NORMALIZED = z3.Star(z3.Concat(z3.Re("/"), _SAFE_NAME))
# Prefixed forms of paths outside the workspace: absolute, a ".." segment, or a NUL.
OUTSIDE = z3.Union(
    z3.Concat(z3.Re("//"), _ANY),
    z3.Concat(_ANY, z3.Re("/.."), z3.Option(z3.Concat(z3.Re("/"), _ANY))),
    z3.Concat(_ANY, z3.Re(z3.StringVal(_NUL)), _ANY),
)


# z3's Python API types most of its results as unions of every kind of expression; these say
# (and check) which one a call returns, so the rest is typed.
def _re(x: object) -> z3.ReRef:
    assert isinstance(x, z3.ReRef), type(x)
    return x


def _bool(x: object) -> z3.BoolRef:
    assert isinstance(x, z3.BoolRef), type(x)
    return x


def _int(x: object) -> int:
    """The value of a numeral z3 evaluated (an integer or a bit vector)."""
    if isinstance(x, (z3.IntNumRef, z3.BitVecNumRef)):
        return x.as_long()
    raise TypeError(f"not a numeral: {x!r}")


def _literal(text: str) -> z3.ReRef:
    # Patterns hold no backslash (validated), so z3 reads no escape sequence in them.
    return z3.Re(z3.StringVal(text))


def _pieces_re(pieces: list[str], first: bool) -> z3.ReRef | None:
    """Regex for a run of glob pieces; `first`: the name must start with a non-dot.

    Built so that the dot-file rule needs no intersection: a leading `*` either consumes a
    non-dot first character itself, or is empty and hands the rule on to what follows.
    None stands for the empty language.
    """
    if not pieces:
        return None if first else z3.Re("")
    head, rest = pieces[0], pieces[1:]
    if head == "*":
        tail = _pieces_re(rest, False)
        if not first:
            return _re(z3.Concat(z3.Star(_SEGCHAR), tail))
        options = [z3.Concat(_NODOT_NAME, tail)]
        handed_on = _pieces_re(rest, True)
        if handed_on is not None:
            options.append(handed_on)
        return _re(z3.Union(*options)) if len(options) > 1 else _re(options[0])
    tail = _pieces_re(rest, False)
    if head == "?":
        return _re(z3.Concat(_NONDOT if first else _SEGCHAR, tail))
    if first and head.startswith("."):
        return None
    return _re(z3.Concat(_literal(head), tail))


def _segment_re(segment: str) -> z3.ReRef | None:
    if not has_wildcard(segment):
        return _literal(segment)
    pieces, buf = [], ""
    for ch in segment:
        if ch in "*?":
            if buf:
                pieces.append(buf)
                buf = ""
            pieces.append(ch)
        else:
            buf += ch
    if buf:
        pieces.append(buf)
    # Dot-file rule: a wildcard segment matches a dot-name only if it starts with '.'
    # itself; a leading literal makes the name non-empty either way.
    return _pieces_re(pieces, first=not segment.startswith("."))


_EMPTY = z3.Empty(z3.ReSort(z3.StringSort()))


def glob_regex(pattern: str) -> z3.ReRef:
    """The prefixed-form language of `pattern` (see paths.glob_match for the rules)."""
    parts = []
    for segment in pattern.split("/"):
        if segment == "**":
            parts.append(z3.Star(z3.Concat(z3.Re("/"), _NODOT_NAME)))
            continue
        seg = _segment_re(segment)
        if seg is None:
            return _re(_EMPTY)
        parts.append(_re(z3.Concat(z3.Re("/"), seg)))
    return parts[0] if len(parts) == 1 else _re(z3.Concat(*parts))


def prefixed(path: str) -> str:
    return "/" + path if path else ""


def unprefixed(y: str) -> str:
    return y[1:] if y else "."


# ---------------------------------------------------------------------------------------
# Calls to one tool as z3 variables.


class _ToolModel:
    """z3 variables for one call to a tool, the constraints' domain, and rule conditions."""

    def __init__(self, name: str, cap: ToolCapability, policy: CapabilityPolicy, tag: str = ""):
        self.name, self.cap = name, cap
        self.path = z3.String(f"{name}{tag}.path")  # prefixed form, see above
        self.exe = z3.String(f"{name}{tag}.exe")  # "" stands for "no command given"
        self.t = z3.Int(f"{name}{tag}.timeout_ms")
        self.limit_ms = policy.effective_limits(name).timeout_ms
        # Labelled, so that an unsat core can say which constraint kills a dead rule.
        self.domain_parts: list[tuple[str, z3.BoolRef]] = [
            ("path normalization", z3.InRe(self.path, NORMALIZED)),
            (f"limit timeout_s <= {self.limit_ms / 1000:g}", _bool(z3.And(self.t >= 1, self.t <= self.limit_ms))),
            ("no NUL in command", _bool(z3.Not(z3.Contains(self.exe, z3.StringVal(_NUL))))),
        ]
        if cap.paths is not None:
            self.domain_parts.append(
                ("constraint paths", z3.InRe(self.path, z3.Union(*[glob_regex(p) for p in cap.paths])))
            )
        if cap.executables is not None:
            self.domain_parts.append(
                ("constraint executables", _bool(z3.Or([self.exe == z3.StringVal(x) for x in cap.executables])))
            )
        self.domain = z3.And([f for _, f in self.domain_parts])
        self.cond_parts = [self.condition_parts(rule) for rule in cap.rules]
        self.conds = [z3.And([f for _, f in parts]) if parts else z3.BoolVal(True) for parts in self.cond_parts]

    def condition_parts(self, rule: Rule) -> list[tuple[str, z3.BoolRef]]:
        parts = []
        if rule.path is not None:
            parts.append(("condition path", z3.InRe(self.path, z3.Union(*[glob_regex(p) for p in rule.path]))))
        if rule.executable is not None:
            parts.append(("condition executable", z3.Or([self.exe == z3.StringVal(x) for x in rule.executable])))
        if rule.timeout_s is not None:
            bounds = []
            if rule.timeout_s.min is not None:
                bounds.append(self.t >= to_ms(rule.timeout_s.min))
            if rule.timeout_s.max is not None:
                bounds.append(self.t <= to_ms(rule.timeout_s.max))
            if bounds:
                parts.append(("condition timeout_s", z3.And(bounds)))
        return parts

    def fires(self, index: int) -> z3.BoolRef:
        """Rule `index` decides the call: it matches and no earlier rule does."""
        return _bool(z3.And(self.domain, self.conds[index], *[z3.Not(c) for c in self.conds[:index]]))

    def admitted(self) -> z3.BoolRef:
        """Some call gets allow or approve."""
        outcomes = [self.fires(i) for i, r in enumerate(self.cap.rules) if r.effect != "deny"]
        if self.cap.default != "deny":
            outcomes.append(_bool(z3.And(self.domain, *[z3.Not(c) for c in self.conds])))
        return _bool(z3.Or(outcomes)) if outcomes else z3.BoolVal(False)

    def example(self, model: z3.ModelRef) -> dict:
        """The call a model describes, as the arguments a client would send."""
        args: dict = {}
        uses = self.cap.rules + [self.cap]

        def used(attr: str) -> bool:
            return any(getattr(u, attr, None) is not None for u in uses)

        if used("path") or used("paths"):
            args["path"] = unprefixed(_string_value(model, self.path))
        exe = _string_value(model, self.exe)
        if (used("executable") or used("executables")) and exe:
            args["command"] = [exe]
        if used("timeout_s"):
            args["timeout_s"] = _int(model.eval(self.t, model_completion=True)) / 1000
        return args


def _string_value(model: z3.ModelRef, var: z3.SeqRef) -> str:
    # Read code points one by one: the printed form of a z3 string escapes characters.
    n = _int(model.eval(z3.Length(var), model_completion=True))
    codes = [_int(model.eval(z3.StrToCode(z3.SubString(var, i, 1)), model_completion=True)) for i in range(n)]
    return "".join(chr(c) for c in codes)


def _solve(timeout_ms: int, *facts: z3.BoolRef) -> tuple[z3.CheckSatResult, z3.ModelRef | None]:
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*facts)
    result = solver.check()
    return result, solver.model() if result == z3.sat else None


def _solve_tracked(timeout_ms: int, parts: list[tuple[str, z3.BoolRef]]):
    """Like _solve, with an unsat core of part labels when unsat."""
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    labels = {}
    for i, (label, fact) in enumerate(parts):
        flag = z3.Bool(f"part{i}")
        labels[flag.get_id()] = label
        solver.assert_and_track(fact, flag)
    result = solver.check()
    if result == z3.sat:
        return result, solver.model(), []
    core = [labels[_bool(c).get_id()] for c in solver.unsat_core()] if result == z3.unsat else []
    return result, None, core


def _unknown(timeout_ms: int) -> str:
    return f"z3 returned unknown within {timeout_ms} ms: not proved"


# ---------------------------------------------------------------------------------------
# The properties.


def check_manifest(
    manifest: Manifest, source: str = "", *, limits: Limits | None = None, timeout_ms: int = DEFAULT_TIMEOUT_MS
) -> Report:
    limits = limits or settings().limits
    policy = CapabilityPolicy(manifest, limits=limits)
    models = {name: _ToolModel(name, cap, policy) for name, cap in manifest.tools.items()}
    report = Report(source or manifest.role, manifest.role)
    add = report.findings.extend
    add(_secrets_stay_in(manifest, policy, timeout_ms))
    add(_paths_inside(manifest, timeout_ms))
    add(_dead_and_shadowed(manifest, models, timeout_ms))
    add(_limits_tighten(manifest, limits, timeout_ms))
    add(_no_overflow(manifest, policy, timeout_ms))
    return report


def _secrets_stay_in(manifest: Manifest, policy: CapabilityPolicy, timeout_ms: int) -> Iterable[Finding]:
    prop, role = "secrets-stay-in", manifest.role
    restorers = [n for n, c in manifest.tools.items() if c.restore_placeholders]
    egress = [n for n, c in manifest.tools.items() if c.egress]
    pairs = [(r, e) for r in restorers for e in egress]
    unknown, failed = [], False
    for r, e in pairs:
        # Separate variables per side: the two calls are independent.
        a = _ToolModel(r, manifest.tools[r], policy, tag="@restore")
        b = _ToolModel(e, manifest.tools[e], policy, tag="@egress")
        result, model = _solve(timeout_ms, a.admitted(), b.admitted())
        if result == z3.sat:
            assert model is not None  # sat: z3 has one
            same = " (one tool does both)" if r == e else ""
            yield Finding(
                role,
                prop,
                f"{r} + {e}",
                "failed",
                f"{r} may receive restored secrets and {e} sends output outside{same}: "
                f"e.g. {r}({_args(a.example(model))}) then {e}({_args(b.example(model))})",
            )
            failed = True
        elif result == z3.unknown:
            unknown.append(f"{r} + {e}")
    if unknown:
        yield Finding(role, prop, ", ".join(unknown), "unknown", _unknown(timeout_ms))
    elif not failed:
        yield Finding(
            role, prop, f"{_n(len(restorers), 'restoring tool')} x {_n(len(egress), 'egress tool')}", "proved"
        )


def _patterns(manifest: Manifest) -> Iterable[tuple[str, str]]:
    """(where, pattern) for every pattern that admits calls; deny rules only take away."""
    for name, cap in manifest.tools.items():
        for pattern in cap.paths or []:
            yield f"{name}.paths", pattern
        for i, rule in enumerate(cap.rules):
            if rule.effect != "deny":
                for pattern in rule.path or []:
                    yield manifest.rule_id(name, i), pattern


def _paths_inside(manifest: Manifest, timeout_ms: int) -> Iterable[Finding]:
    prop, role = "paths-inside-workspace", manifest.role
    checked = 0
    failed = False
    for where, pattern in _patterns(manifest):
        checked += 1
        s = z3.String("path")
        result, model = _solve(timeout_ms, z3.InRe(s, z3.Intersect(glob_regex(pattern), OUTSIDE)))
        if result == z3.sat:
            assert model is not None  # sat: z3 has one
            failed = True
            yield Finding(
                role, prop, f"{where} {pattern!r}", "failed", f"admits {unprefixed(_string_value(model, s))!r}"
            )
        elif result == z3.unknown:
            failed = True
            yield Finding(role, prop, f"{where} {pattern!r}", "unknown", _unknown(timeout_ms))
    if not failed:
        yield Finding(role, prop, _n(checked, "pattern"), "proved")


def _dead_and_shadowed(manifest: Manifest, models: dict[str, _ToolModel], timeout_ms: int) -> Iterable[Finding]:
    role = manifest.role
    counts = {"no-dead-rules": 0, "no-shadowed-rules": 0}
    bad = set()
    for name, m in models.items():
        for i in range(len(m.cap.rules)):
            rid = manifest.rule_id(name, i)
            counts["no-dead-rules"] += 1
            result, model, core = _solve_tracked(timeout_ms, m.domain_parts + m.cond_parts[i])
            if result == z3.unsat:
                bad.add("no-dead-rules")
                yield Finding(
                    role, "no-dead-rules", rid, "failed", f"no call matches it: {' and '.join(sorted(core))} contradict"
                )
                continue
            if result == z3.unknown:
                bad.add("no-dead-rules")
                yield Finding(role, "no-dead-rules", rid, "unknown", _unknown(timeout_ms))
                continue
            assert model is not None  # sat: z3 has one
            example = model
            if i == 0:
                continue
            counts["no-shadowed-rules"] += 1
            result, _ = _solve(timeout_ms, m.fires(i))
            if result == z3.unsat:
                bad.add("no-shadowed-rules")
                hit = next(
                    (
                        manifest.rule_id(name, j)
                        for j in range(i)
                        if z3.is_true(example.eval(m.conds[j], model_completion=True))
                    ),
                    "an earlier rule",
                )
                yield Finding(
                    role,
                    "no-shadowed-rules",
                    rid,
                    "failed",
                    f"every call it matches is taken earlier, e.g. {name}({_args(m.example(example))}) "
                    f"is decided by {hit}",
                )
            elif result == z3.unknown:
                bad.add("no-shadowed-rules")
                yield Finding(role, "no-shadowed-rules", rid, "unknown", _unknown(timeout_ms))
    for prop, n in counts.items():
        if prop not in bad:
            yield Finding(role, prop, _n(n, "rule"), "proved")


def _limits_tighten(manifest: Manifest, limits: Limits, timeout_ms: int) -> Iterable[Finding]:
    prop, role = "limits-tighten-global", manifest.role
    claims = []  # (subject, z3 claim over integers, counterexample text)
    g_timeout, g_output = z3.IntVal(to_ms(limits.timeout_s)), z3.IntVal(limits.output_bytes)
    for name, cap in manifest.tools.items():
        if cap.max_timeout_s is not None:
            v = z3.Int(f"{name}.max_timeout_ms")
            claims.append(
                (
                    f"{name}.max_timeout_s",
                    v == to_ms(cap.max_timeout_s),
                    v <= g_timeout,
                    f"{cap.max_timeout_s:g} s is above the global limit of {limits.timeout_s:g} s "
                    "(ASSAY_LIMIT_TIMEOUT_S), which applies instead",
                )
            )
        if cap.max_output_bytes is not None:
            v = z3.Int(f"{name}.max_output_bytes")
            claims.append(
                (
                    f"{name}.max_output_bytes",
                    v == cap.max_output_bytes,
                    v <= g_output,
                    f"{cap.max_output_bytes} bytes is above the global limit of {limits.output_bytes} "
                    "(ASSAY_LIMIT_OUTPUT_BYTES), which applies instead",
                )
            )
        if cap.rate.per_minute is not None and cap.rate.per_run is not None:
            pm, pr = z3.Int(f"{name}.per_minute"), z3.Int(f"{name}.per_run")
            claims.append(
                (
                    f"{name}.rate",
                    z3.And(pm == cap.rate.per_minute, pr == cap.rate.per_run),
                    pm <= pr,
                    f"per_minute {cap.rate.per_minute} > per_run {cap.rate.per_run}: "
                    "the per-minute limit can never bind",
                )
            )
    failed = False
    for subject, facts, claim, text in claims:
        result, _ = _solve(timeout_ms, facts, _bool(z3.Not(claim)))
        if result != z3.unsat:
            failed = True
            status: Status = "failed" if result == z3.sat else "unknown"
            yield Finding(role, prop, subject, status, text if status == "failed" else _unknown(timeout_ms))
    if not failed:
        yield Finding(role, prop, _n(len(claims), "limit"), "proved")


def _no_overflow(manifest: Manifest, policy: CapabilityPolicy, timeout_ms: int) -> Iterable[Finding]:
    """Mirror of the int64 arithmetic in EffectiveLimits.deadline_ns and run_budget."""
    prop, role = "no-int64-overflow", manifest.role
    bits = 64

    def bv(value: int | None, name: str) -> tuple[z3.BitVecRef, list]:
        if value is None or not 0 <= value <= INT64_MAX:
            # The zero stands in for a number that failed: the caller skips it (the list says why).
            return z3.BitVecVal(0, bits), [f"{name} = {value} does not fit in a signed 64-bit integer"]
        return z3.BitVecVal(value, bits), []

    budget = policy.run_budget()
    checks = []  # (subject, operation text, assumptions, no-overflow predicate)
    start = z3.BitVec("start_ns", bits)
    problems = []
    products_wall, products_out = [], []
    for name, cap in manifest.tools.items():
        lim = policy.effective_limits(name)
        t = z3.BitVec(f"{name}.timeout_ms", bits)
        limit_bv, p1 = bv(lim.timeout_ms, f"{name} timeout_ms")
        out_bv, p2 = bv(lim.output_bytes, f"{name} output_bytes")
        problems += [(name, p) for p in p1 + p2]
        if p1 or p2:
            continue
        admitted = [z3.UGE(t, 1), z3.ULE(t, limit_bv), z3.UGE(start, 0), z3.ULE(start, START_NS_MAX)]
        million = z3.BitVecVal(NS_PER_MS, bits)
        checks.append(
            (
                name,
                "start_ns + timeout_ms * 1e6",
                admitted,
                z3.And(z3.BVMulNoOverflow(t, million, True), z3.BVAddNoOverflow(start, t * million, True)),
            )
        )
        if budget.tools.get(name) is None:
            continue
        n_bv, p3 = bv(cap.rate.per_run, f"{name} per_run")
        problems += [(name, p) for p in p3]
        if p3:
            continue
        checks.append(
            (
                name,
                f"per_run {cap.rate.per_run} * timeout_ms {lim.timeout_ms}",
                [],
                z3.BVMulNoOverflow(n_bv, limit_bv, True),
            )
        )
        checks.append(
            (
                name,
                f"per_run {cap.rate.per_run} * output_bytes {lim.output_bytes}",
                [],
                z3.BVMulNoOverflow(n_bv, out_bv, True),
            )
        )
        products_wall.append(n_bv * limit_bv)
        products_out.append(n_bv * out_bv)
    if budget.wall_ms is not None:
        for label, products in (("wall_ms", products_wall), ("output_bytes", products_out)):
            acc, preds = z3.BitVecVal(0, bits), []
            for p in products:
                preds.append(z3.BVAddNoOverflow(acc, p, True))
                acc = acc + p
            if preds:
                checks.append(("run", f"sum of per-tool {label} budgets", [], z3.And(preds)))
    failed = False
    for name, problem in problems:
        failed = True
        yield Finding(role, prop, name, "failed", problem)
    for subject, op, assumptions, no_overflow in checks:
        result, model = _solve(timeout_ms, *assumptions, _bool(z3.Not(no_overflow)))
        if result == z3.sat:
            assert model is not None  # sat: z3 has one
            failed = True
            tv = _int(model.eval(z3.BitVec(f"{subject}.timeout_ms", bits), model_completion=True))
            detail = f"{op} overflows int64 (max {INT64_MAX})"
            if "start_ns" in op:
                detail += f" (e.g. timeout_ms={tv})"
            yield Finding(role, prop, subject, "failed", detail)
        elif result == z3.unknown:
            failed = True
            yield Finding(role, prop, subject, "unknown", _unknown(timeout_ms))
    if not failed:
        yield Finding(role, prop, _n(len(checks), "operation"), "proved")


def _args(args: dict) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in args.items())


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


# Workspace files every sandbox binds read-only (tools/session.py's default): no command can
# change them, whatever exec's rules say.
SANDBOX_READ_ONLY = ("task.py",)


@dataclass(frozen=True)
class Reach:
    path: str
    tool: str
    how: str


def path_reach(manifest: Manifest, read_only: tuple[str, ...] = SANDBOX_READ_ONLY) -> list[Reach]:
    """For each path a rule denies by name (and each file the sandbox binds read-only), every
    tool of the manifest that takes paths, and what it may do there: so a rule like "task is
    read-only" shows every way to the same effect, not only the tool it was written for."""
    policy = CapabilityPolicy(manifest)
    named: list[str] = list(read_only)
    for cap in manifest.tools.values():
        for rule in cap.rules:
            if rule.effect == "deny" and rule.path:
                named += [p for p in rule.path if not has_wildcard(p) and p not in named]
    out: list[Reach] = []
    for path in named:
        for tool, cap in sorted(manifest.tools.items()):
            if tool == "exec":
                how = (
                    "bound read-only in every sandbox: no command can change it"
                    if path in read_only
                    else "commands may change it (the sandbox writes anywhere in the workspace)"
                )
                out.append(Reach(path, tool, how))
                continue
            if cap.paths is None and not any(r.path for r in cap.rules):
                continue  # a tool that names no paths
            d = policy.decide(tool, {"path": path}, paths=[path])
            how = {"deny": "denied", "approve": "needs approval", "allow": "allowed"}[d.effect]
            out.append(Reach(path, tool, f"{how} ({d.rule})"))
    return out
