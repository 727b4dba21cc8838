"""The audit line (worker.AuditLine, supervisor.AuditLine), attacked from the candidate's side.

The candidate's native code runs in the worker's process and can read and change all of it: its
frames, its methods, its descriptors. So nothing in that process knows which timed call is
audited, and nothing there copies the output: after each call the worker reports where the
output lies and waits, and for the audited call the supervisor reads those bytes from the
worker's memory (/proc/<pid>/mem, opened before any candidate code ran) before it answers. The
answer, drawn whether or not the call was read, says what the next call's input is. What comes
on the line is checked as data from an adversary. tests/verifiers/cheats/audit_peek.py,
audit_ask.py and audit_nowait.py are the end-to-end attacks."""

from __future__ import annotations

import os
import select
import sys
import threading
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
HARNESS = Path(__file__).resolve().parents[2] / "verifiers" / "kernel" / "harness"
sys.path.insert(0, str(HARNESS))
import supervisor  # noqa: E402
import worker  # noqa: E402

from assay.verifiers.kernel.timing import _rebuild  # noqa: E402


@pytest.fixture()
def line():
    # This process plays the worker (on a thread), so the supervisor reads its own memory; the
    # worker's end is kept under another number (attach() closes the supervisor's copy of it).
    sup = supervisor.AuditLine(cap=64 << 20, who="candidate")
    sup._child_fd = os.dup(sup.child_end())
    sup.attach(os.getpid())
    yield sup, worker.AuditLine(sup._child_fd)
    for fd in (sup.line, sup.mem, sup._child_fd):
        os.close(fd)


def _serve(sup, work, stops=None):
    """Run the worker's side `work` on a thread and answer its reports here until it ends."""
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("result", work()))
    t.start()
    stopped = stops if stops is not None else []
    while t.is_alive():
        ready, _, _ = select.select([sup.line], [], [], 0.01)
        if ready:
            sup.answer(lambda: stopped.append("stop"), lambda: stopped.append("resume"))
    t.join()
    sup.answer(lambda: stopped.append("stop"), lambda: stopped.append("resume"))
    return box.get("result")


def test_the_audited_output_is_read_from_memory_as_it_was_reported(line):
    sup, ask = line
    outs = [torch.full((256, 64), float(k)) for k in range(5)]
    sup.start_round(5, [3])
    readable, _, _ = select.select([sup._child_fd], [], [], 0.02)
    assert readable == []  # nothing about the round waits where the worker could read it
    stops = []
    _serve(sup, lambda: [ask.report(o) for o in outs], stops)
    assert sup.end_round() == 5 and stops == ["stop", "resume"]  # held still for the one read
    outs[3].zero_()  # what the candidate does after it returned changes nothing read
    [(layouts, chunks)] = sup.keep()
    assert layouts == [["float32", [256, 64], [64, 1]]]
    got = _rebuild(torch.frombuffer(bytearray(chunks[0]), dtype=torch.uint8), layouts[0])
    assert torch.equal(got, torch.full((256, 64), 3.0))


def test_several_calls_of_a_round_can_be_read_each_into_its_own_memory(line):
    sup, ask = line
    outs = [torch.full((64, 64), float(k)) for k in range(6)]
    sup.start_round(6, [1, 4, 5])
    _serve(sup, lambda: [ask.report(o) for o in outs])
    kept = sup.keep()
    assert [float(_rebuild(torch.frombuffer(bytearray(c[0]), dtype=torch.uint8), lay[0])[0, 0]) for lay, c in kept] == [
        1,
        4,
        5,
    ]


def test_each_report_returns_the_answer_the_supervisor_drew_for_it(line):
    sup, ask = line
    answers = [7, 2**62 - 1, 0, 123456789]
    sup.start_round(4, [1], answers)
    got = _serve(sup, lambda: [ask.report(torch.ones(2)) for _ in range(4)])
    assert got == answers
    with pytest.raises(ValueError):
        sup.start_round(3, [], [1, 2])


