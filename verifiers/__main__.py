"""`python -m assay.verifiers verify --run RUN [--json]`: the verifier process.
`python -m assay.verifiers warm --run RUN`: its caches built ahead of a submission."""

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
    w = sub.add_parser("warm", help="build the caches a verification of the run will need (lowest CPU priority)")
    w.add_argument("--run", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "warm":
        return _warm(args.run)
    from assay.verifiers.process import verify_run

    try:
        row = verify_run(args.run)
    except UserError as exc:
        print(f"assay verifier: error: {exc}", file=sys.stderr)
        return 2
    from assay.verifiers.outcome import EXIT_CODES, Shown

    shown = Shown.of(row["payload"])
    if args.json:
        print(json.dumps(row))
    else:
        print(f"verdict {row['id']} for run {row['run_id']}: {shown.word}")
        for r in row["payload"].get("reasons", []):
            print(f"  - {r}")
    return EXIT_CODES[shown.outcome]


def _warm(run_id: str) -> int:
    import os
    import shutil
    import signal
    import tempfile
    import threading

    from assay.verifiers.process import warm_run

    os.nice(19)  # before any thread exists, so every thread and sandbox process inherits it
    # Stopped with SIGTERM when the run ends first: at once, not after its compile (the run's
    # caller waits for this process). Its sandboxes die with it (bwrap --die-with-parent; a
    # Docker helper exits at its stdin's EOF), its files are all under one folder removed here,
    # and a half-filled cache entry has no stamp, so the next verification compiles it again.
    scratch = tempfile.mkdtemp(prefix="assay-verifier-warm-")
    tempfile.tempdir = scratch

    def stop(*_):
        shutil.rmtree(scratch, ignore_errors=True)
        os._exit(143)

    signal.signal(signal.SIGTERM, stop)
    # SIGUSR1: the verification has started and may wait on this work: normal priority from now
    # on. Off the signal handler, which may interrupt this thread inside a Docker API call.
    from assay.sandbox import background

    signal.signal(signal.SIGUSR1, lambda *_: threading.Thread(target=background.hurry, daemon=True).start())
    try:
        warm_run(run_id)
    except UserError as exc:
        print(f"assay verifier: warm-up: {exc}", file=sys.stderr)
        return 2
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
