"""Held-out seeds and sizes: what a submission is judged on and could not have seen.

One `HeldOut` per verification: a generator seeded from `secrets`, kept in the verifier's
process; only the seeds it draws (and inputs made from them in a reference sandbox) ever leave
it. For KernelBench-style tasks it also draws other values of the task's module-level size
constants, so a submission tuned to the example's shapes shows it.
"""

from __future__ import annotations

import ast
import random
import secrets


class HeldOut:
    def __init__(self) -> None:
        self.rng = random.Random(secrets.randbits(128))  # the verifier's secret; never leaves this process whole

    def seed(self) -> int:
        return self.rng.getrandbits(62)

    def seeds(self, n: int) -> list[int]:
        return [self.seed() for _ in range(n)]

    def shape_variants(self, sizes: dict[str, int], count: int) -> list[dict[str, int]]:
        return shape_variants(sizes, count, self.rng)


def size_constants(tree: ast.Module, minimum: int) -> dict[str, int]:
    """The task's module-level int constants of at least `minimum`: its sizes, by name."""
    sizes = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        if isinstance(value, ast.Constant) and type(value.value) is int and value.value >= minimum:
            sizes[name] = value.value
    return sizes


def shape_variants(sizes: dict[str, int], count: int, rng: random.Random) -> list[dict[str, int]]:
    """Other values for the task's size constants: odd (vector widths do not divide them),
    smaller than the task's own (so they stay cheap), different from each other."""
    ranges = [(0.25, 0.5), (0.5, 0.95), (0.34, 0.7), (0.2, 0.8)]
    variants: list[dict[str, int]] = []
    for k in range(count):
        lo_f, hi_f = ranges[k % len(ranges)]
        over = {}
        for name, c in sizes.items():
            lo, hi = max(3, int(c * lo_f)), max(4, int(c * hi_f))
            v = rng.randrange(lo, hi + 1) | 1
            if v == c:
                v = max(3, c - 2) | 1
            over[name] = v
        if over not in variants:
            variants.append(over)
    return variants
