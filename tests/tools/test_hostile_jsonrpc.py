"""Malformed JSON-RPC over stdio against one real `assay mcp` process.

The server may answer a bad message with an error or ignore it; it must never crash, never
hang (a ping right after each probe is answered), never write anything but JSON-RPC on
stdout, never run a tool for a message it could not parse, and exit cleanly at EOF.
"""

from __future__ import annotations

import json
import time

import pytest
from tools_helpers import StdioWire, run_rows, server_env

BIG = 20 * 1024 * 1024


def req(id, method, params=None, **extra) -> bytes:
    msg = {"jsonrpc": "2.0", "id": id, "method": method, **extra}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg).encode()


def call(id, name, arguments) -> bytes:
    return req(id, "tools/call", {"name": name, "arguments": arguments})


# (label, bytes, id whose reply must be an error, or None when ignoring is fine)
PROBES = [
    ("garbage", b"garbage", None),
    ("open brace", b"{", None),
    ("empty batch", b"[]", None),
    ("batch of numbers", b"[1,2,3]", None),
    ("null", b"null", None),
    ("number", b"42", None),
    ("string", b'"tools/list"', None),
    ("no method no id", b'{"jsonrpc":"2.0"}', None),
    ("id without method", b'{"jsonrpc":"2.0","id":101}', None),
    ("method not a string", b'{"jsonrpc":"2.0","id":102,"method":5}', None),
    ("jsonrpc 1.0", b'{"jsonrpc":"1.0","id":103,"method":"tools/list"}', None),
    ("no jsonrpc field", b'{"id":104,"method":"tools/list"}', None),
    ("tool name a number", call(105, 5, {}), 105),
    ("arguments a string", req(106, "tools/call", {"name": "read_file", "arguments": "path=x"}), 106),
    ("params a list", req(107, "tools/call", ["read_file", {}]), None),
    ("no params", req(108, "tools/call"), 108),
    ("unknown method", req(109, "tools/destroy", {}), 109),
    ("id an object", req({"a": 1}, "tools/list"), None),
    ("id a list", req([1], "tools/list"), None),
    ("id null", req(None, "tools/list"), None),
    ("id a float", req(1.5, "tools/list"), None),
    ("id 1 MB long", req("i" * (1 << 20), "tools/list"), None),
    ("invalid utf-8", b'{"jsonrpc":"2.0","id":110,"method":"tools/list","x":"\xff\xfe"}', None),
    ("nul in method", b'{"jsonrpc":"2.0","id":111,"method":"tools/list\\u0000"}', None),
    ("raw nul bytes", b"\x00\x00\x00", None),
    ("a response sent to the server", b'{"jsonrpc":"2.0","id":5,"result":{}}', None),
    ("an error sent to the server", b'{"jsonrpc":"2.0","id":6,"error":{"code":1,"message":"x"}}', None),
    (
        "cancel of an unknown request",
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}',
        None,
    ),
    (
        "progress garbage",
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":[],"progress":"x"}}',
        None,
    ),
    (
        "second initialize",
        req(
            112,
            "initialize",
            {"protocolVersion": "1999-01-01", "capabilities": {}, "clientInfo": {"name": "x", "version": "0"}},
        ),
        None,
    ),
    (
        "batch of 500 calls",
        json.dumps(
            [json.loads(call(2000 + i, "write_file", {"path": f"batch{i}.txt", "content": "b"})) for i in range(500)]
        ).encode(),
        None,
    ),
    ("20 MB of garbage", b"A" * BIG, None),
    ("20 MB write_file", call(113, "write_file", {"path": "big.txt", "content": "A" * BIG}), 113),
    (
        "nested 100 deep",
        call(114, "write_file", {"path": "n.txt", "content": "x", "extra": json.loads("[" * 100 + "]" * 100)}),
        114,
    ),
    (
        "nested 100000 deep",
        b'{"jsonrpc":"2.0","id":115,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"deep.txt","content":"x","e":'
        + b"[" * 100000
        + b"]" * 100000
        + b"}}}",
        None,
    ),
    (
        "100k argument keys",
        call(116, "write_file", {"path": "keys.txt", "content": "x", **{f"k{i}": i for i in range(100000)}}),
        116,
    ),
    (
        "tool call as a notification",
        b'{"jsonrpc":"2.0","method":"tools/call","params":{"name":"write_file","arguments":{"path":"notif.txt","content":"n"}}}',
        None,
    ),
]


@pytest.fixture(scope="module")
def wire(signed_home, tmp_path_factory):
    ws = tmp_path_factory.mktemp("jsonrpc-ws")
    w = StdioWire(["--workspace", str(ws), "--sandbox", "bwrap"], env=server_env(ASSAY_HOME=str(signed_home)))
    init = w.initialize()
    w.ws = ws
    w.run_id = init["result"]["instructions"].split("run ")[1].split(",")[0]
    yield w
    w.__exit__(None, None, None)


def test_every_malformed_message_is_answered_with_an_error_or_ignored(wire):
    outcomes = {}
    for label, data, error_id in PROBES:
        before = len(wire.seen)
        wire.send(data)
        # The server must still answer: a ping after the probe, within 20 s.
        pong, took = wire.request("ping", timeout=20)
        assert pong.obj.get("result") == {}, (label, pong.raw[:200])
        replies = [line for line in wire.seen[before:] if line is not pong]
        for line in replies:
            obj = line.obj  # every line on stdout is JSON
            assert obj.get("jsonrpc") == "2.0", (label, line.raw[:200])
        if error_id is not None:
            # Calls run concurrently with the ping: a 20 MB call's refusal may come after the pong.
            mine = wire.wait_for_id(error_id, timeout=60)
            assert mine is not None, f"{label}: no reply for id {error_id} within 60 s"
            answer = mine.obj
            assert "error" in answer or answer.get("result", {}).get("isError") is True, (label, str(answer)[:300])
        outcomes[label] = (len(replies), round(took, 2))
    assert wire.proc.poll() is None, wire.stderr[-3000:]


def test_no_tool_ran_for_what_could_not_be_parsed_or_was_refused(wire):
    names = {p.name for p in wire.ws.iterdir()}
    assert "big.txt" not in names and "deep.txt" not in names and "keys.txt" not in names and "n.txt" not in names


def test_whatever_ran_is_in_the_ledger(wire, signed_home):
    # A batch or a notification the SDK chose to run must have gone through the gateway.
    tool_rows, decision_rows = run_rows(signed_home, wire.run_id)
    recorded = {r.arguments.get("path") for r in tool_rows if r.tool == "write_file"}
    for p in wire.ws.iterdir():
        assert p.name in recorded, f"{p.name} was written without a ledger row"
    assert len(tool_rows) == len(decision_rows) or all(
        r.key in {d.key for d in decision_rows} for r in tool_rows if r.decision != "deny"
    )


def test_the_server_still_works_and_exits_cleanly_at_eof(wire):
    r, _ = wire.call("write_file", {"path": "after.txt", "content": "still here"}, timeout=30)
    assert r.obj["result"]["isError"] is False
    assert (wire.ws / "after.txt").read_text() == "still here"
    t0 = time.monotonic()
    assert wire.close(timeout=30) == 0
    assert time.monotonic() - t0 < 30
    assert b"Traceback" not in wire.stderr, wire.stderr.decode(errors="replace")[-3000:]
