"""`python brain_driver.py BRAIN ARGS...` is `assay ARGS...` with a scripted test brain.

The real CLI (`assay.cli.main.main`) in a process of its own, so tests can kill -9 it, run it
with --no-wait, resume it: only the brain is swapped, for one from scripted_brains.py, wrapped
in the real RedactingModel. Everything else (MCP server process, gateway, sandboxes, ledger,
checkpoints, verifier process) is what `assay` itself runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    from pydantic_ai.models.function import FunctionModel
    from scripted_brains import BRAINS

    import assay.agents.runner as runner
    from assay.agents.brains import RedactingModel
    from assay.cli.main import main as assay_main

    fn = BRAINS[sys.argv[1]]

    def make_model(name, *, kind, redactor, http_client=None):
        return RedactingModel(FunctionModel(fn, model_name=f"test:{sys.argv[1]}"), redactor)

    runner.make_model = make_model
    assay_main(sys.argv[2:])


if __name__ == "__main__":
    main()