def test_a_warm_calls_changed_elements_follow_the_answer_to_the_call_before(scripted_answers):
    """A worker that went on without the answer (audit_nowait.py returns at once) could only
    guess the salt, and its call would be on an input the verifier never gave: the replay of an
    audited call uses the salt the supervisor drew for it."""
    x = torch.randn(64, 32)
    args = [x]
    perturb = worker.Perturb(args, 8192)
    line = scripted_answers([11, 22, 33, 44])
    worker.timed_round(lambda t: t.clone(), args, perturb, 4, 5, line.report)
    for i, salt in enumerate([5, 11, 22, 33]):
        want = x.clone()
        idx = torch.from_numpy(perturb.indices(salt, i))
        flat = want.view(-1).view(torch.int32)
        flat[idx] += int(perturb.step)
        assert torch.equal(line.seen[i], want), i
    guessed = torch.from_numpy(perturb.indices(1, 1))
    assert not torch.equal(guessed, torch.from_numpy(perturb.indices(11, 1)))


def test_a_fresh_round_takes_its_inputs_in_the_order_the_answers_give(scripted_answers):
    sets = [[torch.full((2,), float(k))] for k in range(4)]
    line = scripted_answers([3, 0, 1, 999])
    worker.timed_fresh_round(lambda t: t, sets, 2, line)
    assert [float(o[0]) for o in line.seen] == [2.0, 3.0, 0.0, 1.0]


def test_audits_are_drawn_call_by_call():
    """One read per round told a candidate that saw it (its answer came late) that the rest of
    the round was free; each call drawn on its own says nothing of the next."""
    import random

    rng = random.Random(7)
    rounds = [supervisor.pick_audits(rng, 50) for _ in range(4000)]
    assert 0.9 < sum(map(len, rounds)) / len(rounds) < 1.1  # one a round on average
    assert 0.30 < sum(not r for r in rounds) / len(rounds) < 0.44  # none in about 1/e of them
    assert sum(len(r) >= 2 for r in rounds) > 800  # and a read is no sign the round is done
    after = [k for r in rounds for k in r[1:]]
    assert len(after) > 1000 and min(after) > 0


def test_a_round_that_audits_nothing_reads_nothing(line):
    sup, ask = line
    sup.start_round(4, [])
    stops = []
    _serve(sup, lambda: [ask.report(torch.ones(3)) for _ in range(4)], stops)
    assert sup.end_round() == 4 and stops == [] and sup.keep() == []


@pytest.mark.parametrize(
    "dtype", ["float32", "bfloat16", "float16", "int64", "bool", "uint16", "float8_e4m3fn", "complex64"]
)
def test_outputs_of_any_dtype_and_layout_come_through(line, dtype):
    sup, ask = line
    base = (torch.randn(3, 5, 7) * 4).to(getattr(torch, dtype))
    outs = (base, base.transpose(0, 2), base[:, 1:4:2], torch.empty(0, 3, dtype=base.dtype), base[0, 0, 0])
    sup.start_round(1, [0])
    _serve(sup, lambda: ask.report(outs))
    [(layouts, chunks)] = sup.keep()
    for want, layout, data in zip(outs, layouts, chunks, strict=False):
        got = _rebuild(
            torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else torch.empty(0, dtype=torch.uint8), layout
        )
        assert not isinstance(got, str), got
        assert got.shape == want.shape and torch.equal(
            got.view(torch.uint8) if got.dtype.is_floating_point and got.element_size() == 1 else got,
            want.view(torch.uint8) if want.dtype.is_floating_point and want.element_size() == 1 else want,
        )


def test_an_output_that_is_no_plain_tensor_is_reported_as_such(line):
    sup, ask = line
    sup.start_round(1, [0])
    _serve(sup, lambda: ask.report("not a tensor"))
    assert sup.keep() == ["not a plain tensor"]
    assert (
        supervisor.save_audits("/nonexistent/x.safetensors", sup.keep())[0]
        == "not a plain tensor (the run's audited call 0)"
    )
    assert supervisor.save_audits("/nonexistent/x.safetensors", [None])[0].startswith("no output was read")


def test_a_report_naming_memory_that_is_not_there_fails_the_audit(line):
    sup, _ = line
    sup.start_round(1, [0])
    os.write(sup._child_fd, b'{"outs":[[4096,16,"float32",4,[4],[1]]]}\n')
    select.select([sup.line], [], [], 1.0)
    sup.answer(lambda: None, lambda: None)
    assert "could not be read" in sup.keep()[0]


