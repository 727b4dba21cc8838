"""gitleaks' secret rules, loaded as data and matched with RE2 only.

The rule file (rules/gitleaks.toml) is gitleaks' own config, vendored unchanged, so keeping
up with new token formats is a file swap, not a code change. Every rule regex is compiled with
RE2, which guarantees time linear in the input: tool output is attacker-controlled and one
backtracking rule would let it stall the gateway. A rule RE2 cannot compile is counted and
named in `RuleSet.rejected`, never silently dropped.

Matching follows gitleaks' semantics where they make sense for a stream of text:
- a rule runs only on a block (32 KiB) where one of its keywords occurs, found by one RE2
  Set of all keywords over the lower-cased block (gitleaks' prefilter, as a single pass);
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
from assay.policies.re2util import _UNANCHORED, match_spans

# Rules run per block, and only on blocks holding one of their keywords: small blocks keep a
# rule that matched once from rescanning a whole text. Blocks end at line ends; a rule whose
# match can reach across lines sees a little of the next block too (matches starting there
# belong to the next block). Rules that can span many lines (PEM keys, curl commands, k8s
# YAML) run on large blocks with a large overlap instead.
BLOCK = 4 * 1024
OVERLAP = 256
LONG_BLOCK = 64 * 1024
LONG_OVERLAP = 16 * 1024
_MULTILINE = (b"(?s", b"\\s\\S", b"\\r\\n", b"[\\r\\n]")

def _options(max_mem: int = 64 << 20) -> re2.Options:
    opts = re2.Options()
    opts.max_mem = max_mem
    opts.log_errors = False
    return opts


def shannon_entropy(data: bytes) -> float:
    from assay.policies.entropy import entropy

    return entropy(data)


@dataclass
class Allowlist:
    target: str  # "secret" | "match" | "line"
    regexes: list = field(default_factory=list)
    stopwords: object = None  # one RE2 alternation of the (lower-cased) stopwords, or None
    condition: str = "OR"
    needs_path: bool = False

    def allows(self, secret: bytes, match: bytes, line: bytes) -> bool:
        """True when this allowlist says the finding is not a secret."""
        subject = {"secret": secret, "match": match, "line": line}[self.target]
        checks = []
        if self.needs_path:
            if self.condition == "AND":
                return False  # tool output has no path, so a path condition never holds
            checks.append(False)
        if self.regexes:
            checks.append(_found(self.regexes[0], subject))
        if self.stopwords is not None:
            checks.append(_found(self.stopwords, secret.lower()))
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
    long_range: bool = False  # can match across many lines


@dataclass
class Finding:
    start: int
    end: int
    kind: str


# Narrower stand-ins for keywords that occur in almost any text. Each is a literal every match
# of the rule must contain (lower-cased), and each contains the keyword it stands in for, so
# the rule's results are unchanged; only windows that cannot match are skipped.
_NARROWED_KEYWORDS = {
    # regex: \b(ey[a-zA-Z0-9]{17,}\.ey...): a JWT always has ".ey" where its payload starts
    "jwt": (b".ey",),
    # no keywords upstream; the regex needs one of these words (case-insensitive)
    "database-password": (b"pwd", b"db_passw", b"database_passw"),
}


class RuleSet:
    """All rules of one gitleaks config, ready to scan bytes."""

    def __init__(self, rules: list[Rule], global_allow: list[Allowlist], rejected: dict[str, str], total: int):
        self.rules = rules
        self.global_allow = global_allow
        self.rejected = rejected  # rule id -> why it was not loaded
        self.total = total
        # The prefilter: one RE2 Set of every keyword (literal, matched on lower-cased text) says
        # which keywords a window holds; only rules with a keyword there run. A Set of the rule
        # regexes themselves would be one pass too, but its DFA thrashes on the union of ~200
        # rules with counted repeats, so keywords (as gitleaks does) are the fast filter.
        keywords: dict[bytes, int] = {}
        self._by_keyword: list[list[int]] = []
        self._always: list[int] = []
        self._keyword_set = re2.Set.SearchSet(_options())
        self._long = [i for i, rule in enumerate(rules) if rule.long_range]
        for i, rule in enumerate(rules):
            if rule.long_range:
                continue
            kws = _NARROWED_KEYWORDS.get(rule.id, rule.keywords)
            if not kws:
                self._always.append(i)
            for kw in kws:
                if kw not in keywords:
                    keywords[kw] = self._keyword_set.Add(re2.escape(kw))
                    self._by_keyword.append([])
                self._by_keyword[keywords[kw]].append(i)
        # An empty pattern matches every text, so an answer without it means RE2's DFA gave up
        # (out of memory): then every rule runs, rather than trusting a silent "none".
        self._sentinel = self._keyword_set.Add(b"")
        self._keyword_set.Compile()

    @property
    def loaded(self) -> int:
        return len(self.rules)

    def candidates(self, lowered: bytes) -> list[int]:
        """Indexes of the (short-range) rules whose keywords occur in `lowered`."""
        hits = self._keyword_set.Match(lowered)
        if hits is None or self._sentinel not in hits:
            return [i for i in range(len(self.rules)) if i not in self._long]
        if len(hits) == 1:
            return self._always
        chosen = set(self._always)
        for h in hits:
            if h != self._sentinel:
                chosen.update(self._by_keyword[h])
        return sorted(chosen)

    def scan(self, data: bytes) -> list[Finding]:
        findings: list[Finding] = []
        lowered_all = data.lower()
        self._scan_blocks(data, lowered_all, BLOCK, OVERLAP, self.candidates, findings)
        if self._long:
            long_rules = [(i, _NARROWED_KEYWORDS.get(self.rules[i].id, self.rules[i].keywords)) for i in self._long]

            def long_candidates(lowered: bytes) -> list[int]:
                return [i for i, kws in long_rules if not kws or any(k in lowered for k in kws)]

            self._scan_blocks(data, lowered_all, LONG_BLOCK, LONG_OVERLAP, long_candidates, findings)
        return findings

    def _scan_blocks(self, data: bytes, lowered_all: bytes, block: int, overlap: int, candidates, findings: list[Finding]) -> None:
        n = len(data)
        blocks = []
        start = 0
        while start < n:
            end = _block_end(data, start + block)
            window_end = _block_end(data, end + overlap) if end < n else n
            blocks.append((start, end, window_end, candidates(lowered_all[start:window_end])))
            start = end
        # A rule wanted by most blocks (generic-api-key's keywords are everywhere) runs once over
        # the whole text: one call instead of hundreds, and the same matches.
        wanted: dict[int, int] = {}
        for *_, rule_ids in blocks:
            for i in rule_ids:
                wanted[i] = wanted.get(i, 0) + 1
        everywhere = {i for i, count in wanted.items() if len(blocks) > 2 and count * 2 >= len(blocks)}
        for i in sorted(everywhere):
            self._scan_rule(self.rules[i], data, 0, n, findings)
        for start, end, window_end, rule_ids in blocks:
            rule_ids = [i for i in rule_ids if i not in everywhere]
            if rule_ids:
                window = data[start:window_end]
                for i in rule_ids:
                    self._scan_rule(self.rules[i], window, start, end - start, findings)

    def _scan_rule(self, rule: Rule, window: bytes, offset: int, own: int, findings: list[Finding]) -> None:
        for spans in match_spans(rule.regex, window):
            ms, me = spans[0]
            if ms >= own:
                break  # the next block owns matches that start here
            s, e = _secret_span(spans)
            secret = window[s:e]
            if secret and self._keep(rule, secret, window[ms:me], window, s, e):
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


def _secret_span(spans) -> tuple[int, int]:
    """gitleaks' choice: the first capture group that matched something, else the whole match."""
    for s, e in spans[1:]:
        if s != -1 and e > s:
            return s, e
    return spans[0]


