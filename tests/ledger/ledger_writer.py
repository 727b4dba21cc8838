"""A ledger writer run as its own process by the concurrency and kill -9 tests.

    python ledger_writer.py URL RUN_ID GO_FILE KEY...

Waits until GO_FILE exists (so every writer starts at once), then for each KEY records a
step, a tool call, a policy decision and a verdict under that key, printing the key after
each one is done.
"""

import os
import sys
import time

from assay.ledger import Ledger

url, run_id, go, *keys = sys.argv[1:]
with Ledger.open(url) as ledger:
    ledger.create_run(job="concurrency", kind="kernel", brain="playbook", run_id=run_id)
    while not os.path.exists(go):
        time.sleep(0.005)
    for key in keys:
        ledger.record_step(run_id, key=key, name="agent", payload={"pid": os.getpid()})
        ledger.record_tool_call(run_id, key=key, tool="build", arguments={"k": key}, decision="allow", result=key)
        ledger.record_policy_decision(run_id, key=key, tool="build", decision="allow")
        ledger.append_verdict(run_id, {"key": key, "pid": os.getpid()}, "sig", key=key)
        print(key, flush=True)
