"""Canaries planted where a tool could print them come back only as placeholders.

The canaries are registered the way the gateway registers a run's secrets (environment, key
files, add_secret), then printed plain, base64'd at every alignment, hex'd, URL-encoded,
wrapped across lines, inside JSON and inside a stack trace. Not one of them may survive.
"""

from __future__ import annotations

import base64
import html
import json
import re
import traceback
import urllib.parse

import pytest

from assay.policies.redaction import known_secrets
from assay.policies.redaction.vault import PLACEHOLDER_RE

KINDS = ["aws", "github", "jwt", "generic", "password", "escapable", "pem"]


def _git_quoted(raw: bytes) -> str:
    """git's quoted path (core.quotePath): non-ASCII bytes in octal, quote and backslash escaped."""
    body = "".join(f"\\{b:03o}" if b >= 0x80 else ("\\" + chr(b) if chr(b) in '"\\' else chr(b)) for b in raw)
    return f'"{body}"'


def _go_json(value: str) -> str:
    """Go's encoding/json: <, > and & as \\u003c, \\u003e, \\u0026, non-ASCII left as is."""
    out = json.dumps(value, ensure_ascii=False)
    return out.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _encodings(value: str) -> dict[str, str]:
    raw = value.encode()
    out = {
        "plain": value,
        "hex": raw.hex(),
        "HEX": raw.hex().upper(),
        "url": urllib.parse.quote(value, safe=""),
        "url-plus": urllib.parse.quote_plus(value),
        "json": json.dumps({"config": {"token": value}}),  # ensure_ascii: non-ASCII as \\uXXXX
        "json-utf8": json.dumps(value, ensure_ascii=False),
        "json-go": _go_json(value),
        "json-php": json.dumps(value).replace("/", "\\/"),  # PHP's json_encode escapes /
        "json-in-json": json.dumps({"stdout": json.dumps({"token": value})}),
        "html": html.escape(value),
        "html-numeric": "".join(c if c.isalnum() and c.isascii() else f"&#{ord(c)};" for c in value),
        "bytes-repr": repr(raw),  # b'P\\xc3\\xa4...'
        "ascii": ascii(value),  # 'P\\xe4...', code points, not UTF-8 bytes
        "git-quoted": _git_quoted(raw),  # "P\\303\\244..."
        "re-escape": re.escape(value),  # every punctuation character behind a backslash
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


ESCAPED = (
    "json",
    "json-utf8",
    "json-go",
    "json-php",
    "json-in-json",
    "html",
    "html-numeric",
    "bytes-repr",
    "ascii",
    "git-quoted",
    "re-escape",
)


@pytest.mark.parametrize("kind", ["escapable", "password", "jwt", "pem"])
def test_escaped_forms_leave_nothing_of_the_value(redactor, canary, kind):
    """Escaped by JSON (Go's, PHP's, nested), HTML or repr, the whole value becomes the
    placeholder: what is left around it holds no letter or digit but the format's own."""
    value = canary[kind]
    redactor.add_secret(value, f"canary-{kind}")
    for name in ESCAPED:
        out = redactor.redact(_encodings(value)[name])
        left = PLACEHOLDER_RE.sub(b"", out.encode()).decode()
        for scaffold in ("config", "token", "stdout"):
            left = left.replace(scaffold, "")
        left = left.removeprefix("b'").removeprefix('b"')
        assert not any(c.isalnum() for c in left), f"{kind} in form {name}: {out!r}"


def _xxd(data: bytes) -> str:
    """xxd's default layout: offset, 16 bytes as hex in pairs of bytes, then as text."""
    lines = []
    for at in range(0, len(data), 16):
        row = data[at : at + 16]
        hexed = " ".join(row[i : i + 2].hex() for i in range(0, len(row), 2))
        lines.append(f"{at:08x}: {hexed:<39}  " + "".join(chr(b) if 32 <= b < 127 else "." for b in row))
    return "\n".join(lines)


def _hexdump_c(data: bytes) -> str:
    """hexdump -C's layout: offset, 8 + 8 bytes as hex, the text between bars."""
    lines = []
    for at in range(0, len(data), 16):
        row = data[at : at + 16]
        left, right = " ".join(f"{b:02x}" for b in row[:8]), " ".join(f"{b:02x}" for b in row[8:])
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in row)
        lines.append(f"{at:08x}  {left:<23}  {right:<23}  |{text}|")
    return "\n".join(lines)


@pytest.mark.parametrize("dump", [_xxd, _hexdump_c])
@pytest.mark.parametrize("kind", ["aws", "github", "generic", "password", "escapable"])
def test_a_dumped_canary_shows_no_long_piece(redactor, canary, kind, dump):
    """A dump shows a value 16 bytes a line, as hex and as text, with offsets between the
    lines. At every offset of the value in the file, no line of the redacted dump may hold,
    in either column, a piece of it that holds one of its matched windows (any 11 bytes do,
    unless the window there is plain text like "localhost")."""
    value = canary[kind]
    raw = value.encode()
    redactor.add_secret(value, f"canary-{kind}")
    matched = known_secrets.windows(raw)
    assert len(matched) >= len(raw) // (2 * known_secrets.STRIDE)  # random tokens: most windows
    pieces = {raw[i : i + n] for n in range(8, 17) for i in range(len(raw) - n + 1)}
    pieces = {p for p in pieces if any(w in p for w in matched)}
    for offset in range(16):
        out = redactor.redact(dump(b"x" * offset + raw + b"\n"))
        for line in out.splitlines():
            flat = "".join(line.split()).lower()
            for piece in pieces:
                assert piece.hex() not in flat, f"{kind} at offset {offset}: hex of {piece!r} in {line!r}"
                assert piece.decode("latin-1") not in line, f"{kind} at offset {offset}: {piece!r} in {line!r}"


def test_plain_pieces_of_a_registered_value_stay_readable(redactor):
    """Only specific pieces are matched: a registered database URL does not blank out its
    host, port or database elsewhere, and a long lower-case word stays a word."""
    redactor.add_secret("postgresql://assay:Hunter2Hunter2@localhost:5432/assay_db", "env-DATABASE_URL")
    redactor.add_secret("correcthorsebatterystaple-Tr0ub4dor", "registered")
    text = "serving on http://localhost:5432/assay_dbx; correcthorsebatterystaple is a password meme"
    assert redactor.redact(text) == text
    # a specific piece of the same values is taken: the password half of the second
    assert "Tr0ub4dor" not in redactor.redact("hint: staple-Tr0ub4dor")


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
