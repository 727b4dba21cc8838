"""Redaction at the way in (invariant 2), attacked as a hostile agent would: a registered token
and an AWS key id that only the rules know sit in a workspace file; code in the sandbox prints
each in 32 encodings an output-side redactor could never enumerate (every character as \\u00XX,
zero-width or soft-hyphen characters between the letters, fullwidth and Cyrillic lookalikes,
xxd -i lists, short separated pieces, base32, decimal, XOR, reversed, ROT13, halves on two
lines ...). Through `assay mcp -w` (a real server process, and sessions on bwrap and Docker) and
through `assay run`: none of the 64 forms reaches the client, the ledger or the user's folder,
because the sandbox only ever held placeholders. A benign workload's output is unchanged, and a
workspace of mode 0700 works."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import string

import pytest
from tools_helpers import ledger_bytes, open_session, sdk_client, server_env

pytestmark = pytest.mark.anyio

TOKEN = "tok_" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(28))
AWS_ID = "AKIA" + "".join(secrets.choice(string.ascii_uppercase + "234567") for _ in range(16))
ENV = {"DEPLOY_TOKEN": TOKEN}  # registered: a secret-looking variable of the server's environment

# One encoder, run in the sandbox on what the file holds and here on the raw values.
ENCODER = r"""
import base64, codecs

def forms(c):
    b = c.encode()
    half = len(c) // 2
    return {
        "plain": c,
        "json_u": "".join("\\u%04x" % ord(x) for x in c),
        "json_U": "".join("\\u%04X" % ord(x) for x in c),
        "zero_width": "\u200b".join(c),
        "soft_hyphen": "\u00ad".join(c),
        "joiner": "\u200d".join(c),
        "fullwidth": "".join(chr(ord(x) + 0xFEE0) if 0x21 <= ord(x) <= 0x7E else x for x in c),
        "cyrillic": c.translate(str.maketrans("aeopcxyAEOPCXBHKMT", "аеорсхуАЕОРСХВНКМТ")),
        "xxd_i": ", ".join("0x%02x" % x for x in b),
        "comma": ",".join(c),
        "pipe": "|".join(c),
        "pieces3": ",".join(c[i:i + 3] for i in range(0, len(c), 3)),
        "base32": base64.b32encode(b).decode(),
        "decimal": " ".join(str(x) for x in b),
        "octal": "".join("\\%03o" % x for x in b),
        "xor": bytes(x ^ 0x5A for x in b).hex(),
        "reversed": c[::-1],
        "rot13": codecs.encode(c, "rot13"),
        "halves": c[:half] + "\n" + c[half:],
        "hex": b.hex(),
        "HEX": b.hex().upper(),
        "base64": base64.b64encode(b).decode(),
        "base85": base64.b85encode(b).decode(),
        "url_all": "".join("%%%02X" % x for x in b),
        "html_dec": "".join("&#%d;" % x for x in b),
        "html_hex": "".join("&#x%x;" % x for x in b),
        "spaced": " ".join(c),
        "py_list": str(list(c)),
        "bytes_repr": repr(b),
        "utf16": c.encode("utf-16-le").hex(),
        "char_codes": str([ord(x) for x in c]),
        "every_other": c[::2] + "~" + c[1::2],
    }
"""
PRINTER = (
    ENCODER
    + r"""
import re
text = open("deploy.env").read()
for name, value in re.findall(r"^(\w+)=(.*)$", text, re.M):
    for form, shown in forms(value).items():
        print(name, form, shown)
