"""The redaction half of bench/gateway.py: assay's redaction against detect-secrets, same corpus.

Both tools see the same labelled corpus (bench/redaction_corpus.py) in the same process.
assay: one run's Redactor with the whole gitleaks rule set, PII and entropy detectors and the
corpus' known values registered; throughput is the median of several redactions of the whole
corpus after one warm-up. detect-secrets: its default plugins and filters scanning the corpus
as a file (`scan_file`, line by line, the way its CLI does). Each figure is also given in
CPU time (`*_cpu`), which other jobs on a shared host do not inflate: the process's for assay,
whose whole-text passes run on a second thread (policies/redaction/re2bulk.py), so both threads count.
The same redactor is timed two other ways in the same run, taking turns with the first:
with every pass on one thread (`redaction_mb_per_s_one_thread`: what the second core buys),
and as without re2bulk's library (`redaction_mb_per_s_without_library`: every search from
Python, one thread). The three must write the same text, or the bench stops.

Recall is over planted in-the-wild secrets (family "secret"); assay is held to the stricter
test. An item counts for assay only if its value is gone from the output and >= 90% of its
characters were inside redacted spans; it counts for detect-secrets if any finding on one of
its lines overlaps it at all (the private-key plugin reports only the BEGIN line, so a key
counts when its block's BEGIN line is reported).
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from redaction_corpus import Corpus, Label, generate  # noqa: E402

from assay.policies.redaction import (  # noqa: E402
    Redactor,
    default_rules,
    re2bulk,  # noqa: E402
)


def _covered(label: Label, spans: list[tuple[int, int]]) -> float:
    inside = 0
    for s, e in spans:
        lo, hi = max(s, label.start), min(e, label.end)
        if hi > lo:
            inside += hi - lo
    return inside / max(1, label.end - label.start)


@contextmanager
def one_thread():
    """Redaction with every pass on the calling thread: no worker, the located rules still in
    the library."""
    original = re2bulk.prefetch
    re2bulk.prefetch = lambda data, passes: None
    try:
        yield
    finally:
        re2bulk.prefetch = original


def _once(redactor: Redactor, text: str, times: list, cpu: list) -> str:
    t0, c0 = time.perf_counter(), time.process_time()
    out = redactor.redact(text)
    times.append(time.perf_counter() - t0)
    cpu.append(time.process_time() - c0)
    return out


def _timed(redactor: Redactor, text: str, repeats: int) -> tuple[list[float], list[float], str]:
    out = redactor.redact(text)  # warm-up: compiles the known-secret regex, fills DFA caches
    times, cpu = [], []
    for _ in range(repeats):
        out = _once(redactor, text, times, cpu)
    return times, cpu, out


def measure_assay(corpus: Corpus, repeats: int = 11) -> dict:
    rules = default_rules()
    redactor = Redactor(rules)
    for value in corpus.known_values:
        redactor.add_secret(value, "known")
    mb = len(corpus.text.encode()) / 1e6
    # The three ways take turns, so a slow spell of a shared host falls on all of them.
    ways = {"bulk": (nullcontext, [], []), "one": (one_thread, [], []), "python": (re2bulk.python_only, [], [])}
    outputs = set()
    for way, _, _ in ways.values():
        with way():
            # warm-up: compiles the known-secret regex, fills DFA caches
            outputs.add(redactor.redact(corpus.text))
    if len(outputs) != 1:
        raise SystemExit("the three ways of redacting wrote different text: a bug, not a figure")
    for _ in range(repeats):
        for way, times, cpu in ways.values():
            with way():
                out = _once(redactor, corpus.text, times, cpu)
    times, cpu = ways["bulk"][1:]
    single, single_cpu = ways["one"][1:]
    python, python_cpu = ways["python"][1:]
    out = redactor.redact(corpus.text)
    spans = [(s.start, s.end) for s in redactor.find(corpus.text)]
    found: dict[str, list[int]] = {}
    for label in corpus.labels:
        ok = _covered(label, spans) >= 0.9 and label.value not in out
        found.setdefault(label.family, []).append(int(ok))
    secret_labels = [lb for lb in corpus.labels if lb.family == "secret"]
    missed = sorted({lb.kind for lb in secret_labels if not (_covered(lb, spans) >= 0.9 and lb.value not in out)})
    labelled = [(lb.start, lb.end) for lb in corpus.labels]
    false_spans = sum(1 for s, e in spans if not any(min(e, le) > max(s, ls) for ls, le in labelled))
    return {
        "redaction_mb_per_s": round(mb / statistics.median(times), 1),
        "redaction_mb_per_s_best": round(mb / min(times), 1),
        "redaction_mb_per_s_cpu": round(mb / statistics.median(cpu), 1),
        "redaction_engine": "re2bulk: located rules in its library, whole-text passes on a second thread"
        if re2bulk.unavailable() is None
        else f"Python, one thread ({re2bulk.unavailable()})",
        "redaction_mb_per_s_one_thread": round(mb / statistics.median(single), 1),
        "redaction_mb_per_s_one_thread_cpu": round(mb / statistics.median(single_cpu), 1),
        "redaction_mb_per_s_without_library": round(mb / statistics.median(python), 1),
        "redaction_mb_per_s_without_library_cpu": round(mb / statistics.median(python_cpu), 1),
        "recall": round(sum(found.get("secret", [])) / max(1, len(found.get("secret", []))), 4),
        "known_secret_recall": round(sum(found.get("known", [])) / max(1, len(found.get("known", []))), 4),
        "pii_recall": round(sum(found.get("pii", [])) / max(1, len(found.get("pii", []))), 4),
        "missed_secret_kinds": missed,
        "unlabelled_redactions": false_spans,
        "rules_loaded": rules.loaded,
        "rules_total": rules.total,
        "rules_rejected": sorted(rules.rejected),
    }


def measure_detect_secrets(corpus: Corpus) -> dict:
    from detect_secrets.core.scan import scan_file
    from detect_secrets.settings import default_settings

    line_starts = [0]
    for i, ch in enumerate(corpus.text):
        if ch == "\n":
            line_starts.append(i + 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tool_output.txt")
        Path(path).write_text(corpus.text)
        with default_settings():
            t0, c0 = time.perf_counter(), time.thread_time()
            findings = list(scan_file(path))
            elapsed = time.perf_counter() - t0
            elapsed_cpu = time.thread_time() - c0
    by_line: dict[int, list[str]] = {}
    for f in findings:
        by_line.setdefault(f.line_number, []).append(f.secret_value or "")
    import bisect

    hits = []
    for label in corpus.labels:
        if label.family != "secret":
            continue
        first = bisect.bisect_right(line_starts, label.start)  # 1-based line of the start
        last = bisect.bisect_right(line_starts, max(label.start, label.end - 1))
        ok = False
        lines = range(first - 1 if label.kind == "private-key" else first, last + 1)
        for ln in lines:
            line_text = corpus.text[
                line_starts[ln - 1] : line_starts[ln] if ln < len(line_starts) else len(corpus.text)
            ]
            for value in by_line.get(ln, []):
                if label.kind == "private-key" and ln == first - 1:
                    ok = True
                    break
                at = line_text.find(value) if value else -1
                if at == -1:
                    continue
                s = line_starts[ln - 1] + at
                if min(s + len(value), label.end) > max(s, label.start):
                    ok = True
                    break
            if ok:
                break
        hits.append(int(ok))
    mb = len(corpus.text.encode()) / 1e6
    return {
        "detect_secrets_mb_per_s": round(mb / elapsed, 3),
        "detect_secrets_mb_per_s_cpu": round(mb / elapsed_cpu, 3),
        "detect_secrets_recall": round(sum(hits) / max(1, len(hits)), 4),
        "detect_secrets_findings": len(findings),
    }


def machine() -> dict:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    }


def redaction_figures(size: int = 1_000_000, seed: int = 20251003, repeats: int = 11) -> dict:
    """The redaction part of the gateway benchmark, as one flat dict."""
    load_before = round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None
    corpus = generate(size=size, seed=seed)
    assay = measure_assay(corpus, repeats=repeats)
    ds = measure_detect_secrets(corpus)
    figures = {
        "corpus_bytes": len(corpus.text.encode()),
        "corpus_seed": seed,
        "planted": {fam: sum(1 for lb in corpus.labels if lb.family == fam) for fam in ("secret", "known", "pii")},
        **assay,
        **ds,
    }
    figures["vs_detect_secrets_speed_ratio"] = round(
        assay["redaction_mb_per_s"] / max(ds["detect_secrets_mb_per_s"], 1e-9), 1
    )
    # The same figures in CPU time: on a shared host, wall time also counts the time other jobs
    # held the CPU. assay's counts both its threads, so this ratio is per CPU-second.
    figures["vs_detect_secrets_speed_ratio_cpu"] = round(
        assay["redaction_mb_per_s_cpu"] / max(ds["detect_secrets_mb_per_s_cpu"], 1e-9), 1
    )
    figures["clean_text_mb_per_s"], figures["clean_text_mb_per_s_cpu"] = clean_throughput(size, seed, repeats)
    figures["load_avg_1m_before"] = load_before
    return figures


def clean_throughput(size: int, seed: int, repeats: int) -> tuple[float, float]:
    """The same kinds of filler with nothing planted: most tool output looks like this.
    (wall, CPU) MB/s, medians."""
    text = generate(size=size, seed=seed, secret_every=10**12).text
    redactor = Redactor(default_rules())
    times, cpu, _ = _timed(redactor, text, repeats)
    mb = len(text.encode()) / 1e6
    return round(mb / statistics.median(times), 1), round(mb / statistics.median(cpu), 1)


if __name__ == "__main__":
    import json

    print(json.dumps({"redaction": redaction_figures(), "machine": machine()}, indent=2))
