"""Host side of the helper protocol (see helper.py): framing and strict reply checks.

Everything the helper says is untrusted: a command may have found a way to tamper with the
sandbox, so a reply is size-capped before it is buffered, must have exactly the expected
keys and types, and may not claim more output than the cap allows. A reply that breaks any
rule is a `ProtocolError`; the caller then kills the sandbox rather than believing it.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import dataclass
from pathlib import Path

HELPER_SOURCE = (Path(__file__).with_name("helper.py")).read_text()

HEADER = struct.Struct(">I")
KILL_REASONS = (None, "timeout", "output", "memory", "pids")


class ProtocolError(RuntimeError):
    """The helper broke the protocol: treat the sandbox as compromised."""


def encode(obj: dict) -> bytes:
    body = json.dumps(obj, separators=(",", ":")).encode()
    return HEADER.pack(len(body)) + body


class FrameDecoder:
    """Bytes in, JSON objects out; refuses any frame over `max_frame` before buffering it."""

    def __init__(self, max_frame: int):
        self.max_frame = max_frame
        self._buf = bytearray()

    def feed(self, data: bytes) -> None:
        self._buf += data
        if len(self._buf) >= 4:
            (size,) = HEADER.unpack_from(self._buf)
            if size > self.max_frame:
                raise ProtocolError(f"helper frame of {size} bytes exceeds {self.max_frame}")

    def pop(self) -> dict | None:
        if len(self._buf) < 4:
            return None
        (size,) = HEADER.unpack_from(self._buf)
        if len(self._buf) < 4 + size:
            return None
        body = bytes(self._buf[4 : 4 + size])
        del self._buf[: 4 + size]
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ProtocolError(f"helper sent malformed JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise ProtocolError("helper frame is not an object")
        # Check the next header early so an oversized frame is refused before it is buffered.
        if len(self._buf) >= 4 and HEADER.unpack_from(self._buf)[0] > self.max_frame:
            raise ProtocolError("helper frame exceeds the size cap")
        return obj


def max_reply_bytes(output_bytes: int) -> int:
    # Both streams base64-encoded (4/3) plus a little JSON around them.
    return 2 * ((output_bytes + 2) // 3) * 4 + 4096


@dataclass(frozen=True)
class Reply:
    id: int
    exit_code: int
    stdout: bytes
    stderr: bytes
    killed: str | None
    truncated: bool


_REPLY_KEYS = {"id", "exit", "stdout", "stderr", "killed", "truncated"}


def parse_ready(obj: dict) -> bool:
    """The helper's greeting; returns whether it could make itself non-dumpable."""
    if set(obj) != {"ready", "dumpable"} or obj["ready"] is not True or not isinstance(obj["dumpable"], bool):
        raise ProtocolError("helper greeting is malformed")
    return not obj["dumpable"]


def parse_reply(obj: dict, expect_id: int, output_bytes: int) -> Reply:
    if set(obj) != _REPLY_KEYS:
        raise ProtocolError(f"helper reply has keys {sorted(obj)}")
    if type(obj["id"]) is not int or obj["id"] != expect_id:
        raise ProtocolError("helper reply answers another request")
    code = obj["exit"]
    if type(code) is not int or not -64 <= code <= 255:
        raise ProtocolError("helper reply has an impossible exit code")
    if obj["killed"] not in KILL_REASONS:
        raise ProtocolError("helper reply has an unknown kill reason")
    if type(obj["truncated"]) is not bool:
        raise ProtocolError("helper reply has a non-boolean truncated flag")
    streams = []
    for key in ("stdout", "stderr"):
        if type(obj[key]) is not str:
            raise ProtocolError(f"helper reply {key} is not a string")
        try:
            streams.append(base64.b64decode(obj[key], validate=True))
        except (binascii.Error, ValueError):
            raise ProtocolError(f"helper reply {key} is not base64") from None
    if len(streams[0]) + len(streams[1]) > output_bytes:
        raise ProtocolError("helper reply carries more output than the cap")
    return Reply(expect_id, code, streams[0], streams[1], obj["killed"], obj["truncated"])
