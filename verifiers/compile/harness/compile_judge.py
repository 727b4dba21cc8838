"""The compile kind's judge script, inside a fresh verification sandbox (torch and the standard
library; never assay). It reads a plan on stdin and measures, in this one process:

1. the task's `Model` (trusted; built with the verifier's held-out seed): eager outputs and the
   aten ops it runs, then its symptom: graph breaks and their reasons (`torch._dynamo.explain`),
   whether `fullgraph=True` traces, recompiles over the input sequence;
2. dynamo's and inductor's configuration, the identity of every function of torch the
   measurement relies on, and dynamo's counters, captured before `fixed.py` is imported and
   compared after the import, inside every compile and at the end: a submission that patches
   `explain`, sets `suppress_errors`, raises the cache limits or clears counters is refused;
3. `ModelNew` (loaded strictly with `Model`'s weights): the same figures, coverage (aten ops
   traced into compiled graphs over the aten ops `Model` runs eagerly), ops left opaque;
4. the job's backend on both: crashes (by stage), parity of compiled `ModelNew` with `Model`
   eager over held-out seeds and inputs (an fp64 run of `Model` where fp32 eager is itself far
   off), and interleaved latency of eager, compiled `Model` and compiled `ModelNew`.

It prints one result line; the verifier's process judges the figures
(verifiers/compile/judge.py).
"""

from __future__ import annotations

import collections
import copy
import json
import logging
import math
import os
import sys
import time
import traceback
import types
import warnings
from typing import Any

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "common", "harness")
)

from assay_harness import RESULT_MARK, emit, isolation_problems, load_entry, read_plan  # noqa: E402
from assay_timing import flushed_rounds  # noqa: E402

# Aten ops that read a tensor into Python (the symptom a rewrite removes) or only alias: they
# are not counted in the coverage's denominator.
UNCOUNTED = frozenset(
    {"_local_scalar_dense", "item", "is_nonzero", "equal", "lift_fresh", "lift_fresh_copy", "detach", "alias"}
)
# Targets of a dynamo graph's nodes that are torch's own or Python's operators; anything else
# (a user function let in by allow_in_graph) is a call dynamo did not trace into.
TRACED_MODULES = ("torch", "_operator", "operator", "builtins", "math", "_functools", "functools")
OP_NAMESPACES = ("aten", "prims", "higher_order")
REPORTING = "the judge's own functions or its reporting were replaced while the submission ran"


def fail(stage: str, message: str) -> None:
    emit({"ok": False, "stage": stage, "error": message[-4000:]})
    raise SystemExit(0)


def tensors(out: Any, torch) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in tensors(o, torch)]
    if isinstance(out, dict):
        return [t for k in sorted(out, key=str) for t in tensors(out[k], torch)]
    return []


def seeded(seed: int, fn, torch):
    torch.manual_seed(seed)
    return fn()


def as_list(inputs: Any) -> list:
    return list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]


# --------------------------------------------------------------------------- what must not change


