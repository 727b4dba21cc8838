"""gitleaks' secret rules, loaded as data and matched with RE2 only.

The rule file (rules/gitleaks.toml) is gitleaks' own config, vendored unchanged, so keeping
up with new token formats is a file swap, not a code change. Every rule regex is compiled with
RE2, which guarantees time linear in the input: tool output is attacker-controlled and one
backtracking rule would let it stall the gateway. A rule RE2 cannot compile is counted and
named in `RuleSet.rejected`, never silently dropped.

Matching follows gitleaks' semantics where they make sense for a stream of text:
- a rule runs only where one of its keywords occurs (gitleaks' prefilter); here an RE2 Set of
  all rules is the first filter (one DFA pass tells which rules can match a block at all),
  and the keywords then gate the rules the Set named;
- the secret is the rule's first non-empty capture group (or the whole match);
- a secret below the rule's entropy is dropped, and a generic-* secret needs a digit;
- global and per-rule allowlists (regexes on the secret, match or line; stopwords) apply.
Path conditions cannot apply to tool output, which has no path: rules gated on a path run
everywhere (in doubt, redact) and allowlists that need a path never fire.
"""

from __future__ import annotations

import math
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources

import re2

from assay.errors import UserError

# Blocks bound the work done per Set hit; the overlap lets a multi-line secret (a PEM key is
# a few KB) that starts near a block's end still be matched whole.
BLOCK = 32 * 1024
OVERLAP = 8 * 1024

# The DFA of a Set of ~200 rules needs room: with RE2's default 8 MiB it would thrash its
# state cache on hostile input (still linear, but slow).
_SET_MAX_MEM = 256 << 20


def _options(max_mem: int = 64 << 20) -> re2.Options:
    opts = re2.Options()
    opts.max_mem = max_mem
    opts.log_errors = False
    return opts


def shannon_entropy(data: bytes) -> float:
    n = len(data)
    if not n:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(data).values())


@dataclass
class Allowlist:
    target: str  # "secret" | "match" | "line"
    regexes: list = field(default_factory=list)
    stopwords: tuple[bytes, ...] = ()
    condition: str = "OR"
    needs_path: bool = False

    def allows(self, secret: bytes, match: bytes, line: bytes) -> bool:
        """True when this allowlist says the finding is not a secret."""
        subject = {"secret": secret, "match": match, "line": line}[self.target]
        checks = []
        if self.needs_path:
            checks.append(False)  # tool output has no path, so a path condition never holds
        if self.regexes:
            checks.append(any(r.search(subject) for r in self.regexes))
        if self.stopwords:
            low = secret.lower()
            checks.append(any(w in low for w in self.stopwords))
        if not checks:
            return False
        return all(checks) if self.condition == "AND" else any(checks)


@dataclass
class Rule:
    id: str
    regex: object  # re2._Regexp (bytes pattern)
    keywords: tuple[bytes, ...]
    entropy: float
    allowlists: list[Allowlist]


@dataclass
class Finding:
    start: int
    end: int
    kind: str


