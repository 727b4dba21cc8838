"""The host never believes a malformed or oversized helper reply (the helper is untrusted)."""

from __future__ import annotations

import base64
import json
import struct

import pytest

from assay.sandbox.protocol import FrameDecoder, ProtocolError, encode, max_reply_bytes, parse_ready, parse_reply

CAP = 1024


def reply(**over):
    obj = {
        "id": 7,
        "exit": 0,
        "stdout": base64.b64encode(b"out").decode(),
        "stderr": "",
        "killed": None,
        "truncated": False,
    }
    obj.update(over)
    return obj


def test_frames_round_trip_in_pieces():
    dec = FrameDecoder(1 << 16)
    data = encode({"a": 1}) + encode({"b": [1, 2]})
    for i in range(len(data)):  # one byte at a time: partial headers and bodies
        dec.feed(data[i : i + 1])
    assert dec.pop() == {"a": 1}
    assert dec.pop() == {"b": [1, 2]}
    assert dec.pop() is None


def test_oversized_frame_refused_before_buffering():
    dec = FrameDecoder(100)
    with pytest.raises(ProtocolError, match="exceeds"):
        dec.feed(struct.pack(">I", 10**9))


def test_oversized_second_frame_refused():
    dec = FrameDecoder(100)
    dec.feed(encode({"a": 1}) + struct.pack(">I", 10**6))
    with pytest.raises(ProtocolError):
        dec.pop()


@pytest.mark.parametrize("body", [b"not json", b"[1,2]", b"\xff\xfe"])
def test_malformed_json_refused(body):
    dec = FrameDecoder(100)
    dec.feed(struct.pack(">I", len(body)) + body)
    with pytest.raises(ProtocolError):
        dec.pop()


def test_good_reply_parses():
    r = parse_reply(reply(), 7, CAP)
    assert (r.exit_code, r.stdout, r.killed) == (0, b"out", None)


@pytest.mark.parametrize(
    "bad",
    [
        {"id": 8},  # answers another request
        {"id": True},  # bool is not an int here
        {"exit": "0"},
        {"exit": 10**6},
        {"killed": "bored"},
        {"truncated": "no"},
        {"stdout": "!!!not base64"},
        {"stdout": 5},
        {"stdout": base64.b64encode(b"x" * (CAP + 1)).decode()},  # more than the cap
        {"extra": 1},
    ],
)
def test_bad_replies_refused(bad):
    with pytest.raises(ProtocolError):
        parse_reply(reply(**bad), 7, CAP)


def test_missing_key_refused():
    obj = reply()
    del obj["stderr"]
    with pytest.raises(ProtocolError):
        parse_reply(obj, 7, CAP)


def test_ready_greeting():
    assert parse_ready({"ready": True, "dumpable": False}) is True
    with pytest.raises(ProtocolError):
        parse_ready({"ready": True, "dumpable": False, "x": 1})


def test_reply_cap_fits_a_full_reply():
    full = reply(stdout=base64.b64encode(b"\0" * CAP).decode(), stderr="")
    assert len(json.dumps(full)) < max_reply_bytes(CAP)
