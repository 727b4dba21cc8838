"""Path arguments from a hostile model, and the glob language both enforcement and z3 read."""

from __future__ import annotations

import os

import pytest
import z3
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.errors import UserError
from assay.policies.analysis import glob_regex, prefixed
from assay.policies.paths import PathRefused, glob_match, normalize_relpath, resolve_in_workspace


@pytest.mark.parametrize(
    "path",
    ["..", "../x", "a/../../x", "a/..", "/etc/passwd", "//etc/passwd", "a\x00b", "src/\x00", "x/" * 3000],
)
def test_traversal_and_absolute_paths_are_refused(path):
    with pytest.raises(PathRefused):
        normalize_relpath(path)


@pytest.mark.parametrize("path", [None, 3, ["a"], b"a"])
def test_non_string_paths_are_refused(path):
    with pytest.raises(PathRefused, match="must be a string"):
        normalize_relpath(path)


@pytest.mark.parametrize(
    ("raw", "norm"),
    [("", ""), (".", ""), ("./", ""), ("a//b/./c", "a/b/c"), ("src/", "src"), ("...", "..."), (".x/..y", ".x/..y")],
)
def test_normalization(raw, norm):
    assert normalize_relpath(raw) == norm


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("**", "", True),
        ("**", "a/b/c.py", True),
        ("**", ".git/config", False),  # wildcards skip dot-names
        ("**", "a/.env", False),
        ("src/**", "src", True),
        ("src/**", "src/a/b", True),
        ("src/**", "srcx/a", False),
        ("**/*.py", "a.py", True),
        ("**/*.py", "a/b/c.py", True),
        ("**/*.py", "a/b/c.pyc", False),
        ("*.py", "a/b.py", False),  # `*` stays in one segment
        ("*", "", False),  # a wildcard segment never matches an empty name
        (".*", "..", True),  # the shell's old footgun, which `policy check` reports
        (".*", ".env", True),
        ("?", "a", True),
        ("?", ".", False),
        ("task.py", "task.py", True),
        ("a/*/c", "a/b/c", True),
        ("a/*/c", "a/c", False),
    ],
)
def test_glob_semantics(pattern, path, expected):
    assert glob_match(pattern, path) is expected


# Alphabet chosen to hit the interesting characters: separators, dots, wildcards' targets.
_names = st.text(alphabet="ab.", min_size=1, max_size=4).filter(lambda s: s not in (".", ".."))
_paths = st.lists(_names, max_size=4).map("/".join)
_pattern_segments = st.one_of(
    st.just("**"),
    st.text(alphabet="ab.*?", min_size=1, max_size=4).filter(lambda s: s != "**"),
)
_patterns = st.lists(_pattern_segments, min_size=1, max_size=3).map("/".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=_patterns, path=_paths)
def test_enforcement_and_z3_agree_on_globs(pattern, path):
    """The proofs are about the matcher that enforces: the two must accept the same paths."""
    in_z3 = z3.simplify(z3.InRe(z3.StringVal(prefixed(path)), glob_regex(pattern)))
    assert z3.is_true(in_z3) == glob_match(pattern, path), (pattern, path)


def test_resolve_in_workspace_refuses_symlink_out(tmp_path):
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret")
    os.symlink(secret, ws / "src" / "link.txt")
    os.symlink(tmp_path, ws / "up")
    os.symlink(tmp_path / "missing", ws / "dangling")
    for rel in ["src/link.txt", "up/secret.txt", "up", "dangling", "dangling/new.txt"]:
        with pytest.raises(UserError, match="outside the workspace"):
            resolve_in_workspace(ws, rel)


def test_resolve_in_workspace_refuses_traversal_by_name(tmp_path):
    for rel in ["../x", "/etc/passwd", "a/../../x", "a\x00b"]:
        with pytest.raises(UserError):
            resolve_in_workspace(tmp_path, rel)


def test_resolve_in_workspace_follows_inner_symlinks_and_new_files(tmp_path):
    ws = tmp_path / "ws"
    (ws / "real").mkdir(parents=True)
    os.symlink(ws / "real", ws / "alias")
    assert resolve_in_workspace(ws, "alias/new.txt") == (ws / "real" / "new.txt").resolve()
    assert resolve_in_workspace(ws, ".") == ws.resolve()


def test_resolve_in_workspace_reports_symlink_loops(tmp_path):
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    with pytest.raises(UserError):
        resolve_in_workspace(tmp_path, "a/x")
