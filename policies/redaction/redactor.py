"""Redaction (invariant 2): secrets and personal data become placeholders before text leaves.

One `Redactor` per run. `redact(text)` replaces every detected secret or personal datum with a
placeholder such as `[[SECRET:aws-access-token:3]]` or `[[PII:email:4]]`; the same value gets
the same placeholder for the whole run, and `restore(...)` maps placeholders back to the exact
text they replaced (the gateway calls it only for tools whose capability allows it).

Detectors, all deterministic and all RE2 (linear time on attacker-controlled text):
1. values assay knows are secret (registered, from secret-looking env variables, key files),
   also base64/hex/URL-encoded, JSON/HTML-escaped, wrapped across lines, and in pieces as a
   dump tool shows them (known_secrets.py);
2. gitleaks' rule set, loaded as data (secret_rules.py);
3. personal data: e-mail, phone, IPv4/IPv6, Luhn-valid cards, mod-97-valid IBANs (pii.py);
4. high-entropy tokens (entropy.py).
Overlapping findings merge into one placeholder. Placeholders this run issued are left alone,
so redacting redacted text changes nothing; a look-alike placeholder the vault never issued is
ordinary (attacker) text and is scanned like any other.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import re2

from assay.errors import UserError
from assay.policies.redaction.engine import Engine, Re2Engine
from assay.policies.redaction.fold import char_starts, fold
from assay.policies.redaction.known_secrets import KnownSecrets
from assay.policies.redaction.re2util import match_spans
from assay.policies.redaction.secret_rules import RuleSet, load_rules
from assay.policies.redaction.vault import PLACEHOLDER_RE, Vault

# Redacting can expose a new match at a placeholder's edge (a word boundary that was not one
# before); a few passes reach the fixpoint that makes redact idempotent. Each pass is linear,
# and later passes run only when the previous one replaced something.
MAX_PASSES = 4

# Words in an environment variable's name that mark its value as secret.
_SECRET_WORDS = frozenset(
    [
        "KEY",
        "KEYS",
        "APIKEY",
        "TOKEN",
        "TOKENS",
        "SECRET",
        "SECRETS",
        "PASSWORD",
        "PASSWORDS",
        "PASSWD",
        "PASS",
        "PASSPHRASE",
        "PWD",
        "CREDENTIAL",
        "CREDENTIALS",
        "CREDS",
        "AUTH",
        "PRIVATE",
        "SESSION",
        "COOKIE",
        "SIGNATURE",
        "DSN",
        "CERT",
    ]
)
_NOT_SECRET_NAMES = frozenset({"PWD", "OLDPWD", "PASS_MAX_DAYS", "SSH_AUTH_SOCK", "GPG_AGENT_INFO", "ASSAY_SECRET_ENV"})
_URL_WITH_CREDENTIALS = re.compile(r"(?:DATABASE|DB|REDIS|MONGO(?:DB)?|AMQP|BROKER|POSTGRES|MYSQL)_(?:URL|URI)$")
# Extra names to treat as secret, comma-separated: the config hook for odd names.
SECRET_ENV_VAR = "ASSAY_SECRET_ENV"

_PEM_BODY = re2.compile(rb"-----BEGIN [A-Z0-9 ]+-----([A-Za-z0-9+/=\s:,-]+?)-----END [A-Z0-9 ]+-----")


@dataclass(frozen=True)
class Span:
    """One redacted region: offsets into the text given to `find`, and what it was taken for."""

    start: int
    end: int
    category: str  # SECRET | PII
    kind: str


def looks_secret(name: str) -> bool:
    """Whether an environment variable's name says its value is a secret."""
    upper = name.upper()
    if upper in _NOT_SECRET_NAMES:
        return False
    words = [w for w in re.split(r"[_\-.]+", upper) if w]
    return any(w in _SECRET_WORDS for w in words) or bool(_URL_WITH_CREDENTIALS.search(upper))


_SEPARATOR = b"\x00\n"


