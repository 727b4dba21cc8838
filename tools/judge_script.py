"""A verifier's judge script run by a kind's tools in the run's own sandbox: the same measuring
code the verifier uses (its harness, bound read-only), so what a tool reports predicts the
verdict; with the agent's seeds, and deciding nothing.

    found = run_judge_script(sandbox, "/assay/quant/harness/quant_judge.py", plan, timeout, env)
"""

from __future__ import annotations

import json
from typing import Any

from assay.tools.registry import ToolFailure

RESULT_MARK = "@@ASSAY "


def run_judge_script(sb: Any, script: str, plan: dict[str, Any], timeout: float, env: dict[str, str]) -> dict[str, Any]:
    """The script's last result line as a dict; a ToolFailure says why there is none (the
    sandbox stopped it, it died first, or it reported a failed stage)."""
    res = sb.exec(["python", "-I", "-B", script], timeout=timeout, stdin=json.dumps(plan) + "\n", env=env)
    found = None
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(RESULT_MARK):
            found = json.loads(line[len(RESULT_MARK) :])
            break
    if res.killed:
        raise ToolFailure(f"the sandbox stopped the measurement ({res.killed}) after {res.duration_s:.1f}s")
    if not isinstance(found, dict):
        raise ToolFailure(
            f"the measurement printed no result (exit {res.exit_code}): {(res.stderr or res.stdout)[-2000:]}"
        )
    if not found.get("ok"):
        raise ToolFailure(f"{found.get('stage')}: {str(found.get('error', ''))[-3000:]}")
    return found
