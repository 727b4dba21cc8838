"""The redaction detectors' own work on long texts, built into re2bulk's library.

Each class wraps one part of re2rules.cpp or re2detectors.cpp, which do what a detector's
Python does, step for step, in one call that holds no GIL: a dense text has thousands of
literal hits and hundreds of matches, and in Python each was a step and a google-re2 call.
- `Located` (secret_rules.RuleSet.native): the literal search, the located rules' searches
  around its hits, the rules walked through their cores (one `Walk` pass each), and each
  rule's judge (entropy, generic's digit, allowlist Sets).
- `Entropy` (entropy.native): find_high_entropy, candidates and checks.
- `Pii` (pii.native): find_pii, its pass, each candidate's kind and check.
Where rounding could part from Python (an entropy within 1e-9 of its threshold) or a check
is Python's own (allowlists that fire only together, IP addresses), the record says
undecided and the detector decides in Python. The tests hold each to its Python twin.
"""

from __future__ import annotations

import ctypes

import numpy as np

from assay.policies.redaction.re2bulk import Owned, _why_not, library, returned


def _ints(values) -> np.ndarray:
    return np.ascontiguousarray(values if len(values) else [0], dtype=np.int64)


def _result(fn, *args) -> list[int]:
    """`returned(fn, *args)` as a list, which only a failed allocation makes NULL here."""
    found = returned(fn, *args)
    if found is None:
        raise MemoryError(f"re2bulk.{fn.__name__} could not allocate its result")
    return found


def _result_array(fn, *args) -> np.ndarray:
    """`_result` as a numpy array."""
    found = returned(fn, *args, as_list=False)
    if found is None:
        raise MemoryError(f"re2bulk.{fn.__name__} could not allocate its result")
    return found


class Located(Owned):
    """A RuleSet's rules built into the library (re2rules.cpp's located_*): the literal search
    and the located rules' searches around its hits (`scan`), and the rules walked through
    their cores (`walk`), each judging its matches as RuleSet._judge does, in one call that
    holds no GIL: a dense text has thousands of literal hits and hundreds of matches.

    Built by RuleSet.native: the literals and their tables first, then each rule's parts,
    then `ready()`. Any part the system RE2 refuses leaves the whole of it unused."""

    __slots__ = ("literals", "ok", "walks")
    FREE = "located_free"

    def __init__(
        self,
        lib,
        literals: list[bytes],
        tables: list[tuple[list, list, list]],
        n_rules: int,
        max_mem: int,
        crowding: tuple[int, int, int, int],
    ):
        """`tables`: per literal, in id order, its entries (six ints each, None as -1), the
        ids of the literals it starts with and the rules it alone locates. `crowding`:
        secret_rules' CROWDED, MIN_LITERAL and CROWDED_BYTES, when a literal is left out."""
        super().__init__(lib, lib.located_new(max_mem, n_rules, *crowding))
        handle = self._handle
        self.literals, self.ok = literals, True
        self.walks: dict[int, Walk] = {}
        for lit in literals:
            lib.located_literal(handle, lit, len(lit))
        for i, (entries, prefixes, located_by) in enumerate(tables):
            flat = _ints([-1 if v is None else v for entry in entries for v in entry])
            pre, by = _ints(prefixes), _ints(located_by)
            lib.located_tables(
                handle,
                i,
                flat.ctypes.data,
                len(entries),
                pre.ctypes.data,
                len(prefixes),
                by.ctypes.data,
                len(located_by),
            )

    @classmethod
    def new(
        cls,
        literals: list[bytes],
        tables: list[tuple[list, list, list]],
        n_rules: int,
        max_mem: int,
        crowding: tuple[int, int, int, int],
    ) -> Located | None:
        lib = library()
        return cls(lib, literals, tables, n_rules, max_mem, crowding) if lib is not None else None

    def _refused(self, what: str) -> None:
        self.ok = False
        _why_not.append(f"the system RE2 cannot compile {what}")

    def locate(self, index: int, pattern: bytes, open_ended: bool, gate: list[int]) -> None:
        """A located rule: its regex, whether it is searched from each hit to the end, and
        the ids of its gate's keywords (none: the gate is implied)."""
        ids = _ints(gate)
        if not self._lib.located_rule(
            self._handle, index, pattern, len(pattern), int(open_ended), ids.ctypes.data, len(gate)
        ):
            self._refused(f"rule {index}'s regex")

    def walker(self, index: int, groups: bytes, before: int, prefix_bytes: bytes) -> None:
        """A rule walked through its core (RuleSet._walk): the core with its groups, and the
        lazy prefix's bound and bytes. Its pass is `self.walks[index]`."""
        table = bytes(int(b in prefix_bytes) for b in range(256))
        if not self._lib.located_walker(self._handle, index, groups, len(groups), before, table):
            self._refused(f"rule {index}'s core")
        self.walks[index] = Walk(self, index)

    def judge(
        self, index: int, entropy: float, generic: bool, in_python: bool, subjects: dict[str, list[bytes]]
    ) -> None:
        """How a rule's matches are judged: `subjects` maps secret, stop, match and line to
        the patterns of its merged allowlists (secret_rules._Verdicts)."""
        self._lib.located_judge(self._handle, index, float(entropy), int(generic), int(in_python))
        for subject, patterns in subjects.items():
            for pattern in patterns:
                self._lib.located_allow(self._handle, index, _SUBJECTS[subject], pattern, len(pattern))

    def ready(self) -> Located | None:
        if self.ok and not self._lib.located_ready(self._handle):
            self._refused("an allowlist")
        return self if self.ok else None

    def scan(self, data: bytes, lowered: bytes) -> tuple[list[int], list[int], list[int]] | None:
        """(ids of the literals present, crowded rules, flat records) for the located rules,
        or None when the search could not run (an alternation RE2 could not compile): the
        caller then searches in Python. A record is six ints: (rule, decided, match start,
        match end, secret start, secret end); decided 1 is a finding at the secret, decided 0
        a match for RuleSet._judge to decide (an entropy near its threshold)."""
        flat = returned(self._lib.located_scan, self._handle, data, lowered, len(data))
        if flat is None:
            return None
        p = flat[0]
        present = flat[1 : 1 + p]
        c = flat[1 + p]
        return present, flat[2 + p : 2 + p + c], flat[2 + p + c :]

    def walk(self, data: bytes, index: int) -> list[int]:
        """A walked rule's records, as `scan`'s."""
        return _result(self._lib.located_walk, self._handle, index, data, len(data))


