"""re2bulk: the redaction detectors' native library, and a second core for their passes.

The library (re2bulk.cpp, re2rules.cpp, re2detectors.cpp) is built with g++ against the
system's RE2 (Debian's libre2-dev: the Makefile installs it) into the user's cache once per
machine, and loaded with ctypes, which drops the GIL for each call. This module builds and
loads it and runs the whole-text passes; re2native.py wraps the detectors' parts.

The passes (the walked rules', the registered values' and the entropy candidates') are
queued on one worker thread while the calling thread runs PII and the rules' literal search. A pass the worker has not started when the calling
thread needs it is taken back and run there (`Prefetched`). `Bulk` passes return every match
of one regex, which the detectors read through a `Cursor` that answers exactly what a live
search would, and searches live where the list cannot tell.

Only texts of MIN_BYTES and more take these paths, so a gateway's usual result never loads
the library; with one CPU nothing is queued. Without the library everything runs in Python
on the calling thread: the same findings, slower.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import subprocess
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import re2

from assay.policies.redaction.re2util import _UNANCHORED

log = logging.getLogger(__name__)

_HERE = Path(__file__).parent
# The whole-text passes, the rules (re2native.Located) and the detectors (re2native.Entropy,
# re2native.Pii), with the header they share: one library.
SOURCES = tuple(_HERE / name for name in ("re2bulk.cpp", "re2rules.cpp", "re2detectors.cpp"))
HEADERS = (_HERE / "re2bulk.h",)
FLAGS = ("-std=c++17", "-O2", "-fPIC", "-shared", "-w")
# Below this a thread handoff costs more than the passes it would move, and loading (or
# building) the library is not worth it.
MIN_BYTES = 64 << 10
_CHUNK = 4096  # matches per call; a text with more takes more calls
# assay.settings' switch: off keeps every pass on the calling thread.
ENV = "ASSAY_REDACTION_BULK"

_why_not: list[str] = []
_python_only = 0  # python_only() blocks open
_any_length = 0  # any_length() blocks open


def takes(data: bytes) -> bool:
    """Whether `data` takes the library's paths (the detectors' native parts, the worker): it
    is MIN_BYTES or longer (or an `any_length()` block is open), and no `python_only()` block
    is open. Where the library is missing, each path finds that out and stays in Python."""
    return (len(data) >= MIN_BYTES or _any_length > 0) and not _python_only


@contextmanager
def any_length():
    """Within the block, texts of any length take the library's paths: how the tests hold
    short generated texts to the Python twin."""
    global _any_length
    _any_length += 1
    try:
        yield
    finally:
        _any_length -= 1


@contextmanager
def python_only():
    """Within the block, every text is redacted as without the library: in Python, on the
    calling thread. The Python twin the tests and the bench hold the library's paths to."""
    global _python_only
    _python_only += 1
    try:
        yield
    finally:
        _python_only -= 1


def _install_dir() -> Path:
    # Inside the installation (the environment assay is installed in), written by `make install`
    # only: never a user cache that any process of the user could fill with a library of its
    # own under the expected name. The gateway loads nothing it did not find here, checked.
    return Path(sys.prefix) / "share" / "assay" / "re2bulk"


def _names() -> tuple[Path, Path]:
    """The library this source builds to, and the file holding its SHA-256 (both by the
    sources' own hash, so an install of other sources never loads this build)."""
    source = b"".join(path.read_bytes() for path in SOURCES + HEADERS)
    digest = hashlib.sha256(source + " ".join(FLAGS).encode()).hexdigest()[:16]
    lib = _install_dir() / f"re2bulk-{digest}.so"
    return lib, lib.with_name(lib.name + ".sha256")


