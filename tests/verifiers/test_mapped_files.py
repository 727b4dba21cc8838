"""Which shared libraries count as the candidate's own: those under the places it can write,
less the host toolchain the sandbox binds read-only there (a venv kept under /tmp is bound over
the sandbox's private /tmp, and its torch libraries are not the candidate's)."""

from __future__ import annotations

import ctypes
import glob
import os
import shutil


def test_a_library_under_a_writable_root_is_the_candidates_unless_it_is_the_bound_toolchain(tmp_path, harness_script):
    sup = harness_script("verifiers/kernel/harness/supervisor.py")
    libm = sorted(glob.glob("/usr/lib/*/libm.so.6") + glob.glob("/lib/*/libm.so.6"))[0]
    venv, own = tmp_path / "venv" / "lib", tmp_path / "own"
    venv.mkdir(parents=True)
    own.mkdir()
    # Distinct copies: the loader maps each file it is given by path.
    shutil.copy(libm, venv / "libtool_m.so")
    shutil.copy(libm, own / "libevil_m.so")
    ctypes.CDLL(str(venv / "libtool_m.so"))
    ctypes.CDLL(str(own / "libevil_m.so"))

    found = sup.mapped_files(os.getpid(), [str(tmp_path)], [str(tmp_path / "venv")])
    assert str(own / "libevil_m.so") in found
    assert str(venv / "libtool_m.so") not in found
    # Without the trusted bind both count.
    both = set(sup.mapped_files(os.getpid(), [str(tmp_path)]))
    assert {str(own / "libevil_m.so"), str(venv / "libtool_m.so")} <= both
    # A sibling of a trusted folder is not covered by it: the match is by whole path segments.
    assert not sup._under(str(tmp_path / "venv-evil" / "x.so"), [str(tmp_path / "venv")])


def test_the_trusted_roots_are_the_toolchain_the_sandboxes_bind():
    import sys

    from assay.verifiers.kernel import runtime as rt

    roots = rt.trusted_roots()
    assert "/usr" in roots
    assert any(sys.prefix == r or sys.prefix.startswith(r.rstrip("/") + "/") for r in roots)
    assert "/tmp" not in roots and "/" not in roots  # never a whole writable place
