"""Reports for pipelines: the JSON, JUnit XML and SARIF files `assay run` writes validate against
their schemas (SARIF 2.1.0's own JSON schema, the Ant JUnit XSD, assay's report schema; see
tests/cli/data/SOURCES.md), say what the signed verdict says, and the exit code follows it:
0 only when every verdict passes, 1 when any fails or waits, 2 for usage errors."""

from __future__ import annotations

import json
import re
import string
import sys
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

import pytest
from agent_helpers import assay, latest_run_id, open_ledger, write_job
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

DATA = Path(__file__).parent / "data"
xmlschema = pytest.importorskip("xmlschema", reason="pip install -e '.[test]' (xmlschema validates the JUnit XML)")
import jsonschema  # noqa: E402

# jsonschema checks these formats only with optional packages; SARIF relies on them, so here
# they are, strictly: ASCII, no spaces or controls (RFC 3986), a scheme for an absolute URI.
FORMATS = jsonschema.FormatChecker()
_URI_CHARS = set(string.ascii_letters + string.digits + "-._~:/?#[]@!$&'()*+,;=%")


@FORMATS.checks("uri-reference")
def _uri_reference(value) -> bool:
    return not isinstance(value, str) or (set(value) <= _URI_CHARS and not re.search(r"%(?![0-9A-Fa-f]{2})", value))