class Guard:
    """What a submission must leave alone, captured before it is imported."""

    def __init__(self, torch) -> None:
        import torch._dynamo.utils
        import torch._functorch.config
        import torch._inductor.config
        import torch.utils._python_dispatch  # noqa: F401 - its module is guarded below

        self.torch = torch
        self.configs = {
            "torch._dynamo.config": torch._dynamo.config,
            "torch._inductor.config": torch._inductor.config,
            "torch._functorch.config": torch._functorch.config,
        }
        self.values = {name: self._copy(mod) for name, mod in self.configs.items()}
        self.spaces = {
            "torch": torch,
            "torch.Tensor": torch.Tensor,
            "torch.nn.Module": torch.nn.Module,
            "torch.nn.functional": torch.nn.functional,
            "torch._dynamo": torch._dynamo,
            "torch._dynamo.utils": torch._dynamo.utils,
            "torch._dynamo.eval_frame": torch._dynamo.eval_frame,
            "torch._dynamo.backends.registry": sys.modules["torch._dynamo.backends.registry"],
            "torch._dynamo.backends.common": sys.modules["torch._dynamo.backends.common"],
            "torch.compiler": torch.compiler,
            "torch._logging": sys.modules["torch._logging"],
            "torch.library": torch.library,
            # what the capture backend and the op recorder read graphs and ops through
            "torch.fx.Graph": torch.fx.Graph,
            "torch.fx.GraphModule": torch.fx.GraphModule,
            "torch.utils._python_dispatch": sys.modules["torch.utils._python_dispatch"],
            "TorchDispatchMode": sys.modules["torch.utils._python_dispatch"].TorchDispatchMode,
        }
        # the judge itself and how it reports: a submission runs in this process and could
        # reach them (import __main__, import assay_harness)
        judge = sys.modules["__main__"]
        self.spaces["the judge"] = judge
        for name in ("Guard", "Capture", "Recompiles"):
            if isinstance(getattr(judge, name, None), type):
                self.spaces[f"the judge's {name}"] = getattr(judge, name)
        for name in ("assay_harness", "assay_timing", "json", "json.encoder", "os", "builtins"):
            if name in sys.modules:
                self.spaces[name] = sys.modules[name]
        if "torch._functorch.aot_autograd" in sys.modules:
            self.spaces["torch._functorch.aot_autograd"] = sys.modules["torch._functorch.aot_autograd"]
        # functions, classes and modules only: module-level data (a frame counter) changes honestly
        if "torch._inductor.compile_fx" in sys.modules:  # imported only for an Inductor job (1 s here)
            self.spaces["torch._inductor.compile_fx"] = sys.modules["torch._inductor.compile_fx"]
        self.ids = {
            name: {k: id(v) for k, v in vars(space).items() if callable(v) or isinstance(v, types.ModuleType)}
            for name, space in self.spaces.items()
        }
        self.counters = {k: dict(v) for k, v in torch._dynamo.utils.counters.items()}
        self.counters_id = id(torch._dynamo.utils.counters)
        self.trace = (sys.gettrace(), sys.getprofile())

    @staticmethod
    def _copy(mod) -> dict:
        out = {}
        for k, v in mod.get_config_copy().items():
            try:
                out[k] = copy.deepcopy(v)
            except Exception:  # noqa: BLE001 - a value that cannot be copied is compared by its text
                out[k] = repr(v)
        return out

    @staticmethod
    def _same(a, b) -> bool:
        try:
            return bool(a == b)
        except Exception:  # noqa: BLE001
            return repr(a) == repr(b)

    def config_drift(self) -> list[str]:
        out = []
        for name, mod in self.configs.items():
            now, then = self._copy(mod), self.values[name]
            for key in sorted(set(now) | set(then)):
                if not self._same(now.get(key, "<absent>"), then.get(key, "<absent>")):
                    out.append(f"{name}.{key} changed from {then.get(key)!r} to {now.get(key)!r}")
        return out

    def drift(self, counters_too: bool = True) -> list[str]:
        out = self.config_drift()
        for name, space in self.spaces.items():
            now = vars(space)
            for key, was in self.ids[name].items():
                if key not in now:
                    out.append(f"{name}.{key} was deleted")
                elif id(now[key]) != was and not key.startswith("__"):
                    out.append(f"{name}.{key} was replaced")
        if counters_too:
            counters = self.torch._dynamo.utils.counters
            if id(counters) != self.counters_id:
                out.append("torch._dynamo.utils.counters was replaced")
            else:
                for group, values in self.counters.items():
                    for key, v in values.items():
                        if counters.get(group, {}).get(key, 0) < v:
                            out.append(f"dynamo counter {group}.{first_line(key)[:80]} went down from {v}")
        if (sys.gettrace(), sys.getprofile()) != self.trace:
            out.append("a trace or profile function was installed")
        return out


# --------------------------------------------------------------------------- measuring a model


