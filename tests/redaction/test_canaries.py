"""Canaries planted where a tool could print them come back only as placeholders.

The canaries are registered the way the gateway registers a run's secrets (environment, key
files, add_secret), then printed plain, base64'd at every alignment, hex'd, URL-encoded,
wrapped across lines, inside JSON and inside a stack trace. Not one of them may survive.
"""

from __future__ import annotations

import base64
import json
import traceback
import urllib.parse

import pytest

from assay.policies.vault import PLACEHOLDER_RE

KINDS = ["aws", "github", "jwt", "generic", "password", "pem"]


def _encodings(value: str) -> dict[str, str]:
    raw = value.encode()
    out = {
        "plain": value,
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "url": urllib.parse.quote(value, safe=""),
        "url-plus": urllib.parse.quote_plus(value),
        "json": json.dumps({"config": {"token": value}}),
    }
    for k in range(3):  # the value at each of base64's three alignments inside a larger blob
        blob = b"p" * k + b"prefix:" + raw + b":suffix"
        out[f"base64-{k}"] = base64.b64encode(blob).decode()
        out[f"base64url-{k}"] = base64.urlsafe_b64encode(blob).decode()
    for col in (1, 5, 13, 64):  # wrapped at various columns, as terminals and PEM tools do
        out[f"wrapped-{col}"] = "\n".join(value[i : i + col] for i in range(0, len(value), col))
    out["split-spaces"] = value[: len(value) // 2] + " \t " + value[len(value) // 2 :]
    out["json-escaped-newline"] = json.dumps(value[:7] + "\n" + value[7:])
    return out


def _forbidden(value: str) -> list[str]:
    """Substrings whose presence in the output would mean the canary leaked."""
    raw = value.encode()
    squashed = "".join(value.split())
    out = [squashed, raw.hex(), base64.b64encode(raw).decode().rstrip("=")]
    if len(squashed) > 24:  # any long piece of it counts as a leak too
        out += [squashed[i : i + 24] for i in range(0, len(squashed) - 24, 12)]
    return out


def _leaks(output: str, value: str) -> list[str]:
    flat = "".join(output.split())
    return [f for f in _forbidden(value) if f in output or f in flat]


@pytest.mark.parametrize("kind", KINDS)
def test_registered_canary_never_survives_any_encoding(redactor, canary, kind):
    value = canary[kind]
    assert redactor.add_secret(value, f"canary-{kind}")
    for name, shown in _encodings(value).items():
        text = f"tool output before\n{shown}\ntool output after"
        out = redactor.redact(text)
        assert not _leaks(out, value), f"{kind} leaked in form {name}: {out!r}"
        assert PLACEHOLDER_RE.search(out.encode()), f"{kind} in form {name} left no placeholder"


@pytest.mark.parametrize("kind", KINDS)
def test_canary_in_a_stack_trace_is_redacted(redactor, canary, kind):
    value = canary[kind]
    redactor.add_secret(value, f"canary-{kind}")
    try:
        raise RuntimeError(f"connect failed with credentials {value!r}")
    except RuntimeError:
        trace = traceback.format_exc()
    out = redactor.redact(trace)
    assert not _leaks(out, value)
    assert "RuntimeError: connect failed with credentials" in out  # the context stays readable


def test_canaries_from_the_environment_and_key_files(redactor, canary, tmp_path):
    env = {
        "AWS_ACCESS_KEY_ID": canary["aws"],
        "GITHUB_TOKEN": canary["github"],
        "DB_PASSWORD": canary["password"],
        "MY_ODD_NAME": canary["generic"],
        "ASSAY_SECRET_ENV": "MY_ODD_NAME",
        "HOME": "/home/someone",
        "PATH": "/usr/local/bin:/usr/bin:/bin",
    }
    assert redactor.add_environment(env) == 4
    key = tmp_path / "id_rsa"
    key.write_text(canary["pem"] + "\n")
    assert redactor.add_key_file(key) >= 1
    body = "".join(canary["pem"].splitlines()[1:-1])
    rewrapped = "\n".join(body[i : i + 76] for i in range(0, len(body), 76))
    text = "\n".join(
        [
            f"env: AWS_ACCESS_KEY_ID={canary['aws']} GITHUB_TOKEN={canary['github']}",
            f"password is {canary['password']} and odd is {canary['generic']}",
            canary["pem"],
            "the key body re-wrapped at 76 columns:",
            rewrapped,
            "HOME=/home/someone",
        ]
    )
    out = redactor.redact(text)
    for kind in ("aws", "github", "password", "generic", "pem"):
        assert not _leaks(out, canary[kind]), kind
    assert "HOME=/home/someone" in out  # not every variable is a secret


@pytest.mark.parametrize("kind", ["aws", "github", "jwt", "pem"])
def test_unregistered_tokens_are_caught_by_the_rules(redactor, canary, kind):
    """Secrets nobody registered, found by gitleaks' rules, plain and embedded in JSON."""
    value = canary[kind]
    for text in (f"found: {value}\n", json.dumps({"result": {"stdout": f"key={value}\n"}})):
        out = redactor.redact(text)
        assert not _leaks(out, value), (kind, out)


def test_generic_api_key_assignment_is_caught(redactor, canary):
    value = canary["generic"]
    for text in (f'api_key = "{value}"\n', f"SECRET_TOKEN: {value}\n", json.dumps({"api_key": value})):
        out = redactor.redact(text)
        assert value not in out, out


def test_redact_json_reaches_every_string(redactor, canary):
    redactor.add_secret(canary["password"], "db")
    doc = {
        "stdout": f"login with {canary['password']}",
        "nested": [{"k": canary["github"]}, 3, None, True],
        canary["aws"]: "a secret used as a key",
    }
    out = redactor.redact_json(doc)
    flat = json.dumps(out)
    for kind in ("password", "github", "aws"):
        assert canary[kind] not in flat
    assert out["nested"][1:] == [3, None, True]
