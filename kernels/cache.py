"""The autotune cache: which configuration won for which kind of kernel, on which device.

The key is decoupled from source text: a hash of the normalised op graph (op names and
argument structure, positional references, no variable names, no constant values), a shape
bucket (each size rounded to a power of two), dtype, device (CPU model, vector ISA, threads)
and backend. Renaming a variable or editing a comment in a task changes none of these.

Entries live in two stores behind one small interface: a local JSON-lines file under
ASSAY_HOME and a table in the ledger's database (SQLite, or PostgreSQL for a team). Reads
merge both and deduplicate by (key, configuration), keeping the best time. A new search is
seeded from the best matching entries (like Helion's FROM_BEST_AVAILABLE): exact key first,
then the same op graph measured at other sizes or on other machines.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import math
import socket
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import sqlalchemy as sa
from sqlmodel import Field, SQLModel, select


def _canon(obj) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def _h(obj, n: int = 24) -> str:
    return hashlib.sha256(_canon(obj).encode()).hexdigest()[:n]


def _abstract(v):
    """Argument structure without constant values: refs by kind and position, numbers as '#'."""
    if isinstance(v, str) and v.startswith("%"):
        return v
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, float):
        return "#"
    if isinstance(v, list):
        return [_abstract(e) for e in v]
    return v  # ints (dims), strings (gelu's approximate): they change what is computed


def op_signature(info) -> str:
    """Hash of the normalised graph: what is computed, not how the source spells it."""
    nodes = [[n["op"], sorted((k, _abstract(v)) for k, v in n["args"].items())] for n in info.nodes]
    ranks = [len(m.get("shape") or []) for m in info.inputs] + [len(p.get("shape") or []) for p in info.params]
    return _h({"nodes": nodes, "ranks": ranks, "out": info.graph.get("output")})


def _pow2(v: int) -> int:
    return 1 << max(0, round(math.log2(max(1, v))))


def shape_bucket(template) -> tuple[int, ...]:
    info, spec = template.info, template.spec
    if template.kind == "matmul":
        a = info.ref_meta(spec["a"])["shape"]
        b = info.ref_meta(spec["b"])["shape"]
        k = a[-1]
        n = b[0] if spec["layout"] == "nk" else b[1]
        dims = (math.prod(a) // max(k, 1), n, k)
    elif template.kind == "rowreduce":
        s = info.ref_meta(spec["x"])["shape"]
        dims = (math.prod(s) // max(s[-1], 1), s[-1])
    elif template.kind == "dimreduce":
        s, d = info.ref_meta(spec["x"])["shape"], spec["dim"]
        dims = (math.prod(s[:d]), s[d], math.prod(s[d + 1 :]))
    else:
        s = spec["out_shape"]
        dims = (math.prod(s), s[-1] if s else 1)
    return tuple(_pow2(d) for d in dims)


def device_id(device: dict) -> str:
    return f"{device.get('model', '?')}|{device.get('capability', '?')}|{device.get('threads', '?')}t"


@dataclass(frozen=True)
class CacheKey:
    signature: str
    template: str
    bucket: tuple[int, ...]
    dtype: str
    device: str
    backend: str

    @property
    def family(self) -> str:
        """Entries that are the same computation, at any size and on any device."""
        return _h([self.signature, self.template, self.dtype, self.backend])

    @property
    def digest(self) -> str:
        return _h([self.family, list(self.bucket), self.device])


# The code templates are rendered from: an entry timed on an older revision of them says nothing
# about the kernel the current one builds, so it neither seeds nor is reused.
_TEMPLATE_SOURCES = {
    "cpp": ("cpp_templates.py", "pointwise.py", "dimreduce.py", "dimnorm.py", "cpp/vecmath.h"),
    "triton": ("triton_templates.py", "pointwise.py"),
}


@functools.cache
def template_revision(backend: str) -> str:
    here, h = Path(__file__).resolve().parent, hashlib.sha256()
    for name in _TEMPLATE_SOURCES.get(backend, ()):
        h.update((here / name).read_bytes())
    return h.hexdigest()[:8]


def cache_key(template) -> CacheKey:
    return CacheKey(
        op_signature(template.info),
        f"{template.name}@{template_revision(template.backend)}",
        shape_bucket(template),
        "float32",
        device_id(template.info.device),
        template.backend,
    )


def host_id() -> str:
    try:
        ident = Path("/etc/machine-id").read_text().strip()
    except OSError:
        ident = ""
    return _h(ident or socket.gethostname(), 12)


@dataclass
class CacheEntry:
    key: str
    family: str
    bucket: list[int]
    device: str
    config: dict
    seconds: float
    host: str = field(default_factory=host_id)
    created: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    @property
    def config_id(self) -> str:
        return _h(self.config, 16)


class CacheStore(Protocol):
    def put(self, entry: CacheEntry) -> None: ...
    def family(self, family: str) -> list[CacheEntry]: ...


class LocalStore:
    """JSON lines under ASSAY_HOME/kernels/; appends are whole lines under an flock."""

    def __init__(self, path: Path | None = None):
        if path is None:
            from assay.settings import settings

            path = settings().ensure_home() / "kernels" / "autotune.jsonl"
        self.path = Path(path)

    def put(self, entry: CacheEntry) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = _canon(asdict(entry)) + "\n"
        with open(self.path, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(line)

    def family(self, family: str) -> list[CacheEntry]:
        if not self.path.exists():
            return []
        out = []
        with open(self.path) as f:
            for line in f:
                try:
                    d = json.loads(line)
                    if d.get("family") == family:
                        out.append(CacheEntry(**d))
                except (ValueError, TypeError):
                    continue  # a torn or foreign line: skip it, never fail a search over it
        return out


class AutotuneEntry(SQLModel, table=True):
    """The ledger database's copy of the cache: shared by a team when the ledger is PostgreSQL."""

    __tablename__ = "kernel_autotune"  # pyright: ignore[reportAssignmentType]  # SQLModel types it as a declared_attr; SQLAlchemy takes a plain name
    __table_args__ = (sa.UniqueConstraint("key", "config_id", "host", name="uq_kernel_autotune"),)

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(index=True)
    family: str = Field(index=True)
    bucket: str
    device: str
    config_id: str
    config: str
    seconds: float
    host: str
    created: str