def _windows(data: bytes, placed: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merged regions around each placed placeholder: its line and the lines either side
    (a rule may reach across a line end, as in `key =\\n  value`). One pass finds the line
    ends and one bisection per placeholder edge places the regions, however long the lines."""
    if not placed:
        return []
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    edges = np.asarray(placed, dtype=np.int64)
    before = np.searchsorted(ends, edges[:, 0]) - 2  # the line end before the previous line
    lo = np.where(before >= 0, ends[np.maximum(before, 0)] + 1 if len(ends) else 0, 0)
    after = np.searchsorted(ends, edges[:, 1]) + 1  # the line end after the next line
    hi = np.where(after < len(ends), ends[np.minimum(after, len(ends) - 1)] + 1 if len(ends) else 0, len(data))
    if data.find(b"-----") >= 0:
        lo, hi = _around_blocks(data, placed, lo, hi, ends)
    # Placeholders come in order, so both edges rise: a region starts where one begins
    # after the previous one ends.
    first = np.flatnonzero(np.concatenate(([True], lo[1:] > hi[:-1])))
    last = np.concatenate((first[1:] - 1, [len(lo) - 1]))
    return list(zip(lo[first].tolist(), hi[last].tolist(), strict=False))


# How far a block rule (a PEM private key: BEGIN ... KEY-----, any number of lines) may reach
# from a placeholder inside it. A 4096-bit RSA key in PEM is about 3.3 KB.
BLOCK_REACH = 16384


def _around_blocks(data: bytes, placed: list[tuple[int, int]], lo: Any, hi: Any, ends: Any) -> tuple[Any, Any]:
    """The regions widened to the whole `-----BEGIN ... KEY-----` block a placeholder lies in: a
    placeholder is longer than what it replaced, so a block too short to be a key before can
    be one after, and the next pass must see all of it or redacting the output again would
    change it. One scan finds every block edge; each placeholder bisects them (linear time on
    a text of nothing but headers). Edges stay rising: a widened region only swallows its
    neighbours."""
    low = data.lower()
    heads = np.fromiter((m.start() for m in re.finditer(rb"-----begin", low)), dtype=np.int64)
    tails = np.fromiter((m.start() for m in re.finditer(rb"key-----", low)), dtype=np.int64)
    edges = np.asarray(placed, dtype=np.int64)
    lo, hi = lo.astype(np.int64), hi.astype(np.int64)
    if len(heads):
        k = np.searchsorted(heads, edges[:, 0], side="right") - 1
        at = heads[np.maximum(k, 0)]
        near = (k >= 0) & (edges[:, 0] - at <= BLOCK_REACH)
        line = np.searchsorted(ends, at) - 1  # the line end before the block's first line
        start = np.where(line >= 0, ends[np.maximum(line, 0)] + 1 if len(ends) else 0, 0)
        lo = np.where(near, np.minimum(lo, start), lo)
    if len(tails):
        k = np.searchsorted(tails, edges[:, 1])
        at = tails[np.minimum(k, len(tails) - 1)]
        near = (k < len(tails)) & (at - edges[:, 1] <= BLOCK_REACH)
        line = np.searchsorted(ends, at)  # the line end after the block's last line
        stop = np.where(
            line < len(ends), ends[np.minimum(line, len(ends) - 1)] + 1 if len(ends) else len(data), len(data)
        )
        hi = np.where(near, np.maximum(hi, stop), hi)
    # A widened region may reach past its neighbours' edges: keep both edge lists rising.
    return np.minimum.accumulate(lo[::-1])[::-1], np.maximum.accumulate(hi)


def _group(m: Any, n: int = 0) -> bytes:
    """A bytes match's group n (google-re2 types every group loosely)."""
    g = m.group(n)
    assert isinstance(g, bytes)
    return g


@lru_cache(maxsize=1)
def default_rules() -> RuleSet:
    """The vendored gitleaks rules, parsed and compiled once per process (they are immutable)."""
    return load_rules()


class Redactor:
    """The redaction state of one run: the rules, the known secrets and the vault."""

    __slots__ = ("_engine", "_inbound", "_known", "_vault")

    def __init__(
        self, rules: RuleSet | None = None, *, pii: bool = True, high_entropy: bool = True, engine: Engine | None = None
    ):
        self._engine: Engine = engine or Re2Engine(
            rules if rules is not None else default_rules(), pii=pii, high_entropy=high_entropy
        )
        # At the way in (files entering a workspace, a call's arguments): registered values and
        # rule findings only. Personal data and high-entropy tokens are redacted on the way out;
        # in code on its way in they would break it (a slice like c[::2] reads as an IPv6
        # address, a test vector as a token) and protect no secret.
        self._inbound: Engine = (
            Re2Engine(self._engine.rules, pii=False, high_entropy=False)
            if isinstance(self._engine, Re2Engine)
            else self._engine
        )
        self._known = KnownSecrets()
        self._vault = Vault()

    # -- what is known to be secret -------------------------------------------------------

    def add_secret(self, value: str | bytes, kind: str = "registered") -> bool:
        """Register a value to redact wherever it appears (plain, encoded or wrapped).

        Returns False when the value is too short to redact usefully (under 6 bytes) or
        already known.
        """
        raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else bytes(value)
        return self._known.add(raw.strip() if raw.strip() else raw, kind)

    def add_environment(self, environ: Mapping[str, str] | None = None, names: Iterable[str] = ()) -> int:
        """Register the values of secret-looking variables (and of `names`, and of those listed
        in ASSAY_SECRET_ENV). Returns how many values were registered."""
        env = os.environ if environ is None else environ
        listed = {n.strip() for n in names if n.strip()}
        listed |= {n.strip() for n in env.get(SECRET_ENV_VAR, "").split(",") if n.strip()}
        count = 0
        for name, value in env.items():
            if not value or not (name in listed or looks_secret(name)):
                continue
            if self.add_secret(value, f"env-{name}"):
                count += 1
        return count

    def add_key_file(self, path: str | os.PathLike[str], kind: str | None = None) -> int:
        """Register a key file's content, and for PEM files each block's base64 body, so the
        key is caught however it is re-wrapped. Returns how many values were registered."""
        p = Path(path)
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise UserError(
                f"cannot read key file {p} ({exc.strerror})", "check the path and its permissions"
            ) from None
        label = kind or f"keyfile-{p.name}"
        count = 0
        for m in _PEM_BODY.finditer(data):
            body = b"".join(_group(m, 1).split())
            if self.add_secret(body, label):
                count += 1
        if self.add_secret(data, label):
            count += 1
        return count

    @classmethod
    def for_run(
        cls,
        environ: Mapping[str, str] | None = None,
        key_files: Iterable[str | os.PathLike[str]] = (),
        names: Iterable[str] = (),
    ) -> Redactor:
        """A redactor with the environment's secrets and the given key files registered."""
        redactor = cls()
        redactor.add_environment(environ, names)
        for path in key_files:
            redactor.add_key_file(path)
        return redactor

    # -- finding --------------------------------------------------------------------------

    def _protected(self, data: bytes) -> list[tuple[int, int]]:
        # RE2 skips to each "[[" by memchr; `b"[[" in data` is slower than the whole search.
        knows = self._vault.knows
        return [spans[0] for spans in match_spans(PLACEHOLDER_RE, data) if knows(data[spans[0][0] : spans[0][1]])]

    def _find(
        self, data: bytes, protected: list[tuple[int, int]] | None = None, engine: Engine | None = None
    ) -> list[tuple[int, int, str, str]]:
        """Merged findings as (start, end, category, kind) byte spans, in order. `protected`:
        this run's placeholders in `data`, when the caller knows them all."""
        if protected is None:
            protected = self._protected(data)
        scan = data
        if protected:
            masked = bytearray(data)
            for s, e in protected:
                masked[s:e] = b" " * (e - s)
            scan = bytes(masked)
        engine = engine or self._engine
        raw = engine.findings(scan, self._known)
        raw += self._folded_findings(scan, engine)
        if not raw:
            return []
        raw.sort()
        merged: list[list] = []
        for s, e, prio, cat, kind in raw:
            if merged and s < merged[-1][1]:
                last = merged[-1]
                last[1] = max(last[1], e)
                if prio < last[4]:
                    last[2], last[3], last[4] = cat, kind, prio
                elif cat == "SECRET":
                    last[2] = "SECRET"
            else:
                merged.append([s, e, cat, kind, prio])
        return [(s, e, cat, kind) for s, e, cat, kind, _ in merged]

    def _folded_findings(self, scan: bytes, engine: Engine) -> list[tuple[int, int, int, str, str]]:
        """Findings in the text as a matcher should read it (fold.py: NFKC, format characters
        dropped, homoglyphs mapped), as byte spans of `scan` itself: a secret written in
        fullwidth letters or with zero-width characters between them is redacted whole."""
        if scan.isascii():
            return []
        text = scan.decode("utf-8", "surrogatepass")
        folded = fold(text)
        if folded is None:
            return []
        norm, index = folded
        data = norm.encode("utf-8", "surrogatepass")
        found = engine.findings(data, self._known)
        if not found:
            return []
        norm_chars = char_starts(data)  # byte offset -> character: searchsorted
        orig_bytes = char_starts(scan)  # character -> byte offset
        out = []
        for s, e, prio, cat, kind in found:
            cs = int(np.searchsorted(norm_chars, s, side="right")) - 1
            ce = int(np.searchsorted(norm_chars, e, side="left"))
            if ce <= cs:
                continue
            first, last = int(index[cs]), int(index[ce - 1])
            out.append((int(orig_bytes[first]), int(orig_bytes[last + 1]), prio, cat, kind))
        return out

    def find(self, text: str) -> list[Span]:
        """What one redaction pass would replace, as character offsets into `text`."""
        data = text.encode("utf-8", "surrogatepass")
        spans = self._find(data)
        if len(data) == len(text):  # ASCII: byte offsets are character offsets
            return [Span(s, e, c, k) for s, e, c, k in spans]
        out = []
        for s, e, c, k in spans:
            cs = len(data[:s].decode("utf-8", "surrogatepass"))
            out.append(Span(cs, cs + len(data[s:e].decode("utf-8", "surrogatepass")), c, k))
        return out

    # -- redacting and restoring ------------------------------------------------------------

    def _redact_bytes(self, data: bytes, engine: Engine | None = None) -> bytes:
        spans = self._find(data, engine=engine)
        for _ in range(MAX_PASSES):
            if not spans:
                break
            data, placed = self._replace(data, spans)
            # A new placeholder changes only its neighbourhood, so later passes rescan the
            # lines around each one instead of the whole text.
            spans = self._find_in(data, _windows(data, placed), placed, engine)
        return data

    def _find_in(
        self,
        data: bytes,
        windows: list[tuple[int, int]],
        placed: list[tuple[int, int]] | tuple[()] = (),
        engine: Engine | None = None,
    ) -> list[tuple[int, int, str, str]]:
        """Findings inside `windows` only, from one scan of the windows joined by a NUL line
        (no token, key or address spans a NUL), mapped back to offsets in `data`. `placed`:
        the placeholders just written (in order, each inside a window)."""
        joined = _SEPARATOR.join(data[lo:hi] for lo, hi in windows)
        starts = []
        at = 0
        for lo, hi in windows:
            starts.append(at)
            at += hi - lo + len(_SEPARATOR)
        protected = None
        if placed and joined.count(b"[[") == len(placed):
            # Each placeholder starts with its own "[[" and is counted at least once, so no
            # other placeholder is in the windows: the ones just written are all there is.
            protected, i = [], 0
            for s, e in placed:
                while windows[i][1] <= s:
                    i += 1
                shift = starts[i] - windows[i][0]
                protected.append((s + shift, e + shift))
        out = []
        for s, e, cat, kind in self._find(joined, protected, engine):
            i = bisect_right(starts, s) - 1
            lo, hi = windows[i]
            offset = lo - starts[i]
            end = min(e + offset, hi)  # a long-range rule may run on past the separator
            if s + offset < hi and end > s + offset:
                out.append((s + offset, end, cat, kind))
        return out

    def _replace(self, data: bytes, spans) -> tuple[bytes, list[tuple[int, int]]]:
        parts = []
        placed = []
        pos = 0
        size = 0
        for s, e, cat, kind in spans:
            parts.append(data[pos:s])
            size += s - pos
            placeholder = self._vault.placeholder_for(data[s:e], cat, kind)
            parts.append(placeholder)
            placed.append((size, size + len(placeholder)))
            size += len(placeholder)
            pos = e
        parts.append(data[pos:])
        return b"".join(parts), placed

    def redact(self, text: str) -> str:
        """`text` with every secret and personal datum replaced by its placeholder."""
        data = text.encode("utf-8", "surrogatepass")
        out = self._redact_bytes(data)
        return text if out is data else out.decode("utf-8", "surrogatepass")

    def redact_json(self, obj: Any) -> Any:
        """A copy of a JSON-like structure with every string (keys too) redacted."""
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {(self.redact(k) if isinstance(k, str) else k): self.redact_json(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.redact_json(v) for v in obj)
        return obj

    def redact_secrets(self, text: str) -> str:
        """`text` as it may enter a workspace or sandbox: registered values and rule findings
        replaced by their placeholders (the same ones `redact` gives), nothing else touched."""
        data = text.encode("utf-8", "surrogatepass")
        out = self._redact_bytes(data, self._inbound)
        return text if out is data else out.decode("utf-8", "surrogatepass")

    def redact_secrets_json(self, obj: Any) -> Any:
        """`redact_secrets` over every string of a JSON-like structure (a call's arguments)."""
        if isinstance(obj, str):
            return self.redact_secrets(obj)
        if isinstance(obj, dict):
            return {
                (self.redact_secrets(k) if isinstance(k, str) else k): self.redact_secrets_json(v)
                for k, v in obj.items()
            }
        if isinstance(obj, (list, tuple)):
            return type(obj)(self.redact_secrets_json(v) for v in obj)
        return obj

    def holds_secret(self, text: str) -> bool:
        """Whether `text` holds a registered value or a rule finding (what the way in redacts)."""
        return bool(self._find(text.encode("utf-8", "surrogatepass"), engine=self._inbound))

    def value_of(self, placeholder: bytes) -> bytes | None:
        """The value behind a placeholder this run issued, or None (trusted side only)."""
        return self._vault.value_of(placeholder)

    def restore(self, obj: Any) -> tuple[Any, int]:
        """`obj` (a string or a JSON-like structure) with this run's placeholders replaced by the
        real values, and how many were replaced. Unknown look-alikes are left as they are."""
        if isinstance(obj, str):
            return self._restore_text(obj)
        if isinstance(obj, dict):
            total = 0
            out = {}
            for k, v in obj.items():
                if isinstance(k, str):
                    k, n = self._restore_text(k)
                    total += n
                out[k], n = self.restore(v)
                total += n
            return out, total
        if isinstance(obj, (list, tuple)):
            total = 0
            items = []
            for v in obj:
                v, n = self.restore(v)
                items.append(v)
                total += n
            return type(obj)(items), total
        return obj, 0

    def _restore_text(self, text: str) -> tuple[str, int]:
        if "[[" not in text:
            return text, 0
        out, n = self._restore_bytes(text.encode("utf-8", "surrogatepass"), MAX_PASSES)
        return (out.decode("utf-8", "surrogatepass"), n) if n else (text, 0)

    def _restore_bytes(self, data: bytes, depth: int) -> tuple[bytes, int]:
        """A later pass may redact a span that holds an earlier pass's placeholder (a key block
        that grew around one), so a value is itself restored, as deep as passes go."""
        parts = []
        pos = 0
        n = 0
        for m in PLACEHOLDER_RE.finditer(data):
            value = self._vault.value_of(_group(m))
            if value is None:
                continue
            if depth > 1 and b"[[" in value:
                value, inner = self._restore_bytes(value, depth - 1)
                n += inner
            s, e = m.span()
            parts.append(data[pos:s])
            parts.append(value)
            pos = e
            n += 1
        if not n:
            return data, 0
        parts.append(data[pos:])
        return b"".join(parts), n

    # -- never leak -------------------------------------------------------------------------

    @property
    def placeholders(self) -> int:
        """How many distinct values this run has replaced so far."""
        return len(self._vault)

    @property
    def known_secrets(self) -> int:
        return len(self._known)

    @property
    def rules(self) -> RuleSet:
        return self._engine.rules

    def __repr__(self) -> str:
        return f"<Redactor: {len(self._known)} known secrets, {len(self._vault)} placeholders, values withheld>"

    __str__ = __repr__

    def __reduce_ex__(self, protocol: object) -> object:
        raise TypeError("a redactor holds the run's secrets and never leaves the process")

    def __copy__(self) -> object:
        raise TypeError("a redactor holds the run's secrets and is not copied")

    def __deepcopy__(self, memo: object) -> object:
        raise TypeError("a redactor holds the run's secrets and is not copied")