@FORMATS.checks("uri")
def _uri(value) -> bool:
    return not isinstance(value, str) or (_uri_reference(value) and bool(re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", value)))


@FORMATS.checks("date-time")
def _date_time(value) -> bool:
    try:
        return not isinstance(value, str) or bool(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return False


SARIF = jsonschema.Draft7Validator(json.loads((DATA / "sarif-schema-2.1.0.json").read_text()), format_checker=FORMATS)
REPORT = jsonschema.Draft7Validator(json.loads((DATA / "assay-report.schema.json").read_text()), format_checker=FORMATS)
JUNIT = xmlschema.XMLSchema(str(DATA / "JUnit.xsd"))


def validate(json_path: Path | None = None, junit: Path | None = None, sarif: Path | None = None) -> dict:
    docs = {}
    if json_path is not None:
        docs["json"] = json.loads(json_path.read_text(encoding="utf-8"))
        errors = sorted(REPORT.iter_errors(docs["json"]), key=str)
        assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
    if sarif is not None:
        docs["sarif"] = json.loads(sarif.read_text(encoding="utf-8"))
        errors = sorted(SARIF.iter_errors(docs["sarif"]), key=str)
        assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
    if junit is not None:
        JUNIT.validate(str(junit))  # raises with the first violation
        docs["junit"] = ET.parse(junit).getroot()
    return docs


def report_args(tmp_path: Path) -> tuple[list[str], Path, Path, Path]:
    j, x, s = tmp_path / "report.json", tmp_path / "report.xml", tmp_path / "report.sarif"
    return ["--json", str(j), "--junit", str(x), "--sarif", str(s)], j, x, s


def ledger_verdict(run_id: str):
    with open_ledger() as ledger:
        return ledger.verdicts(run_id)[-1], ledger.get_run(run_id)


# -- from real runs ------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_failing_run(home, tmp_path):
    args, j, x, s = report_args(tmp_path)
    out = assay("run", str(write_job(tmp_path / "job")), *args, brain="quick")
    assert out.returncode == 1, out.stdout + out.stderr
    docs = validate(j, x, s)
    run_id = latest_run_id()
    verdict, run = ledger_verdict(run_id)
    failing = [c for c in verdict.payload["checks"] if not c["passed"]]
    assert failing

    report = docs["json"]
    assert report["passed"] is False and [r["run_id"] for r in report["runs"]] == [run_id]
    r = report["runs"][0]
    assert r["verdict_id"] == verdict.id and r["signature"] == verdict.signature and r["row_hash"] == verdict.row_hash
    assert r["reasons"] == verdict.payload["reasons"] and r["status"] == "failed"

    suites = docs["junit"].findall("testsuite")
    assert len(suites) == 1
    assert int(suites[0].get("failures")) == len(failing)
    assert int(suites[0].get("tests")) == len(verdict.payload["checks"])
    failed_cases = [c.get("name") for c in suites[0].findall("testcase") if c.find("failure") is not None]
    assert failed_cases == [c["name"] for c in failing]

    results = docs["sarif"]["runs"][0]["results"]
    assert [res["ruleId"] for res in results] == [c["name"] for c in failing]
    assert all(res["level"] == "error" and res["properties"]["run_id"] == run_id for res in results)
    rule_ids = {rule["id"] for rule in docs["sarif"]["runs"][0]["tool"]["driver"]["rules"]}
    assert {c["name"] for c in verdict.payload["checks"]} == rule_ids


@pytest.mark.slow
def test_a_run_with_no_candidate_and_a_paused_run(home, tmp_path):
    args, j, x, s = report_args(tmp_path / "idle")
    (tmp_path / "idle").mkdir()
    out = assay("run", str(write_job(tmp_path / "job")), *args, brain="idle")
    assert out.returncode == 1
    docs = validate(j, x, s)
    r = docs["json"]["runs"][0]
    assert r["submission_hash"] is None and r["reasons"][0].startswith("no submission")
    assert r["error"] == "giving up: no candidate"  # the agent's own last word, kept apart from the verdict
    assert docs["junit"].find("testsuite").get("failures") == "1"

    (tmp_path / "paused").mkdir()
    args, j, x, s = report_args(tmp_path / "paused")
    out = assay("run", str(write_job(tmp_path / "job2")), "--no-wait", *args, brain="approver")
    assert out.returncode == 1
    docs = validate(j, x, s)
    r = docs["json"]["runs"][0]
    assert r["status"] == "waiting_approval" and r["verdict_id"] is None and r["passed"] is False
    assert r["reasons"] == ["no verdict was written"]


def make_passed_run(home: Path, speed: tuple[bool, str] = (True, "1.31x eager"), metrics: dict | None = None) -> str:
    """A finished run whose verdict passed (or, with `speed`, failed on speed alone), signed
    with the verifier's own key: the verifier's part played by the test, since no real
    candidate passes on a loaded 2-core machine in test time (the playbook's main job, in
    tests/agents/test_brains.py, is the real one)."""
    from assay.ledger import Ledger, RunStatus
    from assay.verifiers import signing

    metrics = {"speedup_vs_eager": 1.31, **(metrics or {})}
    outcome = "pass" if speed[0] else "inconclusive" if metrics.get("timing_contended") else "fail"
    with Ledger.open() as ledger:
        run = ledger.create_run(job=str(home / "job.toml"), kind="kernel", brain="playbook", budget={"steps": 40})
        payload = {
            "run_id": run.id,
            "kind": "kernel",
            "passed": speed[0],
            "outcome": outcome,
            "headline": {"name": "speedup vs eager", "value": 1.31, "unit": "x"},
            "figures": None,
            "reasons": [] if speed[0] else [f"speed: {speed[1]}"],
            "checks": [
                {"name": "correctness", "passed": True, "detail": "5 trials, 2 shapes"},
                {"name": "speed", "passed": speed[0], "detail": speed[1]},
            ],
            "metrics": metrics,
            "criteria": "kernel-default",
            "criteria_hash": "a" * 64,
            "submission": "submission-1",
            "submission_hash": "b" * 64,
            "task_hash": "c" * 64,
            "candidate_hash": "d" * 64,
            "verifier_version": "0.1.0",
            "verified_at": "2026-01-01T00:00:00Z",
        }
        key = signing.load_or_create_key(home)
        ledger.append_verdict(run.id, payload, signing.sign(key, payload), key="verdict:submission-1")
        ledger.set_run_status(run.id, RunStatus.running)
        ledger.set_run_status(
            run.id,
            RunStatus.passed if speed[0] else RunStatus.failed,
            budget_used={"steps": 6, "requests": 6, "tokens": 0, "seconds": 12.0},
        )
        return run.id


def test_a_passing_run_exits_0(home, tmp_path):
    run_id = make_passed_run(home)
    args, j, x, s = report_args(tmp_path)
    out = assay("resume", run_id, *args, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "PASS" in out.stdout
    docs = validate(j, x, s)
    assert docs["json"]["passed"] is True and docs["json"]["runs"][0]["status"] == "passed"
    suite = docs["junit"].find("testsuite")
    assert suite.get("failures") == "0" and suite.get("tests") == "2"
    assert docs["sarif"]["runs"][0]["results"] == []


def test_a_speed_failure_on_a_busy_machine_exits_3_and_any_other_failure_1(home, tmp_path):
    """A pipeline retries exit 3 on a quieter machine; it must never see 3 for a kernel that is
    wrong, or slow on a quiet machine."""
    busy = make_passed_run(
        home,
        (False, "0.99x eager; inconclusive: the machine was too busy to time"),
        {"timing_contended": True, "reference_cpu_share": 0.49},
    )
    quiet = make_passed_run(home, (False, "0.80x eager"), {"timing_contended": False, "reference_cpu_share": 0.97})
    for run_id, code in ((busy, 3), (quiet, 1)):
        args, j, x, s = report_args(tmp_path / run_id)
        (tmp_path / run_id).mkdir()
        out = assay("resume", run_id, *args, timeout=120)
        assert out.returncode == code, out.stdout + out.stderr
        assert ("FAIL (inconclusive)" in out.stdout) is (code == 3), out.stdout
        r = validate(j, x, s)["json"]["runs"][0]
        assert r["passed"] is False and r["inconclusive"] is (code == 3)


def test_report_paths_are_checked_before_anything_runs(home, tmp_path):
    run_id = make_passed_run(home)
    out = assay("resume", run_id, "--json", str(tmp_path / "no" / "dir" / "r.json"), timeout=120)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "report folder" in out.stderr and "Traceback" not in out.stderr


# -- whatever a verdict says, the files stay valid --------------------------------------------------

texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=60)
checks = st.lists(
    st.fixed_dictionaries({"name": texts.filter(bool), "passed": st.booleans(), "detail": texts}), max_size=4
)
rows = st.fixed_dictionaries(
    {
        "run_id": st.text(string.ascii_letters + string.digits + "-", min_size=1, max_size=30),
        "job": st.one_of(st.none(), texts, st.just("/tmp/a dir/jöb #1.toml")),
        "kind": st.just("kernel"),
        "brain": texts.filter(bool),
        "status": st.sampled_from(["passed", "failed", "error"]),
        "passed": st.just(False),
        "outcome": st.sampled_from(["fail", "inconclusive"]),
        "inconclusive": st.booleans(),
        "headline": st.one_of(
            st.none(),
            st.fixed_dictionaries(
                {
                    "name": texts,
                    "value": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
                    "unit": texts,
                }
            ),
        ),
        "figures": st.none(),
        "reasons": st.lists(texts, max_size=3),
        "checks": checks,
        "metrics": st.dictionaries(st.text(max_size=10), st.floats(allow_nan=False, allow_infinity=False), max_size=3),
        "criteria": st.just("kernel-default"),
        "criteria_hash": st.just("e" * 64),
        "submission_hash": st.none(),
        "verdict_id": st.integers(1, 10**6),
        "signature": st.none(),
        "row_hash": st.none(),
        "budget_used": st.just({"steps": 1}),
        "error": st.one_of(st.none(), texts),
        "verified_at": st.one_of(st.none(), st.just("2026-01-01T00:00:00Z")),
    }
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(rows, min_size=1, max_size=3))
def test_any_verdict_text_gives_valid_files(tmp_path, reports):
    from assay.reports.verdicts import write_json, write_junit, write_sarif

    j, x, s = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.sarif"
    write_json(j, reports)
    write_junit(x, reports)
    write_sarif(s, reports)
    docs = validate(j, x, s)
    failing = sum(1 for r in reports for c in (r["checks"] or [{"passed": False}]) if not c["passed"])
    assert sum(int(t.get("failures")) for t in docs["junit"].findall("testsuite")) == failing
    assert len(docs["sarif"]["runs"][0]["results"]) == failing


if __name__ == "__main__":  # validate files by hand: python test_reports.py report.json report.xml report.sarif
    validate(*(Path(p) for p in sys.argv[1:4]))
    print("valid")