class Capture:
    """A dynamo backend that counts compiles, records the aten ops AOT traces into each graph
    (and nested subgraphs), names what it could not trace into, and checks the guarded config
    from inside every compile (a config.patch around forward is only in effect there)."""

    def __init__(self, torch, guard: Guard | None, inner=None) -> None:
        self.torch, self.guard, self.inner = torch, guard, inner
        self.compiles = 0
        self.record = True
        self.aten: collections.Counter = collections.Counter()
        self.opaque: list[str] = []
        self.drift: list[str] = []

    def __call__(self, gm, example_inputs):
        from torch._dynamo.backends.common import aot_autograd

        self.compiles += 1
        if self.guard is not None:
            self.drift += self.guard.config_drift()
        if self.record:
            for node in gm.graph.nodes:
                if node.op == "call_function" and not self._traced(node.target):
                    self.opaque.append(f"call to {getattr(node.target, '__qualname__', node.target)} (not traced)")
        if self.inner is not None:
            return self.inner(gm, example_inputs)
        return aot_autograd(fw_compiler=self._forward)(gm, example_inputs)

    @staticmethod
    def _traced(target) -> bool:
        module = getattr(target, "__module__", None) or ""
        return module.split(".")[0] in TRACED_MODULES or not callable(target)

    def _forward(self, g, example_inputs):
        if self.record:
            for sub in g.modules():
                graph = getattr(sub, "graph", None)
                for node in graph.nodes if graph is not None else ():
                    if node.op != "call_function":
                        continue
                    ns = getattr(node.target, "namespace", None)
                    if ns is None:
                        continue  # operator.getitem and the like
                    name = (
                        node.target.overloadpacket.__name__
                        if hasattr(node.target, "overloadpacket")
                        else str(node.target)
                    )
                    if ns in OP_NAMESPACES:
                        self.aten[name.rstrip("_")] += 1
                    else:
                        self.opaque.append(f"custom op {ns}::{name}")
        return g.forward


