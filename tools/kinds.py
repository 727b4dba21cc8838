"""The tools each job kind adds to the shared ones (files, exec, submit), by module: importing a
kind's module registers its tools (`registry.tool(kinds=(<kind>,))`) and the read-only binds
they need. A kind's tools are one row here; kinds from outside assay come from the operator's
ASSAY_KINDS setting (their `tools` entry)."""

from __future__ import annotations

import importlib

from assay.errors import UserError

# kind -> module registering its tools.
SHIPPED: dict[str, str] = {
    "kernel": "assay.tools.kernel",
    "quant": "assay.tools.quant",
    "compile": "assay.tools.compile",
}


def rows() -> dict[str, str]:
    from assay.settings import settings

    return {**SHIPPED, **{name: plugin.tools for name, plugin in settings().kinds.items()}}


def import_kind_tools() -> None:
    for name, module in rows().items():
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise UserError(
                f"the tools of job kind {name!r} ({module}) cannot be imported: {exc}",
                "check the kind's installation (or ASSAY_KINDS)",
            ) from None