_SUBJECTS = {"secret": 0, "stop": 1, "match": 2, "line": 3}


class Pii(Owned):
    """pii.find_pii built into the library (re2detectors.cpp's pii_*): the one-pass pattern, each
    candidate's kind and its check, in one call on the calling thread; IP addresses are left
    to Python's ipaddress."""

    __slots__ = ()
    FREE = "pii_free"

    @classmethod
    def of(cls, pattern, alone: list, iban_lengths: dict[str, int]) -> Pii | None:
        """`pattern`: pii._PATTERN; `alone`: each kind's regex in pii._ALONE's order."""
        lib = library()
        if lib is None:
            return None
        patterns = [pattern.pattern] + [regex.pattern for regex in alone]
        buffers = (ctypes.c_char_p * len(patterns))(*patterns)
        sizes = _ints([len(p) for p in patterns])
        table = bytearray(26 * 26)
        for country, length in iban_lengths.items():
            table[(ord(country[0]) - 65) * 26 + ord(country[1]) - 65] = length
        handle = lib.pii_new(
            ctypes.cast(buffers, ctypes.c_void_p), sizes.ctypes.data, bytes(table), pattern.options.max_mem
        )
        if not handle:
            _why_not.append("the system RE2 cannot compile the PII detector's regexes")
            return None
        return cls(lib, handle)

    def find(self, data: bytes) -> list[int]:
        """Flat (start, end, kind index, decided) per candidate kept; decided 0 is an IP
        address for Python to check."""
        return _result(self._lib.pii_find, self._handle, data, len(data))


class Walk:
    """One walked rule's pass over a text (Located.walk), to run ahead on the worker."""

    __slots__ = ("located", "index")

    def __init__(self, located: Located, index: int):
        self.located, self.index = located, index

    def spans(self, data: bytes) -> list[int]:
        return self.located.walk(data, self.index)


class Entropy(Owned):
    """entropy.find_high_entropy built into the library (re2detectors.cpp's entropy_*): the
    candidate search (a pass the worker may run ahead) and the checks on each candidate."""

    __slots__ = ()
    FREE = "entropy_free"

    @classmethod
    def of(
        cls, candidate, hash_label, hex_at: list[float], b64_at: list[float], hex_beyond: float, b64_beyond: float
    ) -> Entropy | None:
        """`candidate` and `hash_label`: entropy.py's regexes (as google-re2 compiled them);
        `hex_at`, `b64_at`: the thresholds by length, `*_beyond` for any longer."""
        lib = library()
        if lib is None or len(hex_at) != len(b64_at):
            return None
        hexes, b64s = (np.ascontiguousarray(t, dtype=np.float64) for t in (hex_at, b64_at))
        handle = lib.entropy_new(
            candidate.pattern,
            len(candidate.pattern),
            hash_label.pattern,
            len(hash_label.pattern),
            hexes.ctypes.data,
            b64s.ctypes.data,
            len(hex_at),
            hex_beyond,
            b64_beyond,
            candidate.options.max_mem,
        )
        if not handle:
            _why_not.append("the system RE2 cannot compile the entropy detector's regexes")
            return None
        return cls(lib, handle)

    def find(self, data: bytes, covered: list[tuple[int, int]], listed: np.ndarray | None = None) -> list[int]:
        """Flat (start, end, token end, kind) per token: kind 1 hex, 2 base64, 0 undecided
        (an entropy within 1e-9 of its threshold, for is_high_entropy to settle). `listed`:
        `candidates(data)`, run ahead; else the candidates are searched here."""
        spans = _ints([x for span in covered for x in span])
        at, pairs = (listed.ctypes.data, len(listed) // 2) if listed is not None else (None, 0)
        return _result(
            self._lib.entropy_find, self._handle, data, len(data), spans.ctypes.data, len(covered), at, pairs
        )

    def candidates(self, data: bytes) -> np.ndarray:
        """The candidate regex's matches over `data`, as flat (start, end) pairs: a pass
        for the worker (`spans`), read by `find`."""
        return _result_array(self._lib.entropy_candidates, self._handle, data, len(data))

    spans = candidates