def test_more_reports_than_calls_or_outside_a_round_stop_the_run(line):
    """A candidate that reported for itself from inside forward (to learn something from the
    answer) leaves the worker's own report one too many."""
    sup, _ = line
    sup.start_round(2, [])
    os.write(sup._child_fd, b'{"error":"x"}\n' * 3)
    select.select([sup.line], [], [], 1.0)
    with pytest.raises(supervisor.Stop) as stop:
        sup.answer(lambda: None, lambda: None)
    assert stop.value.why == "protocol" and "3 reports on the audit line in a round of 2 calls" in stop.value.detail
    assert stop.value.who == "candidate"
    sup.end_round()
    os.read(sup._child_fd, 16)
    os.write(sup._child_fd, b'{"error":"x"}\n')
    select.select([sup.line], [], [], 1.0)
    with pytest.raises(supervisor.Stop, match="protocol"):
        sup.answer(lambda: None, lambda: None)  # no round runs


@pytest.mark.parametrize(
    "report",
    [
        b"not json",
        b"[" * 5000 + b"]" * 5000,
        b'{"outs":[[1,16,"float32",4,[4],[1]]],"x":1}',
        b'{"outs":[[1,17,"float32",4,[4],[1]]]}',  # the size does not follow the shape
        b'{"outs":[[1,16,"float32",4,[4],[-1]]]}',
        b'{"outs":[[1,16,"../x",4,[4],[1]]]}',
        b'{"outs":[[1,16,["f"],4,[4],[1]]]}',
        b'{"outs":[[1,16,"float32",4,[true],[1]]]}',
        b'{"outs":[[1,16,"float32",4,[4],[1,1]]]}',
        b'{"outs":[[1,1073741824,"float32",4,[268435456],[1]]]}',  # over the cap
        b'{"outs":[]}',
    ],
)
def test_a_forged_report_for_the_audited_call_stops_the_run(line, report):
    sup, _ = line
    sup.start_round(1, [0])
    os.write(sup._child_fd, report + b"\n")
    select.select([sup.line], [], [], 1.0)
    with pytest.raises(supervisor.Stop) as stop:
        while True:
            sup.answer(lambda: None, lambda: None)
    assert stop.value.why == "protocol" and stop.value.who == "candidate"


def test_an_oversized_report_stops_the_run(line):
    sup, _ = line
    sup.start_round(1, [0])
    threading.Thread(target=lambda: os.write(sup._child_fd, b"x" * (1 << 17)), daemon=True).start()
    with pytest.raises(supervisor.Stop, match="protocol"):
        for _ in range(1000):
            select.select([sup.line], [], [], 0.1)
            sup.answer(lambda: None, lambda: None)


def test_a_socket_cannot_be_opened_again_through_proc(line):
    """Why a socket: a pipe opened again through /proc/self/fd could be read and written by a
    second description. A socket refuses."""
    sup, _ = line
    with pytest.raises(OSError):
        os.close(os.open(f"/proc/self/fd/{sup._child_fd}", os.O_RDWR))


def test_the_audit_file_is_written_in_a_folder_made_afresh(tmp_path):
    """The candidate could have put a link where the audit folder is (to the reference's audit,
    say): the supervisor moves whatever is there aside."""
    elsewhere = tmp_path / "reference"
    elsewhere.mkdir()
    (elsewhere / "candidate.safetensors").write_bytes(b"the reference's")
    (tmp_path / "audit").symlink_to(elsewhere)
    data = torch.tensor([1.0, 2.0]).numpy().tobytes()
    saved, layouts = supervisor.save_audits(
        str(tmp_path / "audit" / "candidate.safetensors"), [([["float32", [2], [1]]], [data])]
    )
    assert saved == "saved" and layouts == [[["float32", [2], [1]]]]
    assert not (tmp_path / "audit").is_symlink() and (tmp_path / "audit").is_dir()
    assert (elsewhere / "candidate.safetensors").read_bytes() == b"the reference's"
    from safetensors.torch import load_file

    raw = load_file(tmp_path / "audit" / "candidate.safetensors")["a0_out_0"]
    assert _rebuild(raw, ["float32", [2], [1]]).tolist() == [1.0, 2.0]