print("benign", open("notes.txt").read().strip())
"""
)
BENIGN = "matrix sizes 512 x 1024, fp32, 3 warm-up runs"


def _forms() -> dict[str, str]:
    scope: dict = {}
    exec(ENCODER, scope)  # noqa: S102 - our own encoder, the same text the sandbox runs
    out = {}
    for label, value in (("token", TOKEN), ("aws", AWS_ID)):
        for form, shown in scope["forms"](value).items():
            out[f"{label}:{form}"] = shown
    assert len(out) == 64
    return out


def _leaks(blob: str) -> list[str]:
    """The forms of either canary found in `blob` (every line of a multi-line form)."""
    found = []
    for name, shown in _forms().items():
        parts = [p for p in shown.split("\n") if len(p) >= 8] or [shown]
        if all(p in blob for p in parts):
            found.append(name)
    return found


@pytest.fixture
def user_folder(tmp_path, monkeypatch):
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "deploy.env").write_text(f"DEPLOY_TOKEN={TOKEN}\nAWS_ACCESS_KEY_ID={AWS_ID}\n")
    (folder / "notes.txt").write_text(BENIGN + "\n")
    return folder


@pytest.mark.parametrize("backend", ["bwrap", "docker"])
async def test_no_encoding_of_a_planted_secret_reaches_the_client(user_folder, signed_home, need, backend):
    from assay.sandbox import bwrap, docker

    ok, why = (bwrap if backend == "bwrap" else docker).availability()
    need(ok, f"{backend} unavailable: {why}")
    with open_session(user_folder, sandbox_backend=backend) as s:
        async with sdk_client(s) as c:
            printed = await c.call_tool("exec", {"command": ["python", "-c", PRINTER], "timeout_s": 30})
            read = await c.call_tool("read_file", {"path": "deploy.env"})
    out = printed.structured_content
    assert out is not None and out["exit_code"] == 0, printed.content[0].text
    # The code ran on the file as the sandbox has it: placeholders, printed in every form.
    assert out["stdout"].count("DEPLOY_TOKEN plain [[SECRET:") == 1
    assert f"benign {BENIGN}" in out["stdout"]  # a benign workload's output, unchanged
    seen = json.dumps([printed.model_dump(mode="json"), read.model_dump(mode="json")], ensure_ascii=False)
    assert _leaks(seen) == []
    assert _leaks(ledger_bytes(signed_home).decode("utf-8", "replace")) == []
    # The user's own file still holds the user's own values.
    assert (user_folder / "deploy.env").read_text() == f"DEPLOY_TOKEN={TOKEN}\nAWS_ACCESS_KEY_ID={AWS_ID}\n"


def test_through_a_real_assay_mcp_server(user_folder, signed_home, need):
    from tools_helpers import StdioWire

    need(shutil.which("bwrap") is not None, "bubblewrap is not installed")
    env = server_env(ASSAY_HOME=str(signed_home), **ENV)
    with StdioWire(["--workspace", str(user_folder), "--sandbox", "bwrap"], env=env) as w:
        w.initialize()
        line, _ = w.call("exec", {"command": ["python", "-c", PRINTER], "timeout_s": 30})
        reply = line.obj
        raw = b"".join(seen.raw for seen in w.seen)
    text = raw.decode("utf-8", "replace")
    assert "DEPLOY_TOKEN plain [[SECRET:" in json.dumps(reply)
    assert _leaks(text) == [] and _leaks(json.dumps(reply, ensure_ascii=False)) == []


def test_edits_come_back_to_the_folder_with_the_users_own_secrets_only(user_folder, signed_home, need):
    """The agent edits the redacted file and writes a new one with a placeholder in it: the
    user's file keeps its own secrets where they stood, and the new file keeps the placeholder
    (no secret is ever written where the user did not have it)."""
    import anyio

    need(shutil.which("bwrap") is not None, "bubblewrap is not installed")

    async def edit():
        with open_session(user_folder) as s:
            async with sdk_client(s) as c:
                shown = (await c.call_tool("read_file", {"path": "deploy.env"})).structured_content["content"]
                edited = shown + "REGION=eu-west-1\n"
                assert (await c.call_tool("write_file", {"path": "deploy.env", "content": edited})).is_error is False
                copied = shown.splitlines()[0]
                assert (await c.call_tool("write_file", {"path": "copy.env", "content": copied})).is_error is False
                made = await c.call_tool("exec", {"command": ["python", "-c", "open('built.txt','w').write('ok')"]})
                assert made.structured_content["exit_code"] == 0
        return copied

    copied = anyio.run(edit)
    assert (user_folder / "deploy.env").read_text() == (
        f"DEPLOY_TOKEN={TOKEN}\nAWS_ACCESS_KEY_ID={AWS_ID}\nREGION=eu-west-1\n"
    )
    assert (user_folder / "copy.env").read_text() == copied and TOKEN not in copied and "[[SECRET:" in copied
    assert (user_folder / "built.txt").read_text() == "ok"


async def test_a_workspace_of_mode_0700_works(user_folder, signed_home, need):
    need(shutil.which("bwrap") is not None, "bubblewrap is not installed")
    os.chmod(user_folder, 0o700)
    with open_session(user_folder) as s:
        async with sdk_client(s) as c:
            r = await c.call_tool("exec", {"command": ["python", "-c", "print(open('notes.txt').read().strip())"]})
    assert r.structured_content["exit_code"] == 0, r.content[0].text
    assert r.structured_content["stdout"].strip() == BENIGN