class LedgerStore:
    """The cache table in the ledger's database (the ledger's engine, the ledger's dialect)."""

    def __init__(self, ledger):
        self.ledger = ledger
        ledger.ensure_tables(AutotuneEntry)

    def put(self, entry: CacheEntry) -> None:
        row = AutotuneEntry(
            key=entry.key,
            family=entry.family,
            bucket=_canon(entry.bucket),
            device=entry.device,
            config_id=entry.config_id,
            config=_canon(entry.config),
            seconds=entry.seconds,
            host=entry.host,
            created=entry.created,
        )
        self.ledger.insert_once(row, unique=("key", "config_id", "host"))

    def family(self, family: str) -> list[CacheEntry]:
        with self.ledger.session() as s:
            rows = list(s.exec(select(AutotuneEntry).where(AutotuneEntry.family == family)))
        return [
            CacheEntry(
                key=r.key,
                family=r.family,
                bucket=json.loads(r.bucket),
                device=r.device,
                config=json.loads(r.config),
                seconds=r.seconds,
                host=r.host,
                created=r.created,
            )
            for r in rows
        ]


def merge(*lists: list[CacheEntry]) -> list[CacheEntry]:
    """One entry per (key, configuration): the fastest measurement of it wins."""
    best: dict[tuple[str, str], CacheEntry] = {}
    for entries in lists:
        for e in entries:
            k = (e.key, e.config_id)
            if k not in best or e.seconds < best[k].seconds:
                best[k] = e
    return sorted(best.values(), key=lambda e: (e.key, e.seconds))


class AutotuneCache:
    def __init__(self, stores: list[CacheStore]):
        self.stores = list(stores)

    @classmethod
    def open(cls, *, ledger=None, local: bool = True) -> AutotuneCache:
        """Local store plus, when given a `Ledger`, its database's table."""
        stores: list[CacheStore] = [LocalStore()] if local else []
        if ledger is not None:
            stores.append(LedgerStore(ledger))
        return cls(stores)

    def record(self, key: CacheKey, config: dict, seconds: float) -> CacheEntry:
        entry = CacheEntry(
            key=key.digest,
            family=key.family,
            bucket=list(key.bucket),
            device=key.device,
            config=dict(config),
            seconds=float(seconds),
        )
        for store in self.stores:
            store.put(entry)
        return entry

    def entries(self, key: CacheKey) -> list[CacheEntry]:
        """Every stored measurement of this computation, merged across stores, deduplicated."""
        return merge(*(store.family(key.family) for store in self.stores))

    def seeds(self, key: CacheKey, space=None, k: int = 3) -> list[dict]:
        """The best configurations to try first: exact key by time, then the same computation
        from other sizes or machines, ranked by how close it was to the best of its own key."""
        entries = self.entries(key)
        if space is not None:
            entries = [e for e in entries if space.index(e.config) is not None]
        best_of: dict[str, float] = {}
        for e in entries:
            best_of[e.key] = min(best_of.get(e.key, math.inf), e.seconds)

        def score(e: CacheEntry):
            dist = sum(
                abs(math.log2(max(a, 1)) - math.log2(max(b, 1))) for a, b in zip(e.bucket, key.bucket, strict=False)
            )
            return (e.key != key.digest, e.device != key.device, dist, e.seconds / best_of[e.key])

        out: list[dict] = []
        for e in sorted(entries, key=score):
            if e.config not in out:
                out.append(e.config)
            if len(out) == k:
                break
        return out
