"""The redaction engine: the one seam between the Redactor (placeholders, the vault, merging,
the rescan) and the detectors that find what to redact.

An Engine returns raw findings, (start, end, priority, category, kind) byte spans that may
overlap; the Redactor merges them (the lowest priority names a merged span). Re2Engine is the
one assay ships: every detector on RE2 (linear time on attacker-controlled text), with its
whole-text passes in re2bulk's library on long texts where it loads.
"""

from __future__ import annotations

from typing import Protocol

from assay.policies.redaction import entropy as _entropy
from assay.policies.redaction import pii as _pii
from assay.policies.redaction import re2bulk
from assay.policies.redaction.known_secrets import KnownSecrets
from assay.policies.redaction.secret_rules import RuleSet

# Which detector names a merged span when findings overlap: the most specific first.
PRIORITY = {"known": 0, "rule": 1, "entropy": 2, "pii": 3}

RawFinding = tuple[int, int, int, str, str]  # start, end, priority, category, kind


class Engine(Protocol):
    @property
    def rules(self) -> RuleSet: ...

    def findings(self, scan: bytes, known: KnownSecrets) -> list[RawFinding]:
        """Every finding in `scan` (placeholders already masked), in any order."""
        ...


def _union(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The spans merged as the Redactor merges findings (overlapping, not touching), in order:
    what a lower-ranked finding wholly inside one of them could not change."""
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if out and s < out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


class Re2Engine:
    """Known values, gitleaks' rules, personal data and high-entropy tokens, all on RE2."""

    __slots__ = ("_rules", "_pii", "_entropy")

    def __init__(self, rules: RuleSet, *, pii: bool = True, high_entropy: bool = True):
        self._rules = rules
        self._pii = pii
        self._entropy = high_entropy

    @property
    def rules(self) -> RuleSet:
        return self._rules

    def findings(self, scan: bytes, known: KnownSecrets) -> list[RawFinding]:
        ahead = self._ahead(scan, known)
        raw: list[RawFinding] = []
        if self._pii:
            # First, on this thread, while the worker runs the walks and the known values' pass.
            for f in _pii.find_pii(scan):
                raw.append((f.start, f.end, PRIORITY["pii"], "PII", f.kind))
        for f in self._rules.scan(scan, ahead):
            raw.append((f.start, f.end, PRIORITY["rule"], "SECRET", f.kind))
        for f in known.find(scan, ahead):
            raw.append((f.start, f.end, PRIORITY["known"], "SECRET", f.kind))
        if self._entropy:
            # A token inside a span a higher-ranked detector (rules, known values) found
            # merges into it and takes its name, so the entropy detector need not judge it.
            listed = ahead.spans(_entropy.native()) if ahead is not None else None
            covered = _union([(s, e) for s, e, prio, *_ in raw if prio < PRIORITY["entropy"]])
            for f in _entropy.find_high_entropy(scan, covered, listed):
                raw.append((f.start, f.end, PRIORITY["entropy"], "SECRET", f.kind))
        return raw

    def _ahead(self, scan: bytes, known: KnownSecrets) -> re2bulk.Prefetched | None:
        """The detectors' whole-text passes, queued on a second core while PII and the rules'
        literal search run on this one (re2bulk): generic-api-key's walk first, since the
        rules reach it soonest, then the known values' and the entropy candidates'. A pass
        the worker has not started when this thread needs it is run here instead."""
        if not re2bulk.takes(scan):
            return None
        passes = self._rules.passes(gated=False) + known.passes()
        if self._entropy:
            passes.append((_entropy.native(), _entropy.native()))  # a None pass is left out
        # Walks of rules that need a literal last: by the time the worker reaches them, the
        # rules' scan has dropped those it will not ask for.
        passes += self._rules.passes(gated=True)
        return re2bulk.prefetch(scan, passes)