@pytest.mark.parametrize(
    "layout, why",
    [
        (["float32", [3], [1]], "size"),
        (["no_such_dtype", [4], [1]], "dtype"),
        (["float32", [2, 2], [2]], "layout"),
        ("junk", "layout"),
    ],
)
def test_the_verifier_refuses_a_layout_that_does_not_fit_the_bytes(layout, why):
    out = _rebuild(torch.zeros(16, dtype=torch.uint8), layout)
    assert isinstance(out, str) and why in out


def test_the_workers_line_takes_no_report_of_anyone_elses():
    with pytest.raises(AttributeError):
        worker.AuditLine(99).report = lambda out: 0


def test_a_harness_method_swapped_in_its_class_is_named():
    """The in-process second line (native code can undo it, the answers above are what hold):
    a method replaced by another function, its own code untouched, went unseen; only a rewritten
    __code__ was named."""
    integrity = worker.Integrity()
    original = worker.AuditLine.rehearse
    try:
        worker.AuditLine.rehearse = lambda self, out: 0
        assert "harness method AuditLine.rehearse was replaced" in integrity.problems()
    finally:
        worker.AuditLine.rehearse = original
    assert not any("AuditLine" in p for p in integrity.problems())


# A candidate's memory registered with userfaultfd, never served: each first touch of a page
# waits for a handler thread, and the candidate's threads are all stopped while it is read.
_UFFD_HOLDER = r"""
import ctypes, fcntl, mmap, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
fd = libc.syscall(323, os.O_CLOEXEC | os.O_NONBLOCK)  # userfaultfd(2), x86-64
if fd < 0:
    print("ERR", os.strerror(ctypes.get_errno()), flush=True)
    sys.exit(1)
fcntl.ioctl(fd, 0xC018AA3F, bytearray(struct.pack("QQQ", 0xAA, 0, 0)))  # UFFDIO_API
size = 1 << 20
region = mmap.mmap(-1, size)
addr = ctypes.addressof(ctypes.c_char.from_buffer(region))
fcntl.ioctl(fd, 0xC020AA00, bytearray(struct.pack("QQQQ", addr, size, 1, 0)))  # UFFDIO_REGISTER, missing pages
print("ADDR", addr, size, flush=True)
time.sleep(120)
"""


def test_reading_memory_held_by_userfaultfd_fails_at_once_instead_of_waiting(need):
    """The supervisor's read has no deadline of its own. Memory a candidate registered with
    userfaultfd and never serves would make a read of it wait for ever, if the kernel let a
    read through /proc/<pid>/mem wait on the handler. It does not (a remote read cannot retry
    the fault, so the kernel fails it: EIO on 6.18 here): the read comes back at once, and the
    audit says the memory could not be read. Creating the userfaultfd needs root or
    vm.unprivileged_userfaultfd = 1 (the sandboxes allow neither, and the symbol check denies
    `syscall`); this test makes one outside the sandbox, as the worst case."""
    import json
    import platform
    import subprocess
    import time

    need(platform.machine() == "x86_64", "the userfaultfd syscall number here is x86-64's")
    holder = subprocess.Popen([sys.executable, "-c", _UFFD_HOLDER], stdout=subprocess.PIPE, text=True)
    try:
        first = holder.stdout.readline().split()
        need(
            first[:1] == ["ADDR"],
            f"no userfaultfd here ({' '.join(first[1:]) or 'no answer'}): it needs root "
            "or vm.unprivileged_userfaultfd = 1",
        )
        addr, size = int(first[1]), int(first[2])
        sup = supervisor.AuditLine(cap=size, who="candidate")
        sup.attach(holder.pid)
        report = json.dumps({"outs": [[addr, size, "float32", 4, [size // 4], [1]]]}).encode()
        box = {}
        t0 = time.monotonic()
        reader = threading.Thread(target=lambda: box.setdefault("got", sup._read(report, 0)), daemon=True)
        reader.start()
        reader.join(10)
        assert not reader.is_alive(), "the supervisor's read waited on the candidate's userfaultfd handler"
        assert time.monotonic() - t0 < 5
        assert isinstance(box["got"], str) and box["got"].startswith("its memory could not be read"), box["got"]
        os.close(sup.mem)
        os.close(sup.line)
    finally:
        holder.kill()
        holder.wait()