class RuleSet:
    """All rules of one gitleaks config, ready to scan bytes."""

    def __init__(self, rules: list[Rule], global_allow: list[Allowlist], rejected: dict[str, str], total: int):
        self.rules = rules
        self.global_allow = global_allow
        self.rejected = rejected  # rule id -> why it was not loaded
        self.total = total
        self._set = re2.Set.SearchSet(_options(_SET_MAX_MEM))
        for rule in rules:
            self._set.Add(rule.regex.pattern)
        # An empty pattern matches every text, so a Set answer without it means RE2's DFA
        # gave up (out of memory): then every rule runs, rather than trusting a silent "none".
        self._sentinel = self._set.Add(b"")
        self._set.Compile()

    @property
    def loaded(self) -> int:
        return len(self.rules)

    def scan(self, data: bytes) -> list[Finding]:
        findings: list[Finding] = []
        n = len(data)
        start = 0
        while start < n:
            end = _block_end(data, start + BLOCK)
            window_end = _block_end(data, end + OVERLAP)
            window = data[start:window_end]
            hits = self._set.Match(window)
            if hits is None or self._sentinel not in hits:
                candidates = range(len(self.rules))
            else:
                candidates = [i for i in hits if i != self._sentinel]
            if candidates:
                self._scan_window(window, start, end - start, candidates, findings)
            start = end
        return findings

    def _scan_window(self, window: bytes, offset: int, own: int, candidates, findings: list[Finding]) -> None:
        lowered = window.lower()
        for i in candidates:
            rule = self.rules[i]
            if rule.keywords and not any(k in lowered for k in rule.keywords):
                continue
            for m in rule.regex.finditer(window):
                if m.start() >= own:
                    break  # the next block owns matches that start here
                s, e = _secret_span(m)
                secret = window[s:e]
                if not secret or not self._keep(rule, secret, m.group(), window, s, e):
                    continue
                findings.append(Finding(offset + s, offset + e, rule.id))

    def _keep(self, rule: Rule, secret: bytes, match: bytes, window: bytes, s: int, e: int) -> bool:
        if rule.entropy:
            if shannon_entropy(secret) <= rule.entropy:
                return False
            # gitleaks: generic rules need a digit, a stand-in for a lookahead Go's RE2 lacks.
            if rule.id.startswith("generic") and not any(48 <= b <= 57 for b in secret):
                return False
        if not rule.allowlists and not self.global_allow:
            return True
        line = window[window.rfind(b"\n", 0, s) + 1 : _line_end(window, e)]
        for allow in self.global_allow:
            if allow.allows(secret, match, line):
                return False
        return not any(allow.allows(secret, match, line) for allow in rule.allowlists)


def _secret_span(m) -> tuple[int, int]:
    """gitleaks' choice: the first capture group that matched something, else the whole match."""
    for g in range(1, m.re.groups + 1):
        s, e = m.span(g)
        if s != -1 and e > s:
            return s, e
    return m.span()


def _block_end(data: bytes, at: int) -> int:
    if at >= len(data):
        return len(data)
    nl = data.find(b"\n", at)
    return len(data) if nl == -1 else nl + 1


def _line_end(data: bytes, at: int) -> int:
    nl = data.find(b"\n", at)
    return len(data) if nl == -1 else nl


def _compile(pattern: str):
    return re2.compile(pattern.encode(), _options())


def _allowlist(spec: dict, rejected: list[str]) -> Allowlist:
    regexes = []
    for pat in spec.get("regexes", []):
        try:
            regexes.append(_compile(pat))
        except re2.error as exc:  # an allowlist entry RE2 refuses is reported like a rule
            rejected.append(f"allowlist regex {pat!r}: {exc}")
    return Allowlist(
        target=spec.get("regexTarget", "secret"),
        regexes=regexes,
        stopwords=tuple(w.lower().encode() for w in spec.get("stopwords", [])),
        condition=spec.get("condition", "OR").upper(),
        needs_path=bool(spec.get("paths")),
    )


def load_rules(text: str | None = None) -> RuleSet:
    """Parse a gitleaks config (the vendored one by default) into a RuleSet."""
    if text is None:
        text = resources.files("assay.policies").joinpath("rules/gitleaks.toml").read_text("utf-8")
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"the secret rule file is not valid TOML: {exc}", "restore policies/rules/gitleaks.toml") from None
    rejected: dict[str, str] = {}
    rules: list[Rule] = []
    specs = config.get("rules", [])
    for spec in specs:
        rid = spec.get("id", "?")
        if "regex" not in spec:
            rejected[rid] = "no regex (a path-only rule; tool output has no path)"
            continue
        try:
            regex = _compile(spec["regex"])
        except re2.error as exc:
            rejected[rid] = f"RE2 cannot compile it: {exc}"
            continue
        notes: list[str] = []
        allow = [_allowlist(a, notes) for a in spec.get("allowlists", [])]
        if spec.get("allowlist"):  # the older single-table spelling
            allow.append(_allowlist(spec["allowlist"], notes))
        if notes:
            rejected[rid + " (allowlist)"] = "; ".join(notes)
        rules.append(
            Rule(
                id=rid,
                regex=regex,
                keywords=tuple(k.lower().encode() for k in spec.get("keywords", [])),
                entropy=float(spec.get("entropy", 0.0)),
                allowlists=allow,
            )
        )
    notes = []
    global_allow = []
    for g in [config.get("allowlist")] + list(config.get("allowlists", [])):
        if g:
            global_allow.append(_allowlist(g, notes))
    if notes:
        rejected["(global allowlist)"] = "; ".join(notes)
    return RuleSet(rules, global_allow, rejected, total=len(specs))