def _block_end(data: bytes, at: int) -> int:
    if at >= len(data):
        return len(data)
    nl = data.find(b"\n", at)
    return len(data) if nl == -1 else nl + 1


def _line_end(data: bytes, at: int) -> int:
    nl = data.find(b"\n", at)
    return len(data) if nl == -1 else nl


def _found(regex, data: bytes) -> bool:
    return regex._regexp.Match(_UNANCHORED, data, 0, len(data))[0][0] != -1


def _alternation(words: list[bytes]):
    """One RE2 pass over a secret instead of a Python loop over ~1,400 stopwords."""
    if not words:
        return None
    return re2.compile(b"|".join(re2.escape(w) for w in words), _options())


def _compile(pattern: str):
    return re2.compile(pattern.encode(), _options())


def _allowlist(spec: dict, rejected: list[str]) -> Allowlist:
    accepted = []
    for pat in spec.get("regexes", []):
        try:
            _compile(pat)
            accepted.append(pat)
        except re2.error as exc:  # an allowlist entry RE2 refuses is reported like a rule
            rejected.append(f"allowlist regex {pat!r}: {exc}")
    # "Any of these matches" is one RE2 pass over their alternation; each stays in its own
    # group so its flags, like (?i), keep their scope.
    regexes = [_compile("|".join(f"(?:{p})" for p in accepted))] if accepted else []
    return Allowlist(
        target=spec.get("regexTarget", "secret"),
        regexes=regexes,
        stopwords=_alternation([w.lower().encode() for w in spec.get("stopwords", [])]),
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
                long_range=any(marker in spec["regex"].encode() for marker in _MULTILINE),
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
