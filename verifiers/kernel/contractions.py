"""The reference's own contractions: the one kind of torch compute a candidate's forward may call.

A KernelBench candidate keeps the reference's convolution or matmul in ATen (oneDNN, MKL) and
fuses what follows it: the speedup is the fusion's, and the contraction is the same work either
way. So the op recorder (harness/opwatch.cpp) keeps each contraction the forward opens (a root),
with its tensor inputs' sizes, and every op that runs inside one; the check worker records the
reference's forward the same way, in the same process, before the candidate is imported, and
the supervisor keeps that record out of the candidate's reach.

Per call, the candidate may open at most the reference's roots: the same contraction on the
same operands' sizes, as many times. A bias may go to the epilogue (conv2d with or without one
is the same convolution), and conv2d, convolution and _convolution are one op spelt three ways.
Inside its roots, only ops the reference ran inside its own, allocation and views, and the
contractions' own steps may run. A contraction the reference does not make (a softmax's sums
done by a matmul), one on other sizes, one more than the reference's, or other compute inside
one is refused by name. The CPU time spent inside the roots is the contraction's, not torch's
(samples.py).
"""

from __future__ import annotations

# One op spelt several ways (the functional name, the op it calls, the one that one calls).
_SAME = {
    "aten::conv1d": "aten::convolution",
    "aten::conv2d": "aten::convolution",
    "aten::conv3d": "aten::convolution",
    "aten::_convolution": "aten::convolution",
    "aten::addmm": "aten::mm",
    "aten::baddbmm": "aten::bmm",
}
# Where the operands are among the inputs: the bias (or the added matrix) comes first here.
_OPERANDS_FROM = {"aten::addmm": 1, "aten::baddbmm": 1}


def operands(key: str) -> str:
    """'aten::conv2d([2,3,16,16];[8,3,3,3];[8];;;;)' -> 'aten::convolution([2,3,16,16];[8,3,3,3])':
    the contraction and its two operands' sizes, the bias and scalars left out."""
    name, _, rest = key.partition("(")
    inputs = rest[:-1].split(";") if rest.endswith(")") else []
    start = _OPERANDS_FROM.get(name, 0)
    return f"{_SAME.get(name, name)}({';'.join(inputs[start : start + 2])})"


def beyond(made: dict | None, reference: dict | None, run_id: int | str, ops, calls: int = 1) -> tuple[dict, dict]:
    """(what `made` over `calls` forward calls has beyond the reference's record for run
    `run_id`, that allowance) as excess() and allowance() give them; `ops`: the criteria's
    [ops], whose allocation, views and contractions may run inside a contraction too."""
    theirs = allowance(reference, run_id)
    return excess(made, theirs, calls, frozenset(ops.allowed) | frozenset(ops.contractions)), theirs


def allowance(reference: dict | None, run_id: int | str) -> dict:
    """What the reference's forward opened, and ran inside, on run `run_id`'s inputs
    (`reference`: the recorded runs by id): {"roots": {operands: n}, "inside": {op name, ...}}."""
    got = reference.get(str(run_id)) if isinstance(reference, dict) else None
    roots: dict[str, int] = {}
    inside: set[str] = set()
    if isinstance(got, dict):
        for key, n in _counts(got.get("roots")).items():
            roots[operands(key)] = roots.get(operands(key), 0) + n
        inside = {k.partition("(")[0] for k in _counts(got.get("inside"))}
    return {"roots": roots, "inside": inside}


def excess(
    made: dict | None, allowed: dict, calls: int = 1, also_inside: frozenset[str] = frozenset()
) -> dict[str, int]:
    """What `made` over `calls` forward calls has beyond `allowed` (allowance()): roots
    over the reference's per call, and ops inside them the reference's did not run (nor are
    `also_inside`: allocation, views, the contractions' own steps). {description: how many}."""
    made = made if isinstance(made, dict) else {}
    over: dict[str, int] = {}
    mine: dict[str, int] = {}
    for key, n in _counts(made.get("roots")).items():
        mine[operands(key)] = mine.get(operands(key), 0) + n
    for key, n in mine.items():
        extra = n - allowed["roots"].get(key, 0) * max(calls, 0)
        if extra > 0:
            over[named(key)] = extra
    for key, n in _counts(made.get("inside")).items():
        name = key.partition("(")[0]
        if name not in allowed["inside"] and name not in also_inside:
            what = f"{name} inside a contraction"
            over[what] = over.get(what, 0) + n
    return over


def named(key: str) -> str:
    """'aten::convolution([2,3,16,16];[8,3,3,3])' as 'aten::convolution on [2,3,16,16], [8,3,3,3]'."""
    name, _, rest = key.partition("(")
    sizes = [s for s in rest.rstrip(")").split(";") if s]
    return f"{name} on {', '.join(sizes)}" if sizes else name


def refusal(over: dict[str, int], allowed: dict) -> str:
    """One reason for what went beyond the reference's contractions."""
    shown = ", ".join(f"{k} x{n}" for k, n in sorted(over.items(), key=lambda kv: -kv[1])[:6])
    roots = sorted(f"{named(k)} x{n}" for k, n in allowed["roots"].items())
    theirs = "; the reference's own, a call: " + ", ".join(roots[:4]) if roots else "; the reference makes none"
    return f"contractions beyond the reference's own (the same op on the same sizes, as often): {shown}{theirs}"


def _counts(part) -> dict[str, int]:
    if not isinstance(part, dict):
        return {}
    return {str(k): v for k, v in part.items() if isinstance(v, int) and not isinstance(v, bool) and v > 0}
