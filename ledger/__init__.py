"""assay.ledger: where every run, step, tool call, policy decision and verdict is recorded.

    from assay.ledger import Ledger
    with Ledger.open() as ledger:            # ASSAY_LEDGER_URL, else SQLite under ASSAY_HOME
        run = ledger.create_run(job="softmax.toml", kind="kernel", brain="playbook")
        ledger.record_tool_call(run.id, key="call-1", tool="build", arguments={...}, decision="allow")
        ledger.append_verdict(run.id, payload, signature, key="verdict")
        ledger.verify_chain().ok

The ledger imports nothing from agents, tools, verifiers or kernels; they import it.
"""

from assay.ledger.chain import GENESIS, ChainReport, SignatureCheck, canonical_json, row_hash
from assay.ledger.schema import NoLedger
from assay.ledger.store import Ledger, LedgerError, new_run_id, result_digest
from assay.ledger.tables import (
    Approval,
    PolicyDecision,
    Run,
    RunStatus,
    Step,
    Submission,
    ToolCall,
    UTCDateTime,
    Verdict,
    utcnow,
)

__all__ = [
    "Approval",
    "Submission",
    "GENESIS",
    "ChainReport",
    "Ledger",
    "LedgerError",
    "NoLedger",
    "PolicyDecision",
    "Run",
    "RunStatus",
    "SignatureCheck",
    "Step",
    "ToolCall",
    "UTCDateTime",
    "Verdict",
    "canonical_json",
    "new_run_id",
    "result_digest",
    "row_hash",
    "utcnow",
]
