"""gitleaks' secret rules, loaded as data and matched with RE2 only.

The rule file (rules/gitleaks.toml) is gitleaks' own config, vendored unchanged, so keeping
up with new token formats is a file swap, not a code change. Every rule regex is compiled with
RE2, which guarantees time linear in the input: tool output is attacker-controlled and one
backtracking rule would let it stall the gateway. A rule RE2 cannot compile is counted and
named in `RuleSet.rejected`, never silently dropped.

Matching follows gitleaks' semantics where they make sense for a stream of text:
- a rule runs only when one of its keywords occurs in the (lower-cased) text, and then finds
  the same leftmost, non-overlapping matches as one pass of its regex over the whole text;
- the secret is the rule's first non-empty capture group (or the whole match);
- a secret below the rule's entropy is dropped, and a generic-* secret needs a digit;
- global and per-rule allowlists (regexes on the secret, match or line; stopwords) apply.
Path conditions cannot apply to tool output, which has no path: rules gated on a path run
everywhere (in doubt, redact) and allowlists that need a path never fire.

Most rules need a literal (`ghp_`, `AKIA`, `-----BEGIN`...): re2util.analyse derives, from the
regex itself, literals one of which every match contains and how far a match reaches around
it. One RE2 pass over the lower-cased text finds where any such literal occurs, and a rule
runs only on the windows around its own literal's hits, which give exactly the matches of a
pass over the whole text (see `RuleSet.scan`). Rules whose matches run on without bound after
the literal (private-key) are searched from each hit to the end; generic-api-key is found
through its core (the regex without its lazy 50-byte prefix); the few rules with no usable
literal run over the whole text. `scan_whole` is the plain definition the tests hold it to.
On texts of re2bulk.MIN_BYTES and more, the literal search, the located rules' searches and
the walks through a core run as the same steps in re2bulk's library (re2native.Located; the
walks ahead, on a second core), which judges each match as `_judge` does: only an entropy
within 1e-9 of its threshold, and allowlists that fire only together, come back here.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources

import re2

from assay.errors import UserError
from assay.policies.redaction import re2bulk, re2native
from assay.policies.redaction.entropy import above, entropy
from assay.policies.redaction.re2util import (
    _UNANCHORED,
    FOLDS_OUTSIDE_ASCII,
    Lines,
    Unsupported,
    analyse,
    core,
    match_spans,
    requirements,
    starts_with_literal,
)

# Literals shorter than this occur often ("s." for vault-service-token) and are followed for
# fewer hits (see RuleSet._locate); a rule located only by such a literal and whose regex
# opens with a literal (twilio's SK...) runs over the whole text, where RE2 skips ahead by memchr.
MIN_LITERAL = 3
# A literal found more than CROWDED times, plus one per CROWDED_BYTES[0] bytes of text
# (CROWDED_BYTES[1] for one shorter than MIN_LITERAL), is left out of the literal search.
CROWDED = 64
CROWDED_BYTES = (256, 1024)
# A rule with this many matches in one text has their entropies taken in one numpy pass
# (its fixed cost, about 15 us, is ten scalar entropies).
BATCH_ENTROPY = 12
# A located rule's window may run this many lines past its literal when its byte extent is
# unbounded; a rule whose matches reach further (generic-api-key: nine) runs over the whole text.
MAX_WINDOW_LINES = 2


def _options(max_mem: int = 64 << 20) -> re2.Options:
    opts = re2.Options()
    opts.max_mem = max_mem
    opts.log_errors = False
    return opts


_DIGITS = b"0123456789"


@dataclass
class Allowlist:
    target: str  # "secret" | "match" | "line"
    regexes: list = field(default_factory=list)
    stopwords: object = None  # one RE2 alternation of the (lower-cased) stopwords, or None
    condition: str = "OR"
    needs_path: bool = False
    patterns: list[str] = field(default_factory=list)  # the regexes' sources, for _Verdicts
    words: list[bytes] = field(default_factory=list)  # the stopwords, lower-cased

    def never(self) -> bool:
        """An AND of a path condition never holds on tool output."""
        return self.needs_path and self.condition == "AND"

    def either(self) -> bool:
        """Fires when any one of its checks does (so its checks can merge with others')."""
        return self.condition != "AND" or not (self.regexes and self.stopwords is not None)

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
    regex: re2._Regexp  # bytes pattern
    keywords: tuple[bytes, ...]
    entropy: float
    allowlists: list[Allowlist]
    # Where matches can be: literals every match contains, with how far a match reaches around
    # each (re2util.Locator); None when the rule runs over the whole text.
    locators: tuple | None = None
    # Its matches may run on without bound after the literal (private-key's body): searched
    # from each hit on (RuleSet._scan_from) instead of in windows.
    open_ended: bool = False
    # Every match holds a keyword (re2util.requirements), so the keyword gate is always open
    # where the rule can match and need not be asked.
    gate_implied: bool = False
    # For a whole-text rule: sets of literals one of each of which every match needs.
    needs: tuple = ()
    # For a whole-text rule whose regex starts with a wide prefix before its first literal:
    # the rest (re2util.core), compiled capture-free, to find where matches can be.
    core: re2._Regexp | None = None
    core_before: int = 0
    core_reach: tuple = (0, None)
    # When the prefix is one lazy class repeat with no group: the core with its groups,
    # and the class's bytes (RuleSet._core_matches).
    groups: re2._Regexp | None = None
    prefix_bytes: bytes = b""


@dataclass
class Finding:
    start: int
    end: int
    kind: str


def _locators(pattern: str, open_ended: bool = False):
    """The rule's locators when they make windows worth having, else None (whole text).
    With `open_ended`, locators whose matches may run on without bound after the literal
    are taken too, when the bound before it holds (see RuleSet._scan_from)."""
    try:
        shape = analyse(pattern)
        cheap_whole = starts_with_literal(pattern)
    except Unsupported:
        return None
    locs = shape.locators
    if not locs:
        return None
    shortest = min(len(loc.literal) for loc in locs)
    if shortest < 2 or (shortest < MIN_LITERAL and cheap_whole):
        return None  # twilio's "sk": RE2 finds its SK prefix faster than the hits could be followed
    for loc in locs:
        if loc.before is None and (loc.lines_before is None or loc.lines_before > MAX_WINDOW_LINES):
            return None
        if not open_ended and loc.after is None and (loc.lines_after is None or loc.lines_after > MAX_WINDOW_LINES):
            return None
    return locs


def _open_ended(locators) -> bool:
    return any(
        loc.after is None and (loc.lines_after is None or loc.lines_after > MAX_WINDOW_LINES) for loc in locators
    )


def _needs(pattern: str) -> tuple:
    """For a whole-text rule RE2 cannot skip through: up to three sets of literals, one of
    each of which every match holds, specific enough to look for (each literal 2+ bytes, at
    most 8 in a set). The literal search watches them; a rule missing one does not run."""
    try:
        if starts_with_literal(pattern):
            return ()
        sets = [req for req in requirements(pattern) if req and len(req) <= 8 and min(map(len, req)) >= 2]
    except Unsupported:
        return ()
    sets.sort(key=lambda req: (-min(map(len, req)), len(req)))
    specific = [req for req in sets if min(map(len, req)) >= 4]
    return tuple(specific[:3] or sets[:1])


def _gate_implied(pattern: str, keywords: tuple[bytes, ...], locators) -> bool:
    """Whether every match holds a keyword, so gitleaks' keyword gate cannot close on a text
    where the rule matches: some set of literals that every match needs all contain one."""
    if not keywords:
        return True
    try:
        sets = requirements(pattern)
    except Unsupported:
        sets = []
    if locators:
        sets.append(frozenset(loc.literal for loc in locators))
    return any(req and all(any(kw in lit for kw in keywords) for lit in req) for req in sets)


def _attach_core(rule: Rule, pattern: str) -> None:
    try:
        found = core(pattern)
    except Unsupported:
        return
    if found is None:
        return
    opts = _options()
    opts.never_capture = True
    try:
        rule.core = re2.compile(found.pattern.encode(), opts)
        if found.lazy_prefix:
            # The rule's matches follow from the core's (see RuleSet._core_matches).
            rule.groups = re2.compile(found.pattern.encode(), _options())
            rule.prefix_bytes = found.prefix_bytes
    except re2.error:
        rule.core = rule.groups = None
        return
    rule.core_before, rule.core_reach = found.before, found.reach


class RuleSet:
    """All rules of one gitleaks config, ready to scan bytes."""

    def __init__(self, rules: list[Rule], global_allow: list[Allowlist], rejected: dict[str, str], total: int):
        self.rules = rules
        self.global_allow = global_allow
        self.rejected = rejected  # rule id -> why it was not loaded
        self.total = total
        self._whole = [i for i, rule in enumerate(rules) if rule.locators is None]
        self._verdicts: dict[str, _Verdicts] = {}  # rule id -> its allowlists, built when first needed
        # The literal search: one alternation over the lower-cased text of every located rule's
        # literals, and of the literals that say whether other rules can run (gate keywords a
        # regex does not imply, literals a whole-text rule needs). Longest first, so at each
        # position RE2 reports the longest literal starting there; every other literal
        # starting there is a prefix of it, so its entries fold into that one's.
        own: dict[bytes, list] = {}
        for i, rule in enumerate(rules):
            for loc in rule.locators or ():
                own.setdefault(loc.literal, []).append(
                    (i, len(loc.literal), loc.before, loc.after, loc.lines_before, loc.lines_after)
                )
        for rule in rules:
            for lit in (rule.keywords if not rule.gate_implied else ()) + tuple(
                lit for req in rule.needs for lit in req
            ):
                own.setdefault(lit, [])
        self._located_by = {lit: {e[0] for e in es} for lit, es in own.items()}
        self._entries = {lit: [e for other, es in own.items() if lit.startswith(other) for e in es] for lit in own}
        self._prefixes = {lit: [other for other in own if lit.startswith(other)] for lit in own}
        self._alternations: dict[frozenset, re2._Regexp | None] = {}  # literals left out -> the alternation of the rest
        self._native: list[re2native.Located | None] = []  # once asked for

    def native(self) -> re2native.Located | None:
        """The rules built into re2bulk's library (None without it, or if the system RE2
        refuses any part): the literal search, the located rules, the rules walked through
        their cores, and each one's judge."""
        if not self._native:
            self._native.append(self._build_native())
        return self._native[0]

    def _build_native(self) -> re2native.Located | None:
        literals = list(self._entries)
        ids = {lit: i for i, lit in enumerate(literals)}
        tables = [
            (self._entries[lit], [ids[p] for p in self._prefixes[lit]], sorted(self._located_by[lit]))
            for lit in literals
        ]
        crowding = (CROWDED, MIN_LITERAL, *CROWDED_BYTES)
        native = re2native.Located.new(literals, tables, len(self.rules), _options().max_mem, crowding)
        if native is None:
            return None
        for i, rule in enumerate(self.rules):
            if rule.locators is not None:
                native.locate(
                    i,
                    rule.regex.pattern,
                    rule.open_ended,
                    [] if rule.gate_implied else [ids[kw] for kw in rule.keywords],
                )
            elif rule.groups is not None:
                native.walker(i, rule.groups.pattern, rule.core_before, rule.prefix_bytes)
            else:
                continue
            subjects, together = _subjects(self.global_allow + rule.allowlists)
            native.judge(i, rule.entropy, rule.id.startswith("generic"), bool(together), subjects)
        return native.ready()

    def _alternation(self, left_out: frozenset) -> re2._Regexp | None:
        found = self._alternations.get(left_out)
        if found is None:
            ordered = sorted((lit for lit in self._entries if lit not in left_out), key=lambda b: (-len(b), b))
            found = re2.compile(b"|".join(re2.escape(lit) for lit in ordered), _options()) if ordered else None
            if len(self._alternations) < 16:
                self._alternations[left_out] = found
        return found

    @property
    def loaded(self) -> int:
        return len(self.rules)

    @property
    def located(self) -> int:
        """How many rules run only around their literals (the rest run over the whole text)."""
        return len(self.rules) - len(self._whole)

    def passes(self, gated: bool | None = None) -> list:
        """The whole-text passes `scan` may make that can run ahead, as (key, re2bulk pass):
        each rule walked through its core (generic-api-key), judged. `scan` drops the pass
        of a rule whose gate is closed, so the worker skips it if it has not started it.
        `gated`: only the walks of rules that need a literal (True) or need none (False)."""
        native = self.native()
        if native is None:
            return []
        return [(walk, walk) for i, walk in native.walks.items() if gated is None or bool(self.rules[i].needs) == gated]

    def scan(self, data: bytes, prefetched: re2bulk.Prefetched | None = None) -> list[Finding]:
        """Every finding of every rule: the same as `scan_whole`, faster. `prefetched`: this
        text's passes from `passes()`, run ahead (re2bulk).

        Why the windows give the same matches: every match [s, e) of a located rule holds one
        of its literals at some p with s and e inside the window the locator puts around p.
        Windows of one rule merge into disjoint regions, and each region is searched with the
        rest of the text as context (so \\b, ^ and $ judge the same bytes). A match found in a
        region is a match in the whole text; no match starts between regions; and every match
        starting where a region's search finds its leftmost one lies inside that region, so
        RE2's choice among them is the same. So the leftmost-first sequence is the same.
        Rules are skipped only when a literal every match needs, or every keyword of their
        gate, is absent.
        """
        lowered = data.lower()
        if not data.isascii() and any(f in data for f in FOLDS_OUTSIDE_ASCII):
            # Lower-casing bytes does not fold these into k and s as RE2's (?i) does, so the
            # literal search could miss a match: every gated rule runs over the whole text.
            findings: list[Finding] = []
            whole = [(0, len(data))]
            for rule in self.rules:
                if not rule.keywords or any(kw in lowered for kw in rule.keywords):
                    self._scan_regions(rule, data, whole, findings)
            return findings
        findings: list[Finding] = []
        native = self.native() if re2bulk.takes(data) else None
        found = native.scan(data, lowered) if native is not None else None
        if native is not None and found is not None:
            ids, crowded, records = found
            present = {native.literals[i] for i in ids}
            crowded = set(crowded)
            self._take(records, data, findings)
            windows = {}
        else:
            windows, present, crowded = self._locate(data, lowered)
        for i in sorted(windows):
            rule = self.rules[i]
            if rule.gate_implied or any(kw in present for kw in rule.keywords):
                if rule.open_ended:
                    self._scan_from(rule, data, sorted(lo for lo, _ in windows[i]), findings)
                else:
                    self._scan_regions(rule, data, _merged(windows[i]), findings)
        whole = [(0, len(data))]
        for i in sorted(set(self._whole) | crowded):
            rule = self.rules[i]
            walk = native.walks.get(i) if native is not None else None
            if (not rule.gate_implied and not any(kw in present for kw in rule.keywords)) or not all(
                any(lit in present for lit in req) for req in rule.needs
            ):
                if walk is not None and prefetched is not None:
                    prefetched.drop(walk)
                continue
            if walk is not None:
                # Run ahead on the worker when it was started; else here, natively.
                flat = prefetched.spans(walk) if prefetched is not None else None
                assert native is not None  # walks are queued only where the library runs
                self._take(flat if flat is not None else native.walk(data, i), data, findings)
                continue
            if rule.groups is not None:
                self._judge(rule, data, self._walk(rule, data), findings)
                continue
            regions = self._core_regions(rule, data) if rule.core is not None else whole
            if regions:
                self._scan_regions(rule, data, regions, findings)
        return findings

    def scan_whole(self, data: bytes, lowered: bytes | None = None) -> list[Finding]:
        """The definition, written plainly: each rule whose keyword occurs, over the whole
        text, its groups from RE2 and each allowlist asked on its own. For the tests: slow,
        and quadratic on a long line with many findings (the line is searched per finding)."""
        if lowered is None:
            lowered = data.lower()
        findings: list[Finding] = []
        for rule in self.rules:
            if rule.keywords and not any(kw in lowered for kw in rule.keywords):
                continue
            for spans in match_spans(rule.regex, data):
                s, e = _secret_span(spans)
                if e <= s:
                    continue
                secret = data[s:e]
                if rule.entropy and entropy(secret) <= rule.entropy:
                    continue
                if rule.entropy and rule.id.startswith("generic") and not any(48 <= b <= 57 for b in secret):
                    continue
                ms, me = spans[0]
                nl = data.find(b"\n", e)
                line = data[data.rfind(b"\n", 0, s) + 1 : len(data) if nl < 0 else nl]
                if any(allow.allows(secret, data[ms:me], line) for allow in self.global_allow + rule.allowlists):
                    continue
                findings.append(Finding(s, e, rule.id))
        return findings

    def _locate(self, data: bytes, lowered: bytes):
        """One pass of the literal search: the windows around each located rule's hits, the
        watched literals present, and the located rules that run over the whole text instead.

        A literal found more than CROWDED times (plus one per 256 bytes; per 1 KiB for short
        ones) is left out of the rest of the search, and the rules it locates run over the
        whole text: a text made of one literal ("aaaa..." holds dropbox's "aaaaaaaaaa" at every
        byte) costs one pass per such rule, not a Python step per byte.
        """
        windows: dict[int, list[tuple[int, int]]] = {}
        present: set[bytes] = set()
        crowded: set[int] = set()
        left_out: frozenset = frozenset()
        regex = self._alternation(left_out)
        if regex is None:
            return windows, present, crowded
        search = regex._regexp.Match
        entries_of, prefixes_of = self._entries, self._prefixes
        lines = Lines.of(data)
        n = len(lowered)
        seen: dict[bytes, int] = {}
        pos = 0
        while True:
            s, e = search(_UNANCHORED, lowered, pos, n)[0]
            if s < 0:
                break
            pos = s + 1  # literals may overlap: the next one can start inside this one
            lit = lowered[s:e]
            present.update(prefixes_of[lit])
            count = seen[lit] = seen.get(lit, 0) + 1
            if count > CROWDED + n // (CROWDED_BYTES[0] if e - s >= MIN_LITERAL else CROWDED_BYTES[1]):
                left_out |= {lit}
                for i in self._located_by[lit]:
                    crowded.add(i)
                    windows.pop(i, None)
                regex = self._alternation(left_out)
                if regex is None:
                    break
                search = regex._regexp.Match
                pos = s  # the literals it starts with are still hits at s
                continue
            for i, size, before, after, lines_before, lines_after in entries_of[lit]:
                if i in crowded:
                    continue
                lo = s - before if before is not None else lines.start(s, lines_before)
                hi = s + size + after if after is not None else lines.end(s, lines_after)
                windows.setdefault(i, []).append((max(lo, 0), min(hi, n)))
        return windows, present, crowded

    def _core_regions(self, rule: Rule, data: bytes) -> list[tuple[int, int]]:
        """The regions a whole-text rule with a core can match in: around each match of the
        core (a DFA-only pass). A rule match holds a core match starting at some c at most
        `before` bytes after its own start, and ends by the core's reach from c. That c is
        the start of a match the pass reports, or lies inside one (the pass does not report
        overlapping matches), so it is at most that match's end: the window from the start
        minus `before` to the reach from the end holds the rule match."""
        assert rule.core is not None  # only rules with a core come here
        search = rule.core._regexp.Match
        before, (fixed, hop) = rule.core_before, rule.core_reach
        lines = Lines.of(data)
        n = len(data)
        windows = []
        pos = 0
        while pos <= n:
            c, e = search(_UNANCHORED, data, pos, n)[0]
            if c < 0:
                break
            pos = e if e > c else e + 1
            hi = e + fixed if fixed is not None else e
            if hop is not None:
                hi = max(hi, lines.end(min(e + hop[0], n), 0) + hop[1])
            windows.append((max(c - before, 0), min(hi, n)))
        return _merged(windows) if windows else []

    def _scan_from(self, rule: Rule, data: bytes, starts: list[int], findings: list[Finding]) -> None:
        """An open-ended rule: no match starts before the first window start at or after the
        current position (each match holds a literal at most `before` after its start), so
        each search begins there and runs to the end of the text. A search that finds
        nothing means nothing matches further on; each found match moves the position past
        it, so the searches cover the text once."""
        search = rule.regex._regexp.Match
        n = len(data)
        pos, last = 0, -1
        matches = []
        for lo in starts:
            at = max(pos, lo)
            if at == last:
                continue
            last = at
            spans = search(_UNANCHORED, data, at, n)
            ms, me = spans[0]
            if ms < 0:
                break
            matches.append(_quad(spans))
            pos = me if me > ms else me + 1
        self._judge(rule, data, matches, findings)

    def _scan_regions(self, rule: Rule, data: bytes, regions, findings: list[Finding]) -> None:
        search = rule.regex._regexp.Match
        matches = []
        for lo, hi in regions:
            pos = lo
            while pos <= hi:
                spans = search(_UNANCHORED, data, pos, hi)
                ms, me = spans[0]
                if ms < 0:
                    break
                pos = me if me > ms else me + 1
                matches.append(_quad(spans))
        self._judge(rule, data, matches, findings)

    def _walk(self, rule: Rule, data: bytes) -> list[tuple[int, int, int, int]]:
        """The matches of a rule that is a lazy class repeat (at most `before` bytes) then its
        core, without running the rule. From a position, the rule's leftmost match takes the
        leftmost place c where the core matches: no place before c can start one (its prefix
        would have to reach a core match, and there is none before c), and the earliest
        start that reaches c is the furthest back, at most `before` bytes and not past the
        position, that the bytes before c stay in the class. The lazy prefix stops at the
        first core match, so the rest of the match is the core's own match at c, groups and
        all, and the next search starts where it ends, as the core's own next search does."""
        assert rule.groups is not None  # only walked rules come here
        search = rule.groups._regexp.Match
        before, chars = rule.core_before, rule.prefix_bytes
        n = len(data)
        matches = []
        pos = 0
        while pos <= n:
            spans = search(_UNANCHORED, data, pos, n)
            c, e = spans[0]
            if c < 0:
                break
            lo = max(pos, c - before)
            start = lo + len(data[lo:c].rstrip(chars))
            matches.append(_quad([(start, e)] + spans[1:]))
            pos = e if e > start else e + 1
        return matches

    def _take(self, records: list[int], data: bytes, findings: list[Finding]) -> None:
        """re2bulk's judged records (six ints each: rule, decided, match and secret spans):
        its findings, and the matches it left undecided judged here."""
        rules = self.rules
        undecided: dict[int, list] = {}
        for k in range(0, len(records), 6):
            i = records[k]
            if records[k + 1]:
                findings.append(Finding(records[k + 4], records[k + 5], rules[i].id))
            else:
                undecided.setdefault(i, []).append((records[k + 2], records[k + 3], records[k + 4], records[k + 5]))
        for i, quads in undecided.items():
            self._judge(rules[i], data, quads, findings)

    def _judge(self, rule: Rule, data: bytes, matches: list, findings: list[Finding]) -> None:
        """gitleaks' checks on each match, given as (match start, match end, secret start,
        secret end) with the secret chosen by `_secret_span`, in order: entropy, allowlists."""
        lines = None
        verdicts = self._verdicts.get(rule.id)
        high = None
        if rule.entropy and len(matches) >= BATCH_ENTROPY:
            # generic-api-key has hundreds of matches on a dense text: one numpy pass.
            high = iter(above([data[s:e] for _, _, s, e in matches if e > s], rule.entropy))
        for ms, me, s, e in matches:
            if e <= s:
                continue
            secret = data[s:e]
            if rule.entropy:
                if not (next(high) if high is not None else entropy(secret) > rule.entropy):
                    continue
                # gitleaks: generic rules need a digit, a stand-in for a lookahead Go's RE2 lacks.
                if rule.id.startswith("generic") and len(secret.translate(None, _DIGITS)) == len(secret):
                    continue
            if verdicts is None:
                verdicts = self._verdicts[rule.id] = _Verdicts(self.global_allow + rule.allowlists)
            if not verdicts.empty:
                if lines is None:
                    lines = Lines.of(data)
                if verdicts.allows(secret, data[ms:me], data, lines, s, e):
                    continue
            findings.append(Finding(s, e, rule.id))


class _Verdicts:
    """Every allowlist that applies to one rule (gitleaks' global ones and its own), as at most
    four RE2 Sets: one per subject (secret, match, line) for the regexes and one for the
    stopwords. A finding is dropped when any allowlist allows it; allowlists whose checks fire
    only together (an AND of a regex and stopwords) are asked one by one."""

    __slots__ = ("secret", "match", "line", "stop", "together", "empty", "_line_seen")

    def __init__(self, allowlists: list[Allowlist]):
        subjects, self.together = _subjects(allowlists)
        self.secret, self.match, self.line, self.stop = (_set(subjects[k]) for k in ("secret", "match", "line", "stop"))
        self.empty = not self.together and all(x is None for x in (self.secret, self.match, self.line, self.stop))
        # The line verdict last asked for: findings on one line share it, so a long line with
        # many findings is searched once, not once per finding.
        self._line_seen: tuple = (None, None, False)

    def allows(self, secret: bytes, match: bytes, data: bytes, lines: Lines, s: int, e: int) -> bool:
        if self.secret is not None and self.secret.Match(secret):
            return True
        if self.stop is not None and self.stop.Match(secret.lower()):
            return True
        if self.match is not None and self.match.Match(match):
            return True
        if self.line is None and not self.together:
            return False
        span = (lines.start(s, 0), lines.end(e, 0))
        if self.line is not None:
            seen_data, seen_span, verdict = self._line_seen
            if seen_data is not data or seen_span != span:
                verdict = bool(self.line.Match(data[span[0] : span[1]]))
                self._line_seen = (data, span, verdict)
            if verdict:
                return True
        if not self.together:
            return False
        line = data[span[0] : span[1]]
        return any(a.allows(secret, match, line) for a in self.together)


def _subjects(allowlists: list[Allowlist]) -> tuple[dict[str, list[bytes]], list[Allowlist]]:
    """The patterns of the allowlists that fire on any one check, merged by what they are
    asked about (secret, stopwords on the lower-cased secret, match, line), and the
    allowlists whose checks fire only together. Those never firing on tool output are gone."""
    live = [a for a in allowlists if not a.never()]
    merged = [a for a in live if a.either()]
    subjects = {
        k: [p.encode() for a in merged if a.target == k for p in a.patterns] for k in ("secret", "match", "line")
    }
    subjects["stop"] = [re2.escape(w) for a in merged for w in a.words]
    return subjects, [a for a in live if not a.either()]


def _set(patterns: list):
    """One RE2 Set of `patterns` (None if empty). A Set answers from its DFA alone, with no
    capture groups to fill; if that DFA ran out of memory the Set reports no match, so the
    finding is kept: in doubt, redact. Returned is the compiled set itself, whose Match gives
    the (possibly empty) list of patterns that match: the Python wrapper's Match costs as
    much again per call, and this is asked several times per finding."""
    if not patterns:
        return None
    found = re2.Set.SearchSet(_options())
    for p in patterns:
        found.Add(p if isinstance(p, bytes) else p.encode())
    found.Compile()
    return found._set


def _merged(windows: list[tuple[int, int]]) -> list[tuple[int, int]]:
    windows.sort()
    out = [windows[0]]
    for lo, hi in windows[1:]:
        last = out[-1]
        if lo <= last[1]:
            if hi > last[1]:
                out[-1] = (last[0], hi)
        else:
            out.append((lo, hi))
    return out


def _secret_span(spans) -> tuple[int, int]:
    """gitleaks' choice: the first capture group that matched something, else the whole match."""
    for s, e in spans[1:]:
        if s != -1 and e > s:
            return s, e
    return spans[0]


def _quad(spans) -> tuple[int, int, int, int]:
    """A match's spans as `_judge` takes them: the whole match's, then the secret's."""
    s, e = _secret_span(spans)
    return spans[0][0], spans[0][1], s, e


def _found(regex, data: bytes) -> bool:
    return regex._regexp.Match(_UNANCHORED, data, 0, len(data))[0][0] != -1


def _alternation(words: list[bytes]) -> re2._Regexp | None:
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
    words = [w.lower().encode() for w in spec.get("stopwords", [])]
    return Allowlist(
        target=spec.get("regexTarget", "secret"),
        regexes=regexes,
        stopwords=_alternation(words),
        condition=spec.get("condition", "OR").upper(),
        needs_path=bool(spec.get("paths")),
        patterns=accepted,
        words=words,
    )


def load_rules(text: str | None = None) -> RuleSet:
    """Parse a gitleaks config (the vendored one by default) into a RuleSet."""
    if text is None:
        text = resources.files("assay.policies.redaction").joinpath("rules/gitleaks.toml").read_text("utf-8")
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(
            f"the secret rule file is not valid TOML: {exc}", "restore policies/redaction/rules/gitleaks.toml"
        ) from None
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
        rule = rules[-1]
        rule.locators = _locators(spec["regex"])
        if rule.locators is None:
            _attach_core(rule, spec["regex"])
        if rule.locators is None and rule.core is None:
            rule.locators = _locators(spec["regex"], open_ended=True)
            rule.open_ended = rule.locators is not None
        if rule.locators is None:
            # Also for a rule found through its core: yandex's walk need not run without "yandex".
            rule.needs = _needs(spec["regex"])
        rule.gate_implied = _gate_implied(spec["regex"], rule.keywords, rule.locators)
    notes = []
    global_allow = []
    for g in [config.get("allowlist")] + list(config.get("allowlists", [])):
        if g:
            global_allow.append(_allowlist(g, notes))
    if notes:
        rejected["(global allowlist)"] = "; ".join(notes)
    return RuleSet(rules, global_allow, rejected, total=len(specs))
