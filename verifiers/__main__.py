"""`python -m assay.verifiers verify --run RUN [--json]`: the verifier process."""

from __future__ import annotations

import argparse
import json
import sys

from assay.errors import UserError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m assay.verifiers", description="assay's verifier process")
    sub = parser.add_subparsers(dest="cmd", required=True)
    v = sub.add_parser("verify", help="verify a run's submission and append a signed verdict")
    v.add_argument("--run", required=True)
    v.add_argument("--json", action="store_true", help="print the verdict row as JSON")
    args = parser.parse_args(argv)
    from assay.verifiers.process import verify_run

    try:
        row = verify_run(args.run)
    except UserError as exc:
        print(f"assay verifier: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(row))
    else:
        p = row["payload"]
        print(f"verdict {row['id']} for run {row['run_id']}: {'PASS' if p['passed'] else 'FAIL'}")
        for r in p["reasons"]:
            print(f"  - {r}")
    return 0 if row["payload"]["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
