"""Reports for people and pipelines: a terminal summary, JSON, JUnit XML and SARIF 2.1.0.

Every report is built from the signed verdict in the ledger, never from what the agent said.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from datetime import UTC
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from assay import __version__
from assay.reports.charts import figure_chart
from assay.typed import as_dict
from assay.verifiers.outcome import Shown

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def summary(run: dict[str, Any], verdict: dict[str, Any] | None) -> dict[str, Any]:
    p = as_dict((verdict or {}).get("payload")) or {}
    shown = Shown.of(p) if verdict is not None else None
    return {
        "run_id": run["id"],
        "job": run.get("job"),
        "kind": run.get("kind"),
        "brain": run.get("brain"),
        "status": run.get("status"),
        "passed": bool(p.get("passed")),
        # pass | fail | inconclusive (failed only on a figure the machine's load decided: retry
        # on a quieter machine, exit 3), as the verifier signed it.
        "outcome": shown.outcome if shown else "fail",
        "inconclusive": bool(shown and shown.outcome == "inconclusive"),
        "headline": shown.headline.model_dump() if shown and shown.headline else None,
        "figures": shown.figures.model_dump() if shown and shown.figures else None,
        "reasons": p.get("reasons", ["no verdict was written"] if verdict is None else []),
        "checks": p.get("checks", []),
        "metrics": p.get("metrics", {}),
        "criteria": p.get("criteria"),
        "criteria_hash": p.get("criteria_hash"),
        "submission_hash": p.get("submission_hash"),
        "verdict_id": (verdict or {}).get("id"),
        "signature": (verdict or {}).get("signature"),
        "row_hash": (verdict or {}).get("row_hash"),
        "budget_used": run.get("budget_used", {}),
        # Why the run ended without a pass, in the runtime's words (a spent budget, the agent's
        # last message); the verdict's reasons above are the verifier's.
        "error": run.get("error"),
        "verified_at": p.get("verified_at"),
    }


def write_json(path: Path, reports: list[dict[str, Any]]) -> None:
    doc = {"assay_version": __version__, "passed": all(r["passed"] for r in reports) and bool(reports), "runs": reports}
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n", encoding="utf-8")


def write_junit(path: Path, reports: list[dict[str, Any]]) -> None:
    """JUnit XML as the Ant JUnit schema has it (the strictest one CI tools read): every suite
    with package, id, timestamp, hostname and time, properties first, system-out/err last."""
    import socket

    host = _xml_text(socket.gethostname()) or "localhost"
    suites = ET.Element("testsuites")
    for i, r in enumerate(reports):
        checks = r["checks"] or [{"name": "verdict", "passed": r["passed"], "detail": "; ".join(r["reasons"])}]
        failures = sum(1 for c in checks if not c.get("passed"))
        seconds = (as_dict(r.get("budget_used")) or {}).get("seconds") or 0
        suite = ET.SubElement(
            suites,
            "testsuite",
            package=f"assay.{_xml_text(r['kind'])}",
            id=str(i),
            name=_xml_text(f"{r['kind']}:{r['job']}"),
            timestamp=_junit_time(r.get("verified_at")),
            hostname=host,
            tests=str(len(checks)),
            failures=str(failures),
            errors="0",
            time=f"{float(seconds):.3f}",
        )
        props = ET.SubElement(suite, "properties")
        for k in ("run_id", "brain", "status", "criteria_hash", "submission_hash", "verdict_id", "signature", "error"):
            ET.SubElement(props, "property", name=k, value=_xml_text(str(r.get(k))))
        for c in checks:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=_xml_text(f"assay.{r['kind']}"),
                name=_xml_text(str(c.get("name"))),
                time="0",
            )
            if not c.get("passed"):
                detail = _xml_text(str(c.get("detail", "")))
                f = ET.SubElement(case, "failure", message=detail[:1000], type=_xml_text(str(c.get("name"))))
                f.text = detail
        ET.SubElement(suite, "system-out").text = _xml_text("\n".join(r["reasons"]))
        ET.SubElement(suite, "system-err").text = _xml_text(r.get("error") or "")
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)


# XML 1.0 allows tab, newline, carriage return and these ranges; a verdict's text (a candidate's
# output, echoed in a check's detail) may hold anything else, which would make the file unreadable.
_NOT_XML = re.compile("[^\t\n\r\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{{{ord(m.group()):x}}}", text)


def _junit_time(verified_at: str | None) -> str:
    """YYYY-MM-DDTHH:MM:SS in UTC, without a zone, as the schema wants it."""
    from datetime import datetime

    try:
        when = datetime.fromisoformat(str(verified_at).replace("Z", "+00:00"))
        when = when.astimezone(UTC) if when.tzinfo else when
    except ValueError:
        when = datetime.now(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S")


def _uri(job: Any) -> str:
    """A job path as a URI (SARIF's artifactLocation.uri): percent-encoded, file: when absolute."""
    from urllib.parse import quote

    text = str(job or "job")
    if text.startswith("/"):
        return "file://" + quote(text.encode("utf-8", "surrogatepass"), safe="/")
    return quote(text.encode("utf-8", "surrogatepass"), safe="/") or "job"


def write_sarif(path: Path, reports: list[dict[str, Any]]) -> None:
    rules: dict[str, dict[str, Any]] = {}
    results: list[dict[str, Any]] = []
    for r in reports:
        for c in r["checks"] or [{"name": "verdict", "passed": r["passed"], "detail": "; ".join(r["reasons"])}]:
            name = str(c.get("name"))
            rules.setdefault(name, {"id": name, "shortDescription": {"text": f"assay {r['kind']} check: {name}"}})
            if c.get("passed"):
                continue
            results.append(
                {
                    "ruleId": name,
                    "level": "error",
                    "message": {"text": str(c.get("detail") or name)},
                    "properties": {"run_id": r["run_id"], "verdict_id": r.get("verdict_id")},
                    "locations": [{"physicalLocation": {"artifactLocation": {"uri": _uri(r.get("job"))}}}],
                }
            )
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "assay",
                        "version": __version__,
                        "informationUri": "https://example.invalid/assay",
                        "rules": list(rules.values()),
                    }
                },
                "results": results,
            }
        ],
    }
    path.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def print_summary(console: Console, r: dict[str, Any]) -> None:
    mark = (
        "[bold green]PASS[/]"
        if r["passed"]
        else "[bold yellow]FAIL (inconclusive)[/]"
        if r.get("inconclusive")
        else "[bold red]FAIL[/]"
    )
    console.print(
        f"\n{mark}  run [bold]{r['run_id']}[/] ({r['kind']}, brain {r['brain']}), verdict #{r.get('verdict_id')}"
    )
    for reason in r["reasons"]:
        console.print(f"  - {reason}")
    if r["checks"]:
        t = Table(title="checks", show_lines=False)
        t.add_column("check")
        t.add_column("result")
        t.add_column("detail", overflow="fold")
        for c in r["checks"]:
            t.add_row(
                str(c.get("name")),
                "[green]pass[/]" if c.get("passed") else "[red]fail[/]",
                str(c.get("detail", ""))[:120],
            )
        console.print(t)
    if r.get("headline"):
        h = r["headline"]
        console.print(f"  {h['name']}: [bold]{_headline_text(h)}[/]")
    if r.get("figures"):
        console.print(figure_chart(r["figures"]))
    if r.get("criteria_hash"):
        console.print(
            f"  criteria {str(r['criteria_hash'])[:16]}  submission {str(r.get('submission_hash'))[:16]}  row {str(r.get('row_hash'))[:16]}"
        )


def _headline_text(h: dict[str, Any]) -> str:
    from assay.verifiers.outcome import Headline

    return Headline.model_validate(h).text()