def build() -> Path:
    """Compile the sources at install time (`make install` runs this module) and record the
    built library's SHA-256 beside it; return its path. Never called by the gateway."""
    lib, recorded = _names()
    if lib.exists() and recorded.exists():
        return lib
    out_dir = lib.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{lib.name}.{os.getpid()}.{threading.get_ident()}"
    cmd = ["g++", *FLAGS, "-o", str(tmp), *map(str, SOURCES), "-lre2"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError(f"cannot run g++ ({exc})") from None
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = (done.stderr.strip().splitlines() or ["no output"])[0]
        raise RuntimeError(f"g++ failed: {first} (is libre2-dev installed? `make install` installs it)")
    os.replace(tmp, lib)  # atomic: a concurrent build leaves one complete file
    recorded.write_text(hashlib.sha256(lib.read_bytes()).hexdigest() + "\n")
    return lib


def load_verified() -> ctypes.CDLL:
    """The install-time build, loaded only if its bytes hash to what the build recorded, and
    loaded from those very bytes (a memfd), so a file swapped after the check is never mapped."""
    lib, recorded = _names()
    if not lib.exists() or not recorded.exists():
        raise RuntimeError(f"not built at install time ({lib.name} under {lib.parent}; `make install` builds it)")
    data = lib.read_bytes()
    want = recorded.read_text().strip()
    if hashlib.sha256(data).hexdigest() != want:
        raise RuntimeError(
            f"{lib} does not match the SHA-256 its build recorded; not loaded (run `make install` again)"
        )
    fd = os.memfd_create("assay-re2bulk", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        return ctypes.CDLL(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)  # the mapping keeps the memory


@lru_cache(maxsize=1)
def library():
    """The loaded library, or None (and `unavailable()` says why)."""
    from assay.settings import settings

    if not settings().redaction_bulk:
        _why_not.append(f"switched off ({ENV})")
        return None
    try:
        lib = load_verified()
    except (OSError, RuntimeError) as exc:
        _why_not.append(str(exc))
        log.warning("redaction runs its whole-text passes on one thread: %s", exc)
        return None
    lib.bulk_compile.restype = ctypes.c_void_p
    lib.bulk_compile.argtypes = [ctypes.c_char_p, ctypes.c_int64, ctypes.c_int, ctypes.c_int64, ctypes.c_int]
    lib.bulk_free.restype = None
    lib.bulk_free.argtypes = [ctypes.c_void_p]
    lib.bulk_spans.restype = ctypes.c_int64
    lib.bulk_spans.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_int64,
    ]
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.located_new.restype = ptr
    lib.located_new.argtypes = [i64, i64, i64, i64, i64, i64]
    lib.located_free.restype = None
    lib.located_free.argtypes = [ptr]
    lib.located_literal.restype = i64
    lib.located_literal.argtypes = [ptr, ctypes.c_char_p, i64]
    lib.located_tables.restype = None
    lib.located_tables.argtypes = [ptr, i64, ptr, i64, ptr, i64, ptr, i64]
    lib.located_rule.restype = ctypes.c_int
    lib.located_rule.argtypes = [ptr, i64, ctypes.c_char_p, i64, ctypes.c_int, ptr, i64]
    lib.located_walker.restype = ctypes.c_int
    lib.located_walker.argtypes = [ptr, i64, ctypes.c_char_p, i64, i64, ctypes.c_char_p]
    lib.located_judge.restype = None
    lib.located_judge.argtypes = [ptr, i64, ctypes.c_double, ctypes.c_int, ctypes.c_int]
    lib.located_allow.restype = None
    lib.located_allow.argtypes = [ptr, i64, ctypes.c_int, ctypes.c_char_p, i64]
    lib.located_ready.restype = ctypes.c_int
    lib.located_ready.argtypes = [ptr]
    lib.located_scan.restype = ctypes.POINTER(i64)
    lib.located_scan.argtypes = [ptr, ctypes.c_char_p, ctypes.c_char_p, i64, ctypes.POINTER(i64)]
    lib.located_walk.restype = ctypes.POINTER(i64)
    lib.located_walk.argtypes = [ptr, i64, ctypes.c_char_p, i64, ctypes.POINTER(i64)]
    lib.entropy_new.restype = ptr
    lib.entropy_new.argtypes = [
        ctypes.c_char_p,
        i64,
        ctypes.c_char_p,
        i64,
        ptr,
        ptr,
        i64,
        ctypes.c_double,
        ctypes.c_double,
        i64,
    ]
    lib.entropy_free.restype = None
    lib.entropy_free.argtypes = [ptr]
    lib.entropy_find.restype = ctypes.POINTER(i64)
    lib.entropy_find.argtypes = [ptr, ctypes.c_char_p, i64, ptr, i64, ptr, i64, ctypes.POINTER(i64)]
    lib.entropy_candidates.restype = ctypes.POINTER(i64)
    lib.entropy_candidates.argtypes = [ptr, ctypes.c_char_p, i64, ctypes.POINTER(i64)]
    lib.pii_new.restype = ptr
    lib.pii_new.argtypes = [ptr, ptr, ctypes.c_char_p, i64]
    lib.pii_free.restype = None
    lib.pii_free.argtypes = [ptr]
    lib.pii_find.restype = ctypes.POINTER(i64)
    lib.pii_find.argtypes = [ptr, ctypes.c_char_p, i64, ctypes.POINTER(i64)]
    lib.bulk_release.restype = None
    lib.bulk_release.argtypes = [ctypes.POINTER(i64)]
    return lib


@overload
def returned(fn, *args, as_list: Literal[True] = ...) -> list[int] | None: ...


@overload
def returned(fn, *args, as_list: Literal[False]) -> np.ndarray | None: ...


def returned(fn, *args, as_list: bool = True) -> list[int] | np.ndarray | None:
    """`fn(*args, &size)`, a library function that returns a malloc'd int64 array and writes
    its length to its last argument: the array as a list (or a numpy copy), freed; None
    where it returned NULL."""
    size = ctypes.c_int64(0)
    out = fn(*args, ctypes.byref(size))
    if not out:
        return None
    try:
        found = np.ctypeslib.as_array(out, shape=(max(size.value, 1),))[: size.value]
        return found.tolist() if as_list else found.copy()
    finally:
        lib = library()
        assert lib is not None  # `out` came from it
        lib.bulk_release(out)


class Owned:
    """Owns one object the library made (`_handle`), freed with the library's `FREE`
    function when this is collected."""

    __slots__ = ("_handle", "_lib")
    FREE = "bulk_free"

    def __init__(self, lib, handle: int):
        self._lib, self._handle = lib, handle

    def __del__(self):
        if self._handle:
            getattr(self._lib, self.FREE)(self._handle)
            self._handle = 0


def unavailable() -> str | None:
    """Why the bulk passes are off, or None when they are on."""
    return None if library() is not None else (_why_not[-1] if _why_not else "unknown")


# google-re2 options the system RE2 is given as well; a regex with any other option changed
# from its default keeps to live searches.
_DEFAULTS = re2.Options()
_COPIED = {"encoding", "max_mem", "case_sensitive", "never_capture", "log_errors"}
_OTHERS = [name for name in re2.Options.NAMES if name not in _COPIED]


class Bulk(Owned):
    """One google-re2 regex compiled again, with the same options, into the system RE2."""

    __slots__ = ()

    @classmethod
    def of(cls, regex) -> Bulk | None:
        lib = library()
        if lib is None or not isinstance(regex.pattern, bytes):
            return None
        opts = regex.options
        if any(getattr(opts, name) != getattr(_DEFAULTS, name) for name in _OTHERS):
            return None
        latin1 = int(opts.encoding == re2.Options.Encoding.LATIN1)
        handle = lib.bulk_compile(regex.pattern, len(regex.pattern), latin1, opts.max_mem, int(opts.case_sensitive))
        return cls(lib, handle) if handle else None

    def spans(self, data: bytes) -> list[int]:
        """Every match in `data` as a flat list s0, e0, s1, e1, ...: what `match_spans`
        yields from position 0, group 0 only."""
        out: list[int] = []
        buf = np.empty(2 * _CHUNK, np.int64)
        n = len(data)
        pos = 0
        while True:
            found = self._lib.bulk_spans(self._handle, data, n, pos, n, buf.ctypes.data, _CHUNK)
            out += buf[: 2 * found].tolist()
            if found < _CHUNK:
                return out
            s, e = out[-2], out[-1]
            pos = e if e > s else e + 1


class Cursor:
    """The matches of `regex` in `data` from a precomputed list (`spans`, flat), in the
    order a live search loop asks for them.

    `next(pos)` answers what `regex` searched from `pos` to the end would: the list holds the
    leftmost non-overlapping matches from 0, each next one searched from where the previous
    ended, so no match starts between one's end and the next's start. For `pos` between the
    two, the next listed match is the leftmost from `pos` too (the match RE2 picks at a start
    does not depend on where the search began: the whole text is the context either way).
    A `pos` inside a listed match (a caller that jumped back or into one) gets a live search.
    `pos` must not decrease between calls.
    """

    __slots__ = ("_regex", "_data", "_spans", "_i", "lives")

    def __init__(self, regex, data: bytes, spans: list[int]):
        self._regex, self._data, self._spans = regex, data, spans
        self._i = 0  # the first listed match not yet passed
        self.lives = 0  # live searches made (for the tests)

    def next(self, pos: int) -> tuple[int, int]:
        spans, i = self._spans, self._i
        n = len(spans)
        while i < n and spans[i] < pos:
            i += 2
        self._i = i
        if i == 0:
            after = 0
        else:
            s, e = spans[i - 2], spans[i - 1]
            after = e if e > s else e + 1  # where the search for match i began
        if pos >= after:
            return (spans[i], spans[i + 1]) if i < n else (-1, -1)
        self.lives += 1
        return self._regex._regexp.Match(_UNANCHORED, self._data, pos, len(self._data))[0]


def live_cursor(regex, data: bytes):
    """`next(pos)` by live search: the same answers as a Cursor, on the calling thread."""
    search = regex._regexp.Match
    n = len(data)
    return lambda pos: search(_UNANCHORED, data, pos, n)[0]


_executor: tuple[int, ThreadPoolExecutor] | None = None
_executor_lock = threading.Lock()


def _worker() -> ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        # A forked child inherits the pool but not its thread: work handed to it would wait
        # forever. Each process gets its own.
        if _executor is None or _executor[0] != os.getpid():
            _executor = (os.getpid(), ThreadPoolExecutor(max_workers=1, thread_name_prefix="assay-re2bulk"))
        return _executor[1]


class Prefetched:
    """The whole-text passes of one text, queued (in the order given) on the worker. A pass
    the worker has not started when the calling thread needs it is taken back and run on
    the calling thread: waiting for the worker to reach it would leave a core idle."""

    __slots__ = ("data", "_passes", "stolen")

    def __init__(self, data: bytes, passes: dict[int, tuple[Any, Future]]):
        self.data, self._passes = data, passes
        self.stolen = 0  # passes run on the calling thread (for the tests and the bench)

    def spans(self, key) -> list[int] | None:
        """The result of `key`'s pass, waiting for it; None if it was not prefetched, or if
        the pass failed (out of memory, say): the detector then searches live, since a way
        of going faster must never be a way of redacting less."""
        queued = self._passes.get(id(key))
        if queued is None:
            return None
        twin, future = queued
        try:
            if future.cancel():  # not started: run it here
                self.stolen += 1
                return twin.spans(self.data)
            return future.result()
        except Exception as exc:  # noqa: BLE001 - any failure falls back to the live search
            log.warning("a whole-text pass failed (%s); searching live", type(exc).__name__)
            self._passes.pop(id(key), None)
            return None

    def drop(self, key) -> None:
        """`key`'s pass will not be asked for: the worker skips it if not started."""
        queued = self._passes.pop(id(key), None)
        if queued is not None:
            queued[1].cancel()

    def cursor(self, regex):
        """`next(pos)` for `regex` over this text: from its matches, or live."""
        spans = self.spans(regex)
        if spans is None:
            return live_cursor(regex, self.data)
        return Cursor(regex, self.data, spans).next


def cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def prefetch(data: bytes, passes: list[tuple[object, Bulk | None]]) -> Prefetched | None:
    """Start the (regex, its Bulk twin) passes over `data` on the worker thread, in order, or
    None when the text is too short to gain from it, no twin is there, or this process has
    one CPU (`taskset -c 0`: the worker only took turns with this thread, 5% slower)."""
    if not takes(data) or library() is None or cores() < 2:
        return None
    live = [(regex, bulk) for regex, bulk in passes if bulk is not None]
    if not live:
        return None
    worker = _worker()
    return Prefetched(data, {id(regex): (bulk, worker.submit(bulk.spans, data)) for regex, bulk in live})


if __name__ == "__main__":  # `make install`: build once, so no gateway pays for it
    import sys

    try:
        print(build())
    except RuntimeError as exc:
        print(f"re2bulk: {exc}", file=sys.stderr)
        sys.exit(1)