def eager_ops(model, inputs: list, torch) -> collections.Counter:
    from torch.utils._python_dispatch import TorchDispatchMode

    ops: collections.Counter = collections.Counter()

    class Record(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__.rstrip("_")
            ns = getattr(func, "namespace", "aten")
            ops[name if ns in OP_NAMESPACES else f"{ns}::{name}"] += 1
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Record():
        model(*inputs)
    return ops


def coverage(eager: collections.Counter, compiled: collections.Counter) -> tuple[float, list[str]]:
    """The share of a module's eager aten ops (by name and count) traced into compiled graphs. A
    custom op counts as one op and is never covered: its body is not in any graph."""
    counted = {k: v for k, v in eager.items() if k not in UNCOUNTED}
    total = sum(counted.values())
    if total == 0:
        return 1.0, []
    covered = sum(min(v, compiled.get(k, 0)) for k, v in counted.items())
    missing = sorted(k for k, v in counted.items() if compiled.get(k, 0) < v)
    return covered / total, missing


def where(frames, files: dict[str, str]) -> str:
    """The last frame of a user stack in the task's or the submission's file, as file:line: text."""
    for f in reversed(list(frames or [])):
        name = files.get(getattr(f, "filename", ""))
        if name:
            return f"{name}:{f.lineno}: {(f.line or '').strip()}"
    return ""


def first_line(text: Any) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[0][:300] if lines else ""


class Recompiles(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record) -> None:
        self.messages.append(record.getMessage())


def guard_failures(messages: list[str]) -> list[str]:
    out = []
    for m in messages:
        for line in m.splitlines():
            line = line.strip()
            if line.startswith("- ") and "User stack" not in line and "File " not in line:
                out.append(line[2:].split("#")[0].strip()[:200])
                break
    return out


def graph_figures(module, inputs: list, sequence: list[list], ctx: dict) -> dict:
    """explain, fullgraph, coverage and recompiles of one module with the capture backend."""
    torch, guard, files = ctx["torch"], ctx["guard"], ctx["files"]
    eager = eager_ops(module, inputs, torch)
    out: dict[str, Any] = {"eager_ops": dict(eager)}
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            e = torch._dynamo.explain(module)(*inputs)
        reasons = []
        for b in e.break_reasons:
            item = {"reason": first_line(b.reason), "where": where(b.user_stack, files)}
            if item not in reasons:
                reasons.append(item)
        # explain gives graph_count - 1, so -1 when no graph was captured at all
        out.update(graphs=e.graph_count, breaks=max(0, e.graph_break_count), break_reasons=reasons[:20])
    except Exception as exc:  # noqa: BLE001 - a model dynamo cannot explain is a figure, not a crash
        out.update(graphs=None, breaks=None, break_reasons=[], explain_error=f"{type(exc).__name__}: {first_line(exc)}")

    torch._dynamo.reset()
    full = Capture(torch, guard)
    try:
        with torch.no_grad():
            torch.compile(module, backend=full, fullgraph=True)(*inputs)
        out["fullgraph"], out["fullgraph_error"] = True, ""
    except Exception as exc:  # noqa: BLE001
        out["fullgraph"], out["fullgraph_error"] = False, f"{type(exc).__name__}: {first_line(exc)}"

    torch._dynamo.reset()
    cap = Capture(torch, guard)
    handler = ctx["recompiles"]
    handler.messages.clear()
    with torch.no_grad():
        compiled = torch.compile(module, backend=cap)
        compiled(*inputs)
        cap.record = False
        first = cap.compiles
        for args in sequence:
            compiled(*args)
    out["recompiles"] = cap.compiles - first
    out["recompile_guards"] = guard_failures(handler.messages)[:10]
    cov, missing = coverage(eager, cap.aten)
    out.update(
        compiled_graphs=first,
        coverage=round(cov, 4),
        not_covered=missing[:20],
        opaque=sorted(set(cap.opaque))[:20],
        drift=sorted(set(full.drift + cap.drift)),
    )
    torch._dynamo.reset()
    return out


# --------------------------------------------------------------------------- the job's backend


def job_backend(plan: dict, torch, guard: Guard | None):
    """The job's backend, wrapped by a Capture that counts its compiles and checks the config."""
    name = plan["backend"]
    if name == "inductor":
        from torch._inductor.compile_fx import compile_fx

        patches = torch._inductor.list_mode_options(plan["mode"]) if plan.get("mode") else {}

        def inner(gm, ex):
            return compile_fx(gm, ex, config_patches=dict(patches) or None)
    else:
        from torch._dynamo.backends.registry import lookup_backend

        inner = lookup_backend(name)  # pyright: ignore[reportAssignmentType] - a dynamo backend, as compile_fx is
    cap = Capture(torch, guard, inner=inner)
    cap.record = False
    return cap


def triage(exc: BaseException) -> str:
    """Which stage of torch.compile a crash came from, by its exception's type and chain."""
    chain, seen = [], exc
    while seen is not None and len(chain) < 8:
        chain.append(f"{type(seen).__module__}.{type(seen).__name__}")
        seen = seen.__cause__ or seen.__context__
    text = " ".join(chain) + " " + str(exc)[:2000]
    if "CppCompileError" in text or "CalledProcessError" in text:
        return "c++ compile"
    if "LoweringException" in text or "MissingOperatorWithoutDecomp" in text:
        return "inductor lowering"
    if "torch._inductor" in text and "codegen" in text.lower():
        return "inductor codegen"
    if "BackendCompilerFailed" in text:
        return "aot_autograd" if "aot_autograd" in text or "functorch" in text else "inductor"
    if "torch._dynamo" in text:
        return "dynamo"
    return "runtime"


def crash_of(exc: BaseException) -> dict:
    return {
        "stage": triage(exc),
        "type": type(exc).__name__,
        "message": first_line(exc),
        "trace": traceback.format_exc()[-1500:],
    }


def compiled(model, plan: dict, guard: Guard | None, torch):
    """(the module compiled with the job's backend, None, its Capture); compiling is lazy, so a
    crash shows on the first call (lockstep)."""
    backend = job_backend(plan, torch, guard)
    try:
        return torch.compile(model, backend=backend), None, backend
    except Exception as exc:  # noqa: BLE001 - the crash is the figure
        return None, crash_of(exc), backend


def lockstep(reference, subject, args: list, plan: dict, torch) -> tuple[dict, dict | None]:
    """One call of the eager reference and of the compiled subject on the same arguments: the
    difference, and the subject's crash if it raised. The reference is copied before the call
    for the fp64 run (a model with state that changes per call is run from the same point)."""
    before = copy.deepcopy(reference)
    with torch.no_grad():
        want = tensors(reference(*args), torch)
        try:
            got = tensors(subject(*args), torch)
        except Exception as exc:  # noqa: BLE001
            return {"ok": False, "why": "crashed"}, crash_of(exc)
    return difference(want, got, plan, torch, fp64=lambda: before.double()(*to64(args, torch))), None


def backend_symptom(original: dict, fresh, task, inputs: list, plan: dict, guard: Guard | None, torch):
    """The job's backend on a fresh Model beside a fresh eager one: its crash (by stage) or its
    divergence, put into `original`; (the eager Model, the compiled one or None)."""
    ref_model = fresh(task.Model, plan["seed"])
    c_model, crash, _ = compiled(fresh(task.Model, plan["seed"]), plan, guard, torch)
    if c_model is not None:
        original["divergence"], crash = lockstep(ref_model, c_model, inputs, plan, torch)
        if crash is not None:
            c_model = None
    original["crash"] = crash
    return ref_model, c_model


def shapes(args: list, torch) -> list:
    return [list(a.shape) for a in args if isinstance(a, torch.Tensor)]


def to64(x, torch):
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.double()
    if isinstance(x, (list, tuple)):
        return type(x)(to64(v, torch) for v in x)
    return x


def difference(ref: list, got: list, plan: dict, torch, fp64=None) -> dict:
    """The worst output of one case against the eager reference: its error, the allowed error,
    and, where it is over, how far eager itself is from an fp64 run (`fp64`: a thunk)."""
    atol, rtol = plan["atol"], plan["rtol"]
    if len(ref) != len(got):
        return {"ok": False, "why": f"{len(got)} output tensors, eager gives {len(ref)}"}
    worst: dict[str, Any] = {"ok": True, "err": 0.0, "allowed": 0.0}
    worst_ratio = -1.0
    for i, (r, g) in enumerate(zip(ref, got, strict=True)):
        if tuple(r.shape) != tuple(g.shape) or r.dtype != g.dtype:
            return {
                "ok": False,
                "why": f"output {i}: {tuple(g.shape)} {g.dtype}, eager gives {tuple(r.shape)} {r.dtype}",
            }
        if not r.is_floating_point():
            if not torch.equal(r, g):
                return {"ok": False, "why": f"output {i}: integer values differ"}
            continue
        rr, gg = r.double(), g.double()
        finite = torch.isfinite(rr) & torch.isfinite(gg)
        some = bool(finite.any())
        err = float((rr - gg).abs()[finite].max()) if some else 0.0
        nan_or_inf_differ = not torch.equal(torch.isnan(rr), torch.isnan(gg)) or bool(
            (torch.isinf(rr) & (rr != gg)).any()
        )
        if nan_or_inf_differ or not torch.equal(torch.isinf(rr), torch.isinf(gg)):
            err = math.inf
        allowed = atol + rtol * (float(rr[finite].abs().max()) if some else 0.0)
        ratio = err / allowed if allowed > 0 else (math.inf if err > 0 else 0.0)
        if ratio > worst_ratio:
            worst, worst_ratio = {"ok": err <= allowed, "err": err, "allowed": allowed, "output": i}, ratio
    if not worst["ok"] and fp64 is not None and math.isfinite(worst["err"]):
        try:
            r64 = tensors(fp64(), torch)
            i = worst["output"]
            eager_err = float((ref[i].double() - r64[i]).abs().max())
            got_err = float((got[i].double() - r64[i]).abs().max())
            worst.update(eager_vs_fp64=eager_err, got_vs_fp64=got_err)
            if got_err <= plan["fp64_factor"] * eager_err + worst["allowed"]:
                worst["ok"], worst["ill_conditioned"] = True, True
        except Exception as exc:  # noqa: BLE001 - a model that cannot run in fp64 is judged in fp32
            worst["fp64_error"] = first_line(exc)
    return worst


def cases(task, plan: dict, torch) -> list[tuple[int, list]]:
    """(weight seed, inputs): held-out inputs per held-out seed, then the task's input sequence
    under the first seed's weights."""
    out = []
    for seed in plan["heldout_seeds"]:
        out.append((seed, as_list(seeded(seed + 1, task.get_inputs, torch))))
    if plan["heldout_seeds"]:
        for args in sequence_of(task, plan["seed"] + 2, torch):
            out.append((plan["heldout_seeds"][0], args))
    return out


def sequence_of(task, seed: int, torch) -> list[list]:
    if hasattr(task, "get_input_sequence"):
        return [as_list(a) for a in seeded(seed, task.get_input_sequence, torch)]
    return [as_list(seeded(seed, task.get_inputs, torch))]


# --------------------------------------------------------------------------- main


def main() -> None:
    plan = read_plan()
    warnings.filterwarnings("ignore")
    import torch
    import torch._dynamo
    import torch._dynamo.backends.common
    import torch._dynamo.backends.registry

    if plan["backend"] == "inductor":
        import torch._inductor.compile_fx
    import torch._logging

    torch.set_num_threads(plan["threads"])
    torch._logging.set_logs(recompiles=True)  # pyright: ignore[reportPrivateImportUsage] - dynamo's own switch for recompile reasons
    handler = Recompiles()
    recompiles = logging.getLogger("torch._dynamo.guards.__recompiles")
    recompiles.addHandler(handler)
    recompiles.propagate = False  # kept here, not printed: stderr is for what went wrong
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)  # graph breaks are figures here, not warnings
    files = {plan["task"]: "task.py", plan["fixed"]: os.path.basename(plan["fixed"])}
    started = time.perf_counter()

    try:
        task = load_entry(plan["task"], "assay_task")
        init = as_list(task.get_init_inputs()) if hasattr(task, "get_init_inputs") else []
        model = seeded(plan["seed"], lambda: task.Model(*init), torch).eval()
        inputs = as_list(seeded(plan["seed"] + 1, task.get_inputs, torch))
        sequence = sequence_of(task, plan["seed"] + 2, torch)
    except Exception:  # noqa: BLE001
        fail("task", traceback.format_exc())
    try:
        with torch.no_grad():
            ref = tensors(model(*inputs), torch)
    except Exception:  # noqa: BLE001
        fail("eager", traceback.format_exc())
    ctx = {"torch": torch, "guard": None, "files": files, "recompiles": handler}
    original = graph_figures(model, inputs, sequence, ctx)
    if plan.get("diagnose"):
        # the agent's tool: the original's symptom only, nothing submitted
        backend_symptom(
            original, lambda cls, seed: seeded(seed, lambda: cls(*init), torch).eval(), task, inputs, plan, None, torch
        )
        emit(
            {
                "ok": True,
                "original": original,
                "torch": torch.__version__,
                "judge_s": round(time.perf_counter() - started, 2),
            }
        )
        return

    guard = Guard(torch)
    ctx["guard"] = guard
    # Bound before the submission runs, so a replaced Guard.drift, emit or json encoder is not
    # what reports: the refusal line is encoded now, and written with os.write taken now.
    drift, write, dumps = guard.drift, os.write, json.dumps
    refusal = (
        RESULT_MARK + dumps({"ok": True, "original": original, "tamper": [REPORTING]}, default=str) + "\n"
    ).encode()

    def say(result: dict) -> None:
        sys.stdout.flush()
        if not result.get("tamper") and drift(counters_too=False):
            write(1, refusal)  # something was replaced since the check: trust no encoder now
            return
        try:
            line = (RESULT_MARK + dumps(result, default=str) + "\n").encode()
        except Exception:  # noqa: BLE001
            line = refusal
        write(1, line)

    def failed(stage: str, message: str) -> None:
        say({"ok": False, "stage": stage, "error": message[-4000:]})
        raise SystemExit(0)

    try:
        fixed = load_entry(plan["fixed"], "assay_fixed")
    except Exception:  # noqa: BLE001
        failed("import", traceback.format_exc())
    problems = isolation_problems(os.path.dirname(plan["fixed"])) + drift()
    if problems:
        say({"ok": True, "original": original, "tamper": problems})
        return
    try:
        new = fixed.ModelNew(*init).eval()
        new.load_state_dict(model.state_dict(), strict=True)
    except Exception:  # noqa: BLE001
        failed("load", traceback.format_exc())
    try:
        with torch.no_grad():
            new_eager = tensors(new(*inputs), torch)
    except Exception:  # noqa: BLE001
        failed("fixed_eager", traceback.format_exc())
    figures = graph_figures(new, inputs, sequence, ctx)

    # the job's backend: the original's crash or divergence, the fix's parity and speed. Each
    # compiled module is a fresh instance run in lockstep with a fresh eager Model, so a model
    # with state that changes per call is compared at the same point of its history.
    torch._dynamo.reset()

    def fresh(cls, seed: int):
        return seeded(seed, lambda: cls(*init), torch).eval()

    ref_model, c_model = backend_symptom(original, fresh, task, inputs, plan, guard, torch)
    subject = fixed.ModelNew(*init).eval()
    subject.load_state_dict(model.state_dict(), strict=True)
    reference = fresh(task.Model, plan["seed"])
    c_new, new_crash, backend = compiled(subject, plan, guard, torch)
    parity = []
    if c_new is not None:
        first, new_crash = lockstep(reference, c_new, inputs, plan, torch)
    figures["crash"] = new_crash
    figures["eager_parity"] = difference(ref, new_eager, plan, torch)
    if c_new is not None and new_crash is None:
        parity.append({**first, "shapes": shapes(inputs, torch)})
        for seed, args in cases(task, plan, torch):
            weights = fresh(task.Model, seed).state_dict()
            reference.load_state_dict(weights, strict=True)
            subject.load_state_dict(weights, strict=True)
            d, err = lockstep(reference, c_new, args, plan, torch)
            if err is not None:
                d = {"ok": False, "why": f"compiled ModelNew failed: {err['type']}: {err['message']}"}
            parity.append({**d, "shapes": shapes(args, torch)})
            if c_model is not None:
                # compiled Model sees the same calls, so both carry the same (static or
                # dynamic-shape) graphs into the timing, not a dynamic fix against a static Model
                try:
                    with torch.no_grad():
                        c_model(*args)
                except Exception:  # noqa: BLE001 - then it is not timed
                    c_model = None
        subject.load_state_dict(model.state_dict(), strict=True)
        reference.load_state_dict(model.state_dict(), strict=True)
    figures["parity"] = parity
    figures["backend_compiles"] = backend.compiles
    figures["drift"] = sorted(set(figures["drift"] + backend.drift))

    timing = []
    if plan["rounds"] and c_new is not None:
        calls = {"eager": lambda: ref_model(*inputs), "fixed": lambda: c_new(*inputs)}
        if c_model is not None:
            calls["original"] = lambda: c_model(*inputs)
        timing = flushed_rounds(calls, plan, torch, torch.no_grad)
    end = drift(counters_too=False) + isolation_problems(os.path.dirname(plan["fixed"]))
    say(
        {
            "ok": True,
            "original": original,
            "fixed": figures,
            "tamper": end + figures["drift"],
            "timing": timing,
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "judge_s": round(time.perf_counter() - started, 2),
        }
    )


def run() -> None:
    # taken before the submission is imported: an uncaught error after it is reported with these,
    # never through a function the submission could have replaced
    write, dumps, format_exc = os.write, json.dumps, traceback.format_exc
    try:
        main()
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001 - said as the result line, not lost among dynamo's logs
        text = dumps({"ok": False, "stage": "harness", "error": format_exc()[-4000:]}, default=str)
        write(1, (RESULT_MARK + text + "\n").encode())


if __name__ == "__main__":
    run()
