"""Reports for people and pipelines, built from signed verdicts (never from what an agent said):
a terminal summary, JSON, JUnit XML, SARIF 2.1.0 (verdicts.py), and a verdict's figures as a
chart (charts.py). The CLI and the TUI both draw on them; they read a verdict's outcome,
headline and figures only, so they know no job kind."""
