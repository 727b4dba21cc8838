"""The manifest loader: clear errors naming the field and the fix, and never a traceback."""

from __future__ import annotations

import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.errors import UserError
from assay.policies.manifest import Manifest, load_manifest, parse_manifest, shipped_manifest_path


def test_shipped_manifests_load(shipped_manifests):
    for path in shipped_manifests:
        m = load_manifest(path)
        assert m.role == path.stem
        assert m.tools, path


def test_shipped_manifest_lookup():
    assert shipped_manifest_path("kernel-agent").name == "kernel-agent.toml"
    with pytest.raises(UserError, match="kernel-agent"):
        shipped_manifest_path("root")


def test_a_string_condition_reads_as_a_one_element_list(make_manifest):
    m = make_manifest(
        'role = "r"\n[tools.exec]\nexecutables = "python"\n[[tools.exec.rules]]\neffect = "allow"\npath = "src/**"\n'
    )
    assert m.tools["exec"].executables == ["python"]
    assert m.tools["exec"].rules[0].path == ["src/**"]
    assert m.tools["exec"].default == "deny"  # secure default


@pytest.mark.parametrize(
    ("text", "where", "fix"),
    [
        ('role = "r"\n[tools.exec]\nmax_timout_s = 3\n', "unknown field tools.exec.max_timout_s", "max_timeout_s"),
        ('role = "r"\n[[tools.exec.rules]]\neffect = "allw"\n', "tools.exec.rules[#1].effect", "one of the values"),
        ('role = "r"\n[tools.exec]\nmax_timeout_s = "60"\n', "tools.exec.max_timeout_s", "without quotes"),
        (
            'role = "r"\n[tools.exec]\nexecutables = ["/usr/bin/python"]\n',
            "tools.exec.executables[0]",
            "bare program name",
        ),
        ('role = "r"\n[tools.exec]\nexecutables = ["./python"]\n', "tools.exec.executables[0]", "bare program name"),
        ('role = "r"\n[tools.read_file]\npaths = ["src/[ab]*"]\n', "tools.read_file.paths[0]", "glob relative"),
        ('role = "r"\n[tools.read_file]\npaths = []\n', "tools.read_file.paths", "at least one"),
        ('role = "r"\n[tools.exec]\nrate = { per_run = 0 }\n', "tools.exec.rate.per_run", "larger value"),
        ('role = "r"\n[tools.exec]\nmax_timeout_s = nan\n', "tools.exec.max_timeout_s", ""),
        ('role = "r"\n[tools.exec]\nrestore_placeholders = "no"\n', "restore_placeholders", "true or false"),
        ('role = "Kernel Agent"\n', "role", "lower-case"),
        ('[tools.exec]\ndefault = "allow"\n', "role is required", "add role"),
        ('role = "r"\n[tools."Read File"]\n', "tools.Read File (the name)", "tool names"),
        ('format = 2\nrole = "r"\n', "format", "format = 1"),
        ('role = "r"\nrole = "s"\n', "not valid TOML", "TOML syntax"),
    ],
)
def test_errors_name_the_field_and_the_fix(text, where, fix):
    with pytest.raises(UserError) as exc:
        parse_manifest(text.encode(), "m.toml")
    assert where in exc.value.problem and "m.toml" in exc.value.problem
    assert fix in (exc.value.fix or "")


@pytest.mark.parametrize(
    "data", [b"\xff\xfe role", b"a = [" * 10_000 + b"]" * 10_000, b"x" * (2 << 20), b"a = {" * 5000]
)
def test_hostile_bytes_give_user_errors(data):
    with pytest.raises(UserError):
        parse_manifest(data, "m.toml")


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_manifest(tmp_path / "nope.toml")
    with pytest.raises(UserError, match="is a directory"):
        load_manifest(tmp_path)


def _parse_or_user_error(data: bytes) -> None:
    try:
        m = parse_manifest(data, "fuzz.toml")
    except UserError as exc:
        assert str(exc).strip()
        return
    assert isinstance(m, Manifest)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400))
def test_fuzz_raw_bytes(data):
    _parse_or_user_error(data)


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["allow", "deny", "approve", "**", "../x", "python", "/bin/sh", "src/*.py"]),
)
_keys = st.sampled_from(
    [
        "role",
        "format",
        "tools",
        "exec",
        "read_file",
        "rules",
        "effect",
        "path",
        "paths",
        "executable",
        "executables",
        "timeout_s",
        "min",
        "max",
        "max_timeout_s",
        "max_output_bytes",
        "rate",
        "per_minute",
        "per_run",
        "default",
        "egress",
        "restore_placeholders",
        "name",
        "reason",
        "description",
        "x",
    ]
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_keys, inner, max_size=4)),
    max_leaves=12,
)


def _to_toml(doc: dict) -> bytes:
    """A minimal TOML writer: inline tables and arrays, enough for structured fuzzing."""

    def val(v):
        if v is None:
            return '""'
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return {float("inf"): "inf", float("-inf"): "-inf"}.get(v, "nan" if v != v else repr(v))
        if isinstance(v, str):
            return '"' + v.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return "{" + ", ".join(f'"{k}" = {val(x)}' for k, x in v.items()) + "}"

    return "\n".join(f'"{k}" = {val(v)}' for k, v in doc.items()).encode()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_keys, _values, max_size=5))
def test_fuzz_structured_documents(doc):
    data = _to_toml(doc)
    try:
        tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, ValueError):
        pass  # the writer's edge cases; the loader must still answer with a UserError
    _parse_or_user_error(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tool=st.text(alphabet="abcdef_-XY ", min_size=1, max_size=8),
    patterns=st.lists(st.text(max_size=12), max_size=3),
    exes=st.lists(st.text(max_size=8), max_size=3),
    effect=st.text(max_size=8),
)
def test_fuzz_fields_of_a_plausible_manifest(tool, patterns, exes, effect):
    doc = {
        "role": "fuzz",
        "tools": {tool: {"paths": patterns, "executables": exes, "rules": [{"effect": effect, "path": patterns}]}},
    }
    _parse_or_user_error(_to_toml(doc))
