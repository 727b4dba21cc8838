"""The row reductions' work split (claim_rows in kernels/cpp_templates.py): every row is done
exactly once for any row count and thread count, and a thread parked by the scheduler does not
hold the call: the others take the rest of its range."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from assay.kernels.cpp_templates import _ROW_PRELUDE

VECMATH = Path(__file__).resolve().parents[2] / "kernels" / "cpp" / "vecmath.h"

PROGRAM = r"""
#include "vecmath.h"
%PRELUDE%
#include <cstdio>
#include <unistd.h>
#include <vector>
int main() {
  long bad = 0;
  for (int nt : {1, 2, 3})
    for (long nrows : {0L, 1L, 2L, 3L, 5L, 37L, 100L, 1001L})
      for (long chunk : {1L, 4L, 16L}) {
        std::vector<std::atomic<int>> seen(nrows);
        RowClaim* claims = new RowClaim[nt];
#pragma omp parallel num_threads(nt)
        claim_rows(claims, nrows, chunk, [&](long r) { seen[r].fetch_add(1); });
        delete[] claims;
        for (long r = 0; r < nrows; ++r)
          if (seen[r].load() != 1) { ++bad; std::printf("nt %d nrows %ld chunk %ld row %ld seen %d\n", nt, nrows, chunk, r, seen[r].load()); }
      }
  // Thread 0 is held (as if parked) in its first row until thread 1 has left claim_rows (or 20 s
  // pass); thread 1 must have done everything else by then. Thread 1 starts its first row only once
  // thread 0 is in row 0: on a loaded machine thread 0 may otherwise reach its range so late that
  // thread 1 has already claimed row 0 itself (CI saw that once: thread 0 then did rows 16-499).
  const long nrows = 1000, chunk = 16;
  std::vector<int> by(nrows, -1);
  RowClaim claims[2];
  std::atomic<int> started{0}, done{0};
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    claim_rows(claims, nrows, chunk, [&](long r) {
      if (t == 0 && r == 0) started.store(1);
      for (int ms = 0; t == 1 && r == 500 && !started.load() && ms < 20000; ++ms) usleep(1000);
      for (int ms = 0; t == 0 && r == 0 && !done.load() && ms < 20000; ++ms) usleep(1000);
      by[r] = t;
    });
    if (omp_get_thread_num() == 1) done.store(1);
  }
  long held = 0;
  for (long r = 0; r < nrows; ++r) held += by[r] == 0;
  std::printf("%ld %ld\n", bad, held);
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to build the cpp templates")
def test_rows_are_claimed_once_and_a_held_thread_keeps_only_its_first_chunk(tmp_path):
    src = tmp_path / "claims.cpp"
    src.write_text(PROGRAM.replace("%PRELUDE%", _ROW_PRELUDE))
    exe = tmp_path / "claims"
    res = subprocess.run(
        ["g++", "-O2", "-march=native", "-std=c++17", "-fopenmp", "-I", str(VECMATH.parent), str(src), "-o", str(exe)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=60).stdout.split("\n")
    bad, held = map(int, out[-2].split())
    assert bad == 0, out[:20]
    # Thread 0 claimed rows 0-15 before it was held; the 484 other rows of its range went to thread 1.
    # (With a fixed split, thread 1 leaves after its own 500 and thread 0 does the rest: 500.)
    assert held == 16, f"the held thread did {held} rows"
