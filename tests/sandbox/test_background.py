"""Background sandboxes (SandboxLimits.background) take CPU time nobody else wants.

The verifier's cache warm-up runs beside the agent in such sandboxes; if the guarantee broke,
it would slow the agent's own timing runs. Tested by behaviour on the real engines: two busy
loops pinned to one CPU, one in a normal sandbox and one in a background sandbox.
"""

from __future__ import annotations

import dataclasses
import threading

from sandbox_helpers import TIGHT, py

SPIN = """
import os, time
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
end = time.monotonic() + 2.0
while time.monotonic() < end:
    pass
print(time.process_time())
"""


def test_background_sandbox_yields_the_cpu(make_sandbox):
    limits = dataclasses.replace(TIGHT, timeout_s=20.0)
    normal = make_sandbox(limits)
    background = make_sandbox(dataclasses.replace(limits, background=True))
    got: dict[str, float] = {}

    def spin(name, sb):
        r = sb.exec(py(SPIN), timeout=20)
        assert r.exit_code == 0, r.stderr
        got[name] = float(r.stdout.strip().splitlines()[-1])

    threads = [threading.Thread(target=spin, args=a) for a in (("normal", normal), ("background", background))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Shares of 1024 against 2 (weight 100 against 1): about 500:1 while both want the CPU.
    assert got["normal"] > 4 * got["background"], got
    assert got["normal"] > 0.5, got  # the normal loop really ran on that CPU
