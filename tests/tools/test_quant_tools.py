"""The quant tools from the agent's side, through the real MCP server and gateway of a quant
session: the quant-agent manifest gives no command line and writes only recipes; a recipe that
names code is refused by the recipe format before anything runs; an honest one is measured in
the run's sandbox by the verifier's own script."""

from __future__ import annotations

from pathlib import Path

import pytest
from tools_helpers import open_session, sdk_client

pytestmark = pytest.mark.anyio

MLP = Path(__file__).resolve().parents[2] / "examples" / "quant" / "mlp_logits.py"


def text(result) -> str:
    return result.content[0].text if result.content else ""


async def test_a_quant_session_measures_recipes_and_runs_nothing_else(workspace, need):
    from assay.sandbox.backends import availability

    need(availability()["bwrap"][0], "bubblewrap is not available here")
    (workspace / "task.py").write_text(MLP.read_text())
    with open_session(workspace, kind="quant", manifest="quant-agent") as s:
        async with sdk_client(s) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"quant_modules", "quant_sensitivity", "quant_try", "write_file", "submit"} <= names
            assert not {"read_task", "autotune"} & names  # the kernel kind's tools are not a quant session's
            ran = await c.call_tool("exec", {"command": ["python", "-c", "print(1)"]})
            assert ran.is_error  # no command line: every figure comes from the quant tools
            code = await c.call_tool("write_file", {"path": "sitecustomize.py", "content": "import os\n"})
            assert code.is_error and not (workspace / "sitecustomize.py").exists()
            hostile = '[[rule]]\nmatch = "*"\nconfig = "int8_weight_only"\nfilter_fn = "lambda m, n: True"\n'
            assert not (await c.call_tool("write_file", {"path": "recipe.toml", "content": hostile})).is_error
            refused = await c.call_tool("quant_try", {"path": "recipe.toml"})
            assert refused.is_error and "filter_fn: unknown key" in text(refused)
            outside = await c.call_tool("quant_try", {"path": "../recipe.toml"})
            assert outside.is_error
            honest = '[[rule]]\nmatch = "blocks.*"\nconfig = "int8_weight_only"\n'
            await c.call_tool("write_file", {"path": "recipe.toml", "content": honest})
            tried = await c.call_tool("quant_try", {"path": "recipe.toml"})
            assert not tried.is_error, text(tried)
            r = tried.structured_content
            assert r["quantized_modules"] == 4 and r["size_ratio"] < 0.35 and r["probes"]["top1_agreement"] > 0.9
            assert r["heldout"]["rows"] > 0 and r["speedup_vs_fp32"] is None  # untimed unless asked
            table = (await c.call_tool("quant_modules", {})).structured_content
            kernels = {row["config"]["config"]: row for row in table["kernels"]}
            # which configs are fast here: each timed on the commonest Linear shape, or why not
            assert set(kernels) == {
                "int8_weight_only",
                "int8_dynamic",
                "intx_weight_only",
                "int4_weight_only",
                "float8_weight_only",
                "eager_dynamic_int8",
            }
            assert all(("speed_vs_fp32_32" in row) != ("error" in row) for row in kernels.values()), kernels
            assert kernels["int8_weight_only"]["shape"] == [512, 2048]
