"""Inputs built to make each kind of rule backtrack are redacted in time linear in their size.

Each case is timed at n and 4n bytes (CPU time of this process, best of three, so other jobs
on a busy machine count for little); linear time gives a ratio near 4 and quadratic near 16,
so the bound is 8. No absolute seconds. Both ways of running the whole-text passes are timed,
each at both sizes: on the calling thread, and ahead on a second one (re2bulk).
"""

from __future__ import annotations

import time

import pytest

from assay.policies.redaction import Redactor, re2bulk

N = 40_000

CASES = {
    "letters-then-bang": lambda n: "a" * n + "!",
    "generic-assignment-no-value": lambda n: "api_key = " + "a" * n,
    "generic-keyword-repeated": lambda n: "secret_" * (n // 7),
    "key-separators": lambda n: "password" + " =" * (n // 2),
    "prefix-token-too-long": lambda n: "ghp_" + "A" * n,
    "aws-almost": lambda n: ("AKIA" + "A" * 15 + "!") * (n // 20),
    "pem-without-end": lambda n: "-----BEGIN RSA PRIVATE KEY-----\n" + ("A" * 63 + "\n") * (n // 64),
    "pem-headers-repeated": lambda n: "-----BEGIN PRIVATE KEY-----" * (n // 27),
    "curl-headers": lambda n: "curl " + " -H 'x'" * (n // 7),
    "k8s-secret-yaml": lambda n: "kind: secret\n" + "data:\n" * (n // 6),
    "jwt-almost": lambda n: "eyJ" + "a" * n + ".ey",
    "base64-run": lambda n: "Zx8kQ2mN7pL4vB9c" * (n // 16),
    "digits-and-dashes": lambda n: "4-" * (n // 2),
    "dotted-numbers": lambda n: "1." * (n // 2),
    "colons": lambda n: ":" * n,
    "hex-colons": lambda n: "a:" * (n // 2),
    "at-signs": lambda n: "a@" * (n // 2),
    "email-local-part": lambda n: "a." * (n // 2) + "@",
    "iban-almost": lambda n: "GB82 " + "WEST " * (n // 5),
    "phone-almost": lambda n: "+1 " + "(555) " * (n // 6),
    "newlines": lambda n: "\n" * n,
    "whitespace-mix": lambda n: " \t\r\n" * (n // 4),
    "url-escapes": lambda n: "%2" * (n // 2),
    "backslash-n": lambda n: "\\n" * (n // 2),
    # escapes a known value may be written with (any run of backslashes), and a dump's hex
    "backslashes": lambda n: "\\" * n,
    "escaped-escapes": lambda n: "\\\\u00" * (n // 5),
    "html-entities": lambda n: "&#x" * (n // 3),
    "hex-pairs": lambda n: "68 75 6e 74 " * (n // 12),
    "near-known-secret": lambda n: "hunter2-Sup3r " * (n // 14),
    # the literal search: one literal everywhere, a short one, a keyword without its literal
    "literal-repeated": lambda n: "glpat-" * (n // 6),
    "short-literal-repeated": lambda n: "s." * (n // 2),
    "keyword-repeated": lambda n: "private " * (n // 8),
    # many findings, and many placeholders, on one line: line bounds must not be searched anew
    "findings-on-one-line": lambda n: "api_key=Zq8Wn4Lk2Jh6Gf1Ds5Ap9Om3Iu7Ye2; " * (n // 41),
    "addresses-on-one-line": lambda n: "1.2.3.4 " * (n // 8),
}


def _best(redactor: Redactor, text: str) -> float:
    # The process's CPU time, which counts the second thread's passes too.
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        redactor.redact(text)
        best = min(best, time.process_time() - t0)
    return best


@pytest.fixture(params=["one-thread", "re2bulk"])
def passes(request, monkeypatch, need):
    """Every text takes one path, whatever its size."""
    if request.param == "one-thread":
        monkeypatch.setattr(re2bulk, "prefetch", lambda data, passes: None)
    else:
        need(re2bulk.library() is not None, f"re2bulk is not built ({re2bulk.unavailable()})")
        monkeypatch.setattr(re2bulk, "MIN_BYTES", 0)
    return request.param


@pytest.mark.parametrize("case", sorted(CASES))
def test_pathological_input_is_linear(rules, case, passes):
    redactor = Redactor(rules)
    redactor.add_secret("hunter2-Sup3r-s3cret", "registered")  # the known-secret regex is in play too
    redactor.add_secret('p"w<&>/\\-ümlaut-7Q', "registered")  # and its escaped forms
    make = CASES[case]
    small, large = make(N), make(4 * N)
    _best(redactor, small)  # warm the DFA caches
    t_small, t_large = _best(redactor, small), _best(redactor, large)
    ratio = t_large / max(t_small, 1e-4)
    assert ratio < 8, f"{case}: {t_small * 1e3:.1f} ms at n, {t_large * 1e3:.1f} ms at 4n (x{ratio:.1f})"
