"""Shared canaries for the redaction tests: fresh random values each session, built in the
documented shapes of real tokens, so no test depends on a value the detectors were tuned on."""

from __future__ import annotations

import base64
import random
import string

import pytest

from assay.policies.redaction import Redactor, default_rules
from assay.policies.redaction.entropy import entropy

_rng = random.Random()  # unseeded on purpose: canaries differ every run
ALNUM = string.ascii_letters + string.digits


def rand(alphabet: str, n: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


def aws_key() -> str:
    # gitleaks' aws-access-token rule wants entropy >= 3: a real key's 16 random characters of
    # 32 read about 3.6, and about one draw in 5000 falls under 3 (AKIAHZ5HYJKA2JYJYHHK,
    # 2.97, failed a CI run). Such a draw is outside what the rule claims to catch; draw again.
    while True:
        key = "AKIA" + rand(string.ascii_uppercase + "234567", 16)
        if entropy(key.encode()) >= 3.2:
            return key


def canaries() -> dict[str, str]:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()
    body = base64.urlsafe_b64encode(('{"sub":"' + rand(ALNUM, 12) + '","admin":true}').encode()).rstrip(b"=").decode()
    pem_body = rand(string.ascii_letters + string.digits + "+/", 64 * 12)
    pem = (
        "-----BEGIN RSA PRIVATE KEY-----\n"
        + "\n".join(pem_body[i : i + 64] for i in range(0, len(pem_body), 64))
        + "\n-----END RSA PRIVATE KEY-----"
    )
    return {
        "aws": aws_key(),
        "github": "ghp_" + rand(ALNUM, 36),
        "jwt": f"{header}.{body}.{rand(ALNUM + '-_', 43)}",
        "generic": rand(ALNUM, 24) + "7",
        "password": "Tr0ub4dor&3-" + rand(ALNUM, 8),
        # characters every text encoder escapes: JSON's quote, backslash and slash, HTML's
        # <, >, &, ', and non-ASCII letters (\u00fc in Python's json.dumps)
        "escapable": 'Pä"ss\\wö<r>d/' + rand(ALNUM, 10) + "'&ü€",
        "pem": pem,
    }


@pytest.fixture
def canary() -> dict[str, str]:
    """One fresh canary of each kind."""
    return canaries()


@pytest.fixture(scope="session")
def rules():
    return default_rules()


@pytest.fixture
def redactor(rules):
    return Redactor(rules)
