"""Job files, fuzzed: whatever the bytes, `load_job` returns a valid Job or raises one UserError
whose message is one bounded line; never a traceback, never another exception type."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import pytest
from agent_helpers import REPO, SOFTMAX
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assay.agents.job import MAX_JOB_BYTES, Job, load_job
from assay.errors import UserError

FIELDS = ["kind", "task", "brain", "manifest", "criteria", "budget", "sandbox", "padding", "kernel"]
FUZZ = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


# -- a TOML writer for arbitrary structures (inline tables and arrays, quoted keys) ----------------


def toml_str(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            out.append("?")  # lone surrogates cannot be written as UTF-8
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return toml_str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{toml_str(k)} = {toml_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(type(v))


def to_toml(d: dict) -> str:
    return "".join(f"{toml_str(k)} = {toml_value(v)}\n" for k, v in d.items())


scalars = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12,
)


def assert_clean(path: Path):
    """The property: a Job, or one UserError of one bounded line."""
    try:
        job = load_job(path)
    except UserError as exc:
        text = str(exc)
        assert text and "\n" not in text and "\r" not in text, repr(text)
        assert len(text) <= 1000, len(text)
        assert text.isprintable(), repr(text)
        return None
    assert isinstance(job, Job)
    assert job.kind == "kernel" and job.task_path.is_file()
    assert 1 <= job.budget.steps <= 10_000 and 0 < job.budget.minutes <= 24 * 60
    return job


@pytest.fixture
def place(tmp_path):
    (tmp_path / "task.py").write_text(SOFTMAX.read_text())

    def write(content: bytes | str, name: str = "job.toml") -> Path:
        p = tmp_path / name
        p.write_bytes(content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content)
        return p

    return write


@FUZZ
@given(st.binary(max_size=3000))
def test_random_bytes(place, data):
    assert_clean(place(data))


@FUZZ
@given(st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=20)), values, max_size=8))
def test_random_toml_structures(place, d):
    assert_clean(place(to_toml(d)))


budgets = st.dictionaries(st.sampled_from(["steps", "minutes", "tokens", "seconds", ""]), values, max_size=4)
job_dicts = st.fixed_dictionaries(
    {"kind": st.one_of(st.just("kernel"), values), "task": st.one_of(st.just("task.py"), values)},
    optional={
        "brain": st.one_of(
            st.sampled_from(["playbook", "local", "openai-chat:gpt-4o", "x@http://h/v1", "nope"]), values
        ),
        "manifest": values,
        "criteria": st.one_of(st.sampled_from(["kernel-default", "../x", "a b"]), values),
        "budget": st.one_of(budgets, values),
        "sandbox": st.one_of(st.fixed_dictionaries({"backend": values}), values),
        "padding": values,
        "kernel": st.one_of(st.fixed_dictionaries({"backend": st.one_of(st.just("cpp"), values)}), values),
        "threshold": values,
        "options": values,
        "source": values,
    },
)


@FUZZ
@given(job_dicts)
def test_almost_valid_jobs(place, d):
    assert_clean(place(to_toml(d)))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(0, 3), st.text(max_size=3)), max_size=6))
def test_edits_of_the_main_job_file(place, edits):
    text = (
        (REPO / "examples" / "kernel" / "softmax.toml").read_text().replace('task = "softmax.py"', 'task = "task.py"')
    )
    for at, cut, insert in edits:
        at = min(at, len(text))
        text = text[:at] + insert + text[at + cut :]
    assert_clean(place(text))


@pytest.mark.parametrize(
    "budget, words",
    [
        ("steps = 0", "budget.steps"),
        ("steps = -1", "budget.steps"),
        ("steps = 100001", "budget.steps"),
        ('steps = "3"', "budget.steps"),
        ("steps = 2.5", "budget.steps"),
        ("steps = true", "budget.steps"),
        ("minutes = 0", "budget.minutes"),
        ("minutes = nan", "budget.minutes"),
        ("minutes = inf", "budget.minutes"),
        ("minutes = -inf", "budget.minutes"),
        ("minutes = 1e400", "budget.minutes"),
        ("tokens = 0", "budget.tokens"),
        ("tokens = -5", "budget.tokens"),
        ("hours = 1", "budget.hours"),
        ("steps = [1]", "budget.steps"),
    ],
)
def test_bad_budgets_name_the_field(place, budget, words):
    p = place(f'kind = "kernel"\ntask = "task.py"\n[budget]\n{budget}\n')
    with pytest.raises(UserError) as err:
        load_job(p)
    assert words in str(err.value)


@pytest.mark.parametrize(
    "text, words",
    [
        ('kind = "port"\ntask = "task.py"\n', "field 'kind' is 'port'"),
        # a kernel task under a quant job: named at load, not a run whose agent finds no model
        ('kind = "quant"\ntask = "task.py"\n', "defines no get_model"),
        ('task = "task.py"\n', "field 'kind' is None"),
        ('kind = 3\ntask = "task.py"\n', "field 'kind' is 3"),
        ('kind = "kernel"\n', "field 'task'"),
        ('kind = "kernel"\ntask = "missing.py"\n', "not found"),
        ('kind = "kernel"\ntask = "task.py"\nthreshold = 0.1\n', "sets 'threshold'"),
        ('kind = "kernel"\ntask = "task.py"\n[kernel]\nbackend = "cuda"\n', "kernel.backend"),
        ('kind = "kernel"\ntask = "task.py"\nkernel = 5\n', "kernel"),
        ('kind = "kernel"\ntask = "task.py"\ncriteria = "../../etc"\n', "field 'criteria'"),
        ('kind = "kernel"\ntask = "task.py"\nbrain = "nope"\n', "field 'brain'"),
        ('kind = "kernel"\ntask = "task.py"\n"bad\\nkey" = 1\n', "bad\\nkey"),
        ('kind = "kernel"\ntask = "\\u0000"\n', "field 'task' is not a usable path"),
        ('kind = "kernel"\ntask = "' + "a" * 5000 + '"\n', "field 'task' is not a usable path"),
        ("kind = " + "[" * 5000 + "]" * 5000 + "\n", "nests arrays or tables too deeply"),
        ("kind = " + "{a = " * 600 + "1" + "}" * 600 + "\n", "kind"),
        ('kind = "' + "k" * 100_000 + '"\ntask = "task.py"\n', "field 'kind' is 'kkkk"),
    ],
)
def test_specific_mistakes(place, text, words):
    p = place(text)
    with pytest.raises(UserError) as err:
        load_job(p)
    msg = str(err.value)
    assert words in msg and "\n" not in msg and len(msg) <= 1000, msg[:300]


def test_not_utf8_missing_directory_and_special_files(place, tmp_path):
    with pytest.raises(UserError, match="not UTF-8"):
        load_job(place(b'kind = "kernel"\ntask = "\xff\xfe"\n'))
    with pytest.raises(UserError, match="not found"):
        load_job(tmp_path / "nope.toml")
    with pytest.raises(UserError, match="not a regular file"):
        load_job(tmp_path)
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="not a regular file"):
        load_job(fifo)  # would block forever on open()
    with pytest.raises(UserError, match="not a regular file"):
        load_job("/dev/zero")  # would never end
    with pytest.raises(UserError, match="cannot be read|not found"):
        load_job("job\x00.toml")


def test_huge_files_are_refused_quickly(place):
    for text in ("".join(f"k{i} = {i}\n" for i in range(200_000)), "# " + "x" * (MAX_JOB_BYTES * 40) + "\n"):
        p = place(text)
        t0 = time.monotonic()
        with pytest.raises(UserError, match="at most|over"):
            load_job(p)
        assert time.monotonic() - t0 < 1.0


def test_a_valid_job_round_trips(place):
    job = assert_clean(place('kind = "kernel"\ntask = "task.py"\n[budget]\nsteps = 3\nminutes = 0.5\ntokens = 100\n'))
    assert job is not None and job.budget.steps == 3 and job.budget.tokens == 100
