"""One registry of tools. A job kind adds tools by registering them; no gateway code changes.

A tool is a plain function `fn(ctx, args) -> output` whose argument and return annotations are
pydantic models: they give the MCP input schema, the structured output schema, and the
validation every hostile argument meets before the function runs.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, get_type_hints

import anyio
from pydantic import BaseModel, ValidationError

from assay.tools.seam import Handler, ToolCall, ToolOutcome, error

if TYPE_CHECKING:
    from assay.tools.context import ToolContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_model: type[BaseModel]
    output_model: type[BaseModel]
    fn: Callable[..., BaseModel]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    # Job kinds whose sessions expose the tool; "*" means every kind.
    kinds: tuple[str, ...] = ("*",)
    # Arguments that name workspace paths: the capability check judges every one of them.
    path_args: tuple[str, ...] = ()
    # Whether the tool hands its arguments to the workspace or a sandbox (every shipped one does):
    # such a tool may never receive restored placeholders, whatever a manifest grants.
    reaches_sandbox: bool = True

    def mcp_tool(self):
        from mcp.types import Tool, ToolAnnotations

        return Tool(
            name=self.name,
            description=self.description,
            input_schema=self.input_model.model_json_schema(),
            output_schema=self.output_model.model_json_schema(),
            annotations=ToolAnnotations(
                title=self.name.replace("_", " "),
                read_only_hint=self.read_only,
                destructive_hint=self.destructive,
                idempotent_hint=self.idempotent,
                open_world_hint=False,
            ),
        )


class Registry:
    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._binds: dict[str, Callable[[], tuple]] = {}

    def register(self, spec: ToolSpec) -> ToolSpec:
        if spec.name in self._tools and self._tools[spec.name].fn is not spec.fn:
            raise ValueError(f"tool {spec.name!r} is registered twice")
        self._tools[spec.name] = spec
        return spec

    def tool(
        self,
        name: str | None = None,
        *,
        read_only: bool = False,
        destructive: bool = False,
        idempotent: bool = False,
        kinds: tuple[str, ...] = ("*",),
        path_args: tuple[str, ...] | None = None,
        reaches_sandbox: bool = True,
    ):
        def decorate(fn: Callable[..., BaseModel]) -> Callable[..., BaseModel]:
            hints = get_type_hints(fn)
            params = list(inspect.signature(fn).parameters)
            model = hints[params[1]]
            self.register(
                ToolSpec(
                    name=name or fn.__name__,
                    description=inspect.cleandoc(fn.__doc__ or ""),
                    input_model=model,
                    output_model=hints["return"],
                    fn=fn,
                    read_only=read_only,
                    destructive=destructive,
                    idempotent=idempotent,
                    kinds=kinds,
                    path_args=path_args
                    if path_args is not None
                    else (("path",) if "path" in model.model_fields else ()),
                    reaches_sandbox=reaches_sandbox,
                )
            )
            return fn

        return decorate

    def for_kind(self, kind: str | None) -> list[ToolSpec]:
        return [t for t in self._tools.values() if "*" in t.kinds or (kind is not None and kind in t.kinds)]

    def register_binds(self, kind: str, binds: Callable[[], tuple]) -> None:
        """Read-only host paths a kind's tools need inside the run's sandbox (e.g. a harness)."""
        self._binds[kind] = binds

    def binds_for(self, kind: str | None) -> tuple:
        return tuple(self._binds[kind]()) if kind in self._binds else ()

    def get(self, name: str) -> ToolSpec | None:
        return self._tools.get(name)

    def handler(self, ctx: ToolContext, kind: str | None, progress=None) -> Handler:
        """The innermost Handler: validate arguments, run the tool off the event loop.

        `progress(call, done, total, message)` is async; tools report from their worker
        thread, so reports hop back onto the event loop."""
        visible = {t.name: t for t in self.for_kind(kind)}

        def reporter(tc: ToolCall):
            report = progress
            if report is None:
                return None
            return lambda done, total=None, message=None: anyio.from_thread.run(report, tc, done, total, message)

        async def call(tc: ToolCall) -> ToolOutcome:
            spec = visible.get(tc.name)
            if spec is None:
                return error(f"unknown tool {tc.name!r}; available: {', '.join(sorted(visible))}")
            try:
                args = spec.input_model.model_validate(tc.arguments)
            except ValidationError as exc:
                # Field names and messages only: the rejected values are the caller's data.
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in exc.errors()
                )
                return error(f"invalid arguments for {tc.name}: {problems}")
            try:
                out = await anyio.to_thread.run_sync(lambda: spec.fn(ctx.for_call(tc, reporter(tc)), args))
            except ToolFailure as exc:
                return error(f"{tc.name} failed: {exc}")
            except Exception as exc:  # a bug in a tool must not take the server down
                # One line for whoever watches; the traceback only when debugging, since a
                # terminal user or a pipeline log gains nothing from library internals.
                log.error(
                    "tool %s raised %s: %s", tc.name, type(exc).__name__, exc, exc_info=log.isEnabledFor(logging.DEBUG)
                )
                return error(f"{tc.name} failed unexpectedly ({type(exc).__name__}: {exc})")
            data = out.model_dump(mode="json")
            return ToolOutcome(text=json.dumps(data, indent=1), structured=data)

        return call


class ToolFailure(Exception):
    """A tool's expected failure: its message goes (redacted) to the model so it can act."""


registry = Registry()


def default_registry() -> Registry:
    """The registry with every shipped tool imported (imports register them)."""
    from assay.tools import exec as _exec  # noqa: F401
    from assay.tools import files as _files  # noqa: F401
    from assay.tools import submit as _submit  # noqa: F401
    from assay.tools.kinds import import_kind_tools

    import_kind_tools()

    return registry
