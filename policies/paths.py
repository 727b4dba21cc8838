"""Workspace paths and the glob language of capability manifests.

One definition of "which paths a pattern admits" serves two readers: the enforcement code
(`glob_match`) and the z3 analysis (`assay.policies.analysis`), which encodes the same
language as a regular expression. Both follow the rules below, and a test checks that
they agree.

Glob rules (patterns are relative to the workspace, segments split on `/`):
- `*` matches any run of characters in one segment, `?` exactly one;
- `**` as a whole segment matches zero or more segments, so `src/**` admits `src` itself
  and everything below it, and `**` alone admits the workspace root too;
- a segment that contains a wildcard never matches an empty name, and never matches a
  name starting with `.` unless the pattern segment itself starts with `.` (the shell's
  dot-file rule: `*` and `**` cannot reach `..`, but `.*` can, which the analysis flags);
- wildcards never match `/` or NUL; segments without wildcards match literally;
- no character classes, braces or escapes: list patterns separately instead.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import re2

from assay.errors import UserError

# Linux limits; a longer path cannot name a real file, and bounding it bounds matching work.
MAX_PATH_CHARS = 4096
MAX_NAME_CHARS = 255
MAX_PATTERN_CHARS = 1024
# z3's string alphabet stops at U+2FFFF; patterns stay inside it so both readers agree.
MAX_PATTERN_CODEPOINT = 0x2FFFF
FORBIDDEN_PATTERN_CHARS = "[]{}\\"


class PathRefused(ValueError):
    """A path argument that must not reach a tool; the message is for the model to read."""


def pattern_problem(pattern: str) -> str | None:
    """Why `pattern` is not a glob this module can match, or None when it is one."""
    if not pattern:
        return "a pattern must not be empty (use '**' for the whole workspace)"
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"a pattern is at most {MAX_PATTERN_CHARS} characters"
    for ch in pattern:
        if ch in FORBIDDEN_PATTERN_CHARS:
            return f"'{ch}' is not supported (no character classes, braces or escapes; list patterns separately)"
        if ord(ch) < 0x20 or ord(ch) == 0x7F or ord(ch) > MAX_PATTERN_CODEPOINT:
            return f"character U+{ord(ch):04X} is not allowed in a pattern"
    return None


def has_wildcard(segment: str) -> bool:
    return "*" in segment or "?" in segment


def normalize_relpath(path: object) -> str:
    """The canonical workspace-relative form of a path argument, or PathRefused.

    Refuses what could leave the workspace by name alone: absolute paths, `..` segments,
    NUL. Empty and `.` segments are dropped, so `./a//b` and `a/b` are the same path and
    match the same patterns; the workspace root is the empty string.
    """
    if not isinstance(path, str):
        raise PathRefused(f"a path must be a string, got {type(path).__name__}")
    if "\x00" in path:
        raise PathRefused("a path must not contain a NUL byte")
    if len(path) > MAX_PATH_CHARS:
        raise PathRefused(f"a path is at most {MAX_PATH_CHARS} characters")
    if path.startswith("/"):
        raise PathRefused(f"absolute path {_show(path)} refused: give a path relative to the workspace")
    parts = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise PathRefused(f"path {_show(path)} refused: '..' segments are not allowed")
        if len(part) > MAX_NAME_CHARS:
            raise PathRefused(f"a path segment is at most {MAX_NAME_CHARS} characters")
        parts.append(part)
    return "/".join(parts)


def _show(path: str) -> str:
    # Arguments come from the model; echo a bounded, printable form only.
    return repr(path if len(path) <= 80 else path[:77] + "...")


@lru_cache(maxsize=4096)
def _segment_regex(segment: str):
    pieces = []
    for ch in segment:
        if ch == "*":
            pieces.append(r"[^/\x00]*")
        elif ch == "?":
            pieces.append(r"[^/\x00]")
        else:
            pieces.append(re2.escape(ch))
    # RE2 matches in time linear in the name: paths come from the model.
    return re2.compile("".join(pieces))


def _segment_match(pattern_segment: str, name: str) -> bool:
    if not has_wildcard(pattern_segment):
        return pattern_segment == name
    if not name:
        return False
    if name.startswith(".") and not pattern_segment.startswith("."):
        return False
    return _segment_regex(pattern_segment).fullmatch(name) is not None


def _deep_name_ok(name: str) -> bool:
    # What one segment under `**` may be: non-empty and not a dot-name.
    return bool(name) and not name.startswith(".")


def glob_match(pattern: str, relpath: str) -> bool:
    """Whether a normalized relative path (see normalize_relpath) is admitted by pattern."""
    pat = pattern.split("/")
    names = relpath.split("/") if relpath else []
    # Dynamic programming over (pattern segment, path segment), bottom-up so a path of
    # thousands of segments costs O(len(pat) * len(names)) time and no stack:
    # ok[j] says whether pat[i:] matches names[j:], for the current i.
    n = len(names)
    ok = [False] * n + [True]  # i == len(pat): only the empty rest matches
    for i in range(len(pat) - 1, -1, -1):
        nxt = [False] * (n + 1)
        if pat[i] == "**":
            nxt[n] = ok[n]
            for j in range(n - 1, -1, -1):
                nxt[j] = ok[j] or (_deep_name_ok(names[j]) and nxt[j + 1])
        else:
            for j in range(n - 1, -1, -1):
                nxt[j] = _segment_match(pat[i], names[j]) and ok[j + 1]
        ok = nxt
    return ok[0]


def resolve_in_workspace(workspace: str | os.PathLike[str], relpath: str) -> Path:
    """The real path of `relpath` inside `workspace`, symlinks resolved, or UserError.

    Tools call this at call time, after the policy admitted the path by name: a symlink
    the agent planted inside the workspace can point anywhere, and only resolving it shows
    where the call would land. The target need not exist yet (write_file). There is still
    a window between this check and the open; tools that need more open with O_NOFOLLOW.
    """
    try:
        rel = normalize_relpath(relpath)
    except PathRefused as exc:
        raise UserError(str(exc), "give a path relative to the workspace, without '..'") from None
    root = Path(workspace).resolve(strict=True)
    try:
        target = (root / rel).resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # symlink loops end here
        raise UserError(f"path {_show(relpath)} cannot be resolved ({exc})", "remove the symlink loop") from None
    if target != root and not target.is_relative_to(root):
        raise UserError(
            f"path {_show(relpath)} resolves outside the workspace (a symlink points out of it)",
            "use a path whose real location is inside the workspace",
        )
    return target
