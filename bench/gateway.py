"""Gateway benchmark: prints one JSON object.

Parts:
- `redaction`: assay's redaction throughput with the whole rule set, against detect-secrets on
  the same labelled corpus in the same run (bench/redaction_bench.py).
- `overhead`: the per-call gateway overhead (policy + redaction + audit, padding off) for 1 KB,
  10 KB and 100 KB results against the bare tool, interleaved (bench/gateway_overhead.py).

Run: .venv/bin/python bench/gateway.py [--size BYTES] [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from redaction_bench import machine, redaction_figures  # noqa: E402


def redaction_part(size: int, repeats: int) -> dict:
    figures = redaction_figures(size=size, repeats=repeats)
    return {
        "redaction_mb_per_s": figures["redaction_mb_per_s"],
        "recall": figures["recall"],
        "detect_secrets_recall": figures["detect_secrets_recall"],
        "vs_detect_secrets_speed_ratio": figures["vs_detect_secrets_speed_ratio"],
        "redaction_clean_text_mb_per_s": figures["clean_text_mb_per_s"],
        "redaction_details": figures,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000, help="redaction corpus size in bytes")
    parser.add_argument("--repeats", type=int, default=5, help="timed redactions of the corpus")
    parser.add_argument("--calls", type=int, default=200, help="gateway calls per result size")
    args = parser.parse_args(argv)
    result: dict = {}
    from gateway_overhead import overhead_figures
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("gateway overhead", total=3 * args.calls)
        result["overhead"] = overhead_figures(calls=args.calls, progress=lambda: bar.advance(task))
    result.update(redaction_part(args.size, args.repeats))
    result["machine"] = machine()
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
