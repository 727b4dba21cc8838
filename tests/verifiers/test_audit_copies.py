"""An audited call's output is copied into memory made before any round is timed
(worker.AuditCopies). A copy into new memory takes a page fault per 4 KiB page, and a fault cost
about 17 us on this host, so a 16 MB copy made inside a round cost most of the round; the
candidate's kept copies also broke up its heap, so its own outputs faulted too. The demo's honest
softmax timed at 0.06-0.9x eager that way (0.88x in one process with the copies made ahead: 1.3-1.5x)."""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "verifiers" / "harness"))
import worker  # noqa: E402

PAGE = 4096


def _faults(fn) -> tuple[object, int]:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    out = fn()
    return out, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_kept_copies_take_no_page_faults_once_made_and_match_the_output():
    out = torch.randn(2048, 1024)  # 8 MiB: 2048 pages
    copies = worker.AuditCopies(slots=3)
    copies.make(out)
    kept = []
    for k in range(3):
        o = out * (k + 1)
        keep, faults = _faults(lambda o=o: worker.kept_for_audit(o, None, copies))
        assert faults < 64, f"copy {k} took {faults} page faults"
        assert type(keep) is worker.Copied and torch.equal(keep[0], o)
        assert torch.equal(keep.glance[0], worker.glance_of(o))
        kept.append(keep)
    # The candidate keeps every copy: slots are never overwritten, and past them a copy is a clone.
    assert torch.equal(kept[0][0], out) and torch.equal(kept[2][0], out * 3)
    extra, faults = _faults(lambda: worker.kept_for_audit(out * 4, None, copies))
    assert faults >= out.numel() * 4 // PAGE // 2  # a clone: new pages, as before
    assert torch.equal(extra[0], out * 4) and torch.equal(kept[0][0], out)


def test_the_reference_reuses_one_slot_and_odd_outputs_fall_back_to_a_clone():
    out = torch.randn(64, 64)
    copies = worker.AuditCopies(slots=1, reuse=True)
    copies.make((out, out[:, :3]))  # a tuple, one output not contiguous
    first = worker.kept_for_audit((out, out[:, :3]), None, copies)
    second = worker.kept_for_audit((out + 1, (out + 1)[:, :3]), None, copies)
    assert first[0].data_ptr() == second[0].data_ptr()  # overwritten: the reference keeps none
    assert torch.equal(second[1], (out + 1)[:, :3]) and second.glance[1] is None
    other = worker.kept_for_audit(torch.zeros(3), None, copies)  # another shape: cloned
    assert torch.equal(other[0], torch.zeros(3))
