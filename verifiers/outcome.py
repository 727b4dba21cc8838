"""A verification's outcome, the same shape for every kind: what the verifier process signs into
the verdict and what the CLI, reports and TUI read (they know no kind).

- `outcome`: pass, fail, or inconclusive (failed only on a figure the machine's load decided:
  retry on a quieter machine; exit code 3);
- `headline`: the one figure a run is known by (a kernel's speedup, a port's max error);
- `figures`: a small chart's bars (a kernel's speedups against each baseline), optional;
- reasons, checks, metrics: the evidence, kind by kind.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

OutcomeWord = Literal["pass", "fail", "inconclusive"]
# What `assay run` and `assay <kind> verify` exit with; 2 is bad input (UserError).
EXIT_CODES: dict[str, int] = {"pass": 0, "fail": 1, "inconclusive": 3}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Headline(_Model):
    name: str = Field(max_length=80)
    value: float | None
    unit: str = Field(default="", max_length=16)

    def text(self) -> str:
        if self.value is None:
            return "-"
        return (
            f"{self.value:.2f}{self.unit}"
            if abs(self.value) >= 0.01 or self.value == 0
            else f"{self.value:.2e}{self.unit}"
        )


class Bar(_Model):
    label: str = Field(max_length=80)
    value: float
    # The metric it shows, so a view listing metrics can leave it out.
    metric: str | None = None


class Figures(_Model):
    title: str = Field(max_length=120)
    bars: list[Bar]
    unit: str = Field(default="x", max_length=16)
    # Where the baseline stands on the chart (1.0 for a speedup).
    mark: float = 1.0


class Check(_Model):
    name: str
    passed: bool
    detail: str = ""


class Outcome(_Model):
    """What a kind's verifier returns to the verifier process."""

    outcome: OutcomeWord
    reasons: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list[Check])
    metrics: dict[str, Any] = Field(default_factory=dict)
    headline: Headline | None = None
    figures: Figures | None = None
    criteria_hash: str | None = None
    task_hash: str | None = None
    candidate_hash: str | None = None

    @model_validator(mode="after")
    def _reasons_for_every_failure(self) -> Outcome:
        if self.outcome == "pass" and (self.reasons or any(not c.passed for c in self.checks)):
            raise ValueError("a passing outcome with a reason or a failed check")
        if self.outcome != "pass" and not self.reasons:
            raise ValueError(f"an outcome of {self.outcome} needs its reasons")
        return self

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome]

    def verdict_fields(self) -> dict[str, Any]:
        """The fields the verifier process signs (besides its own: run, key, criteria, times)."""
        data = self.model_dump(mode="json")
        data["passed"] = self.passed
        return data


def no_submission(criteria_hash: str | None, task_hash: str | None) -> Outcome:
    """The verdict of a run whose agent submitted nothing: failed, and why."""
    return Outcome(
        outcome="fail",
        reasons=["no submission: the agent submitted nothing (see the run's last step for why)"],
        checks=[Check(name="submission", passed=False, detail="no submission")],
        criteria_hash=criteria_hash,
        task_hash=task_hash,
    )


class Shown(_Model):
    """What a view shows of a signed verdict payload: its outcome word, headline and figures.
    Verdicts signed before outcomes existed read as pass or fail by their `passed`."""

    outcome: OutcomeWord
    headline: Headline | None = None
    figures: Figures | None = None

    @classmethod
    def of(cls, payload: dict[str, Any] | None) -> Shown:
        p = payload or {}
        word = p.get("outcome")
        if word not in EXIT_CODES:
            word = "pass" if p.get("passed") else "fail"
        try:
            headline = Headline.model_validate(p["headline"]) if p.get("headline") else None
        except ValueError:
            headline = None
        try:
            figures = Figures.model_validate(p["figures"]) if p.get("figures") else None
        except ValueError:
            figures = None
        return cls(outcome=word, headline=headline, figures=figures)

    @property
    def word(self) -> str:
        return self.outcome.upper()
