"""Padding on its own: a stand-in tool whose duration the test chooses.

The schedule (release at the per-tool ceiling, or at the next quantum) is checked exactly
with a fake clock and a recorded sleep, and once on the real clock; the size half
(`pad_to_bucket`) is checked byte for byte against the serializer the SDK uses.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import anyio
import pydantic
import pydantic_core
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assay.policies.padding import PAD_KEY, PaddingPolicy, pad_to_bucket
from assay.tools import gate_padding
from assay.tools.gate_padding import Padding
from assay.tools.seam import ToolCall, ToolOutcome

pytestmark = pytest.mark.anyio


class FakeTime:
    """A clock the stand-in tool advances, and a sleep that advances it and is recorded."""

    def __init__(self):
        self.now_ns = 1_000_000_000
        self.slept: list[float] = []

    def clock(self) -> int:
        return self.now_ns

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now_ns += int(seconds * 1e9)


@pytest.fixture
def fake(monkeypatch) -> FakeTime:
    ft = FakeTime()
    monkeypatch.setattr(gate_padding.anyio, "sleep", ft.sleep)
    return ft


def tool_taking(ft: FakeTime, seconds: float, text: str = "result"):
    async def tool(call: ToolCall) -> ToolOutcome:
        ft.now_ns += int(seconds * 1e9)
        return ToolOutcome(text=text, structured={"v": text})

    return tool


async def released_at(
    ft: FakeTime, policy: PaddingPolicy, tool_s: float, name: str = "exec", started=True
) -> tuple[float, ToolOutcome]:
    call = ToolCall(name=name, arguments={}, key="k", started_ns=ft.now_ns if started else 0)
    t0 = ft.now_ns
    out = await Padding(tool_taking(ft, tool_s), policy, clock=ft.clock)(call)
    return (ft.now_ns - t0) / 1e9, out


@pytest.mark.parametrize("tool_s", [0.0, 0.01, 0.2, 0.249])
async def test_quantum_releases_at_the_next_multiple(fake, tool_s):
    at, _ = await released_at(fake, PaddingPolicy(enabled=True, time_quantum_s=0.25), tool_s)
    assert at == pytest.approx(0.25, abs=1e-6)


async def test_quantum_past_one_step_goes_to_the_next(fake):
    at, _ = await released_at(fake, PaddingPolicy(enabled=True, time_quantum_s=0.25), 0.26)
    assert at == pytest.approx(0.5, abs=1e-6)


@pytest.mark.parametrize("tool_s", [0.0, 0.3, 0.99, 1.0])
async def test_ceiling_hides_how_long_the_tool_took(fake, tool_s):
    policy = PaddingPolicy(enabled=True, ceilings_s={"exec": 1.0}, time_quantum_s=0.25)
    at, out = await released_at(fake, policy, tool_s)
    assert at == pytest.approx(1.0, abs=1e-6)
    assert "padding_overrun_s" not in out.meta


async def test_ceiling_overrun_is_released_on_the_quantum_and_reported(fake):
    policy = PaddingPolicy(enabled=True, ceilings_s={"exec": 1.0}, time_quantum_s=0.25)
    at, out = await released_at(fake, policy, 1.1)
    assert at == pytest.approx(1.25, abs=1e-6)
    assert out.meta["padding_overrun_s"] == pytest.approx(0.1, abs=1e-3)


async def test_default_ceiling_applies_to_tools_without_their_own(fake):
    policy = PaddingPolicy(enabled=True, ceilings_s={"exec": 2.0}, default_ceiling_s=0.5)
    at, _ = await released_at(fake, policy, 0.01, name="read_file")
    assert at == pytest.approx(0.5, abs=1e-6)


async def test_disabled_padding_does_not_wait(fake):
    at, _ = await released_at(fake, PaddingPolicy(enabled=False, default_ceiling_s=5.0), 0.01)
    assert at == pytest.approx(0.01, abs=1e-6)
    assert fake.slept == []


async def test_without_an_audit_stamp_padding_still_pads(fake):
    # started_ns = 0 means no outer wrapper stamped the arrival; the hold must not vanish.
    at, _ = await released_at(fake, PaddingPolicy(enabled=True, default_ceiling_s=1.0), 0.01, started=False)
    assert at == pytest.approx(1.0, abs=1e-6)


async def test_padding_never_touches_content(fake):
    _, out = await released_at(fake, PaddingPolicy(enabled=True, time_quantum_s=0.25), 0.01)
    assert (out.text, out.structured, out.is_error) == ("result", {"v": "result"}, False)


async def test_on_the_real_clock_a_fast_and_a_slow_tool_leave_together():
    policy = PaddingPolicy(enabled=True, ceilings_s={"t": 0.4})
    times = []
    for tool_s in (0.0, 0.25):

        async def tool(call, tool_s=tool_s):
            await anyio.sleep(tool_s)
            return ToolOutcome(text="x")

        t0 = time.monotonic_ns()
        await Padding(tool, policy)(ToolCall(name="t", arguments={}, key="k", started_ns=t0))
        times.append((time.monotonic_ns() - t0) / 1e9)
    # anyio.sleep never wakes early; late only by scheduling noise.
    assert all(0.4 <= t < 0.55 for t in times), times


@pytest.mark.parametrize(
    "bad",
    [
        {"ceilings_s": {"exec": math.inf}},
        {"ceilings_s": {"exec": math.nan}},
        {"ceilings_s": {"exec": -1.0}},
        {"default_ceiling_s": math.inf},
        {"time_quantum_s": math.inf},
        {"time_quantum_s": 0},
        {"size_bucket": 10},
    ],
)
def test_policies_that_would_hang_or_silently_not_pad_are_refused(bad):
    with pytest.raises(pydantic.ValidationError):
        PaddingPolicy(enabled=True, **bad)


class Msg(pydantic.BaseModel):
    text: str
    meta: dict | None = pydantic.Field(default=None, alias="_meta")


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=9000), bucket=st.sampled_from([256, 1000, 4096]))
def test_pad_to_bucket_hits_the_bucket_exactly(text, bucket):
    msg = Msg(text=text)

    def size() -> int:
        return len(pydantic_core.to_json(msg.model_dump(by_alias=True, mode="json", exclude_none=True)))

    def set_padding(filler: str) -> None:
        msg.meta = {PAD_KEY: filler}

    final = pad_to_bucket(size, set_padding, PaddingPolicy(enabled=True, size_bucket=bucket))
    assert final % bucket == 0 and final == size()
    # The content is untouched and the filler is only spaces.
    assert msg.text == text and set(msg.meta[PAD_KEY]) <= {" "}
    assert json.loads(pydantic_core.to_json(msg.model_dump(by_alias=True, mode="json")))["text"] == text


@pytest.mark.anyio
@pytest.mark.parametrize("padded", [False, True])
async def test_with_padding_on_no_progress_leaves_ahead_of_the_padded_result(workspace, signed_home, padded):
    """Progress notifications go out when the tool reports, in a number and at times that
    depend on the work (a cached autotune at once, a cold one as rounds finish): with padding on
    they would show what the padded result hides, so none are sent (red-team finding)."""
    from tools_helpers import open_session, sdk_client

    (workspace / "task.py").write_text(
        (Path(__file__).resolve().parents[2] / "examples" / "kernel" / "gelu.py").read_text()
    )
    seen: list = []

    async def on_progress(done, total, message):
        seen.append(message)

    cfg = {"padding": PaddingPolicy(enabled=True, default_ceiling_s=1.0)} if padded else {}
    with open_session(workspace, kind="kernel", **cfg) as s:
        async with sdk_client(s) as c:
            result = await c.call_tool("read_task", {}, progress_callback=on_progress)
    assert not result.is_error, result.content[0].text
    assert (seen == []) if padded else any("inspecting" in (m or "") for m in seen), seen
