"""The templates' vector exp, checked against double-precision exp over fp32's whole range and
at its edges, for every ISA path this compiler can build and this CPU can run."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

VECMATH = Path(__file__).resolve().parents[2] / "kernels" / "cpp" / "vecmath.h"

PROGRAM = r"""
#include "vecmath.h"
#include <cmath>
#include <cstdio>
int main() {
  double worst = 0; long bad = 0;
  for (double x0 = -110.0; x0 < 92.0; x0 += 0.000731) {
    float v[VW]; for (int i = 0; i < VW; ++i) v[i] = (float)x0 + i * 1e-5f;
    vf r = vexp(vload(v));
    for (int i = 0; i < VW; ++i) {
      double e = std::exp((double)v[i]), got = r[i];
      if (e > 1.2e-38 && e < 3.4e38) { double rel = std::fabs(got / e - 1); if (rel > worst) worst = rel; }
      else if (e <= 1.2e-38 && !(got >= 0 && got <= 1.2e-38)) ++bad;   // underflow: 0 or a denormal
      else if (e >= 3.41e38 && !std::isinf(got)) ++bad;
    }
  }
  float sp[4] = {-INFINITY, INFINITY, NAN, 0.f};
  float in[VW] = {}; for (int i = 0; i < VW; ++i) in[i] = sp[i % 4];
  vf r = vexp(vload(in));
  for (int i = 0; i < VW; ++i) {
    float want = std::exp(in[i]);
    if (!(r[i] == want || (std::isnan(want) && std::isnan(r[i])))) ++bad;
  }
  std::printf("%.3e %ld %d\n", worst, bad, VW);
}
"""


def _build(tmp: Path, flags: list[str]) -> Path | None:
    src = tmp / "t.cpp"
    src.write_text(PROGRAM)
    exe = tmp / ("t" + "".join(f.replace("-", "_").replace("=", "") for f in flags))
    res = subprocess.run(["g++", "-O2", "-march=native", *flags, "-ffp-contract=fast", "-fno-math-errno", "-fopenmp",
                          "-I", str(VECMATH.parent), str(src), "-o", str(exe)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    return exe


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is needed to build the cpp templates")
@pytest.mark.parametrize("flags", [[], ["-mno-avx512f"]], ids=["native", "no-avx512"])
def test_vexp_matches_double_exp_everywhere(tmp_path, flags):
    exe = _build(tmp_path, flags)
    worst, bad, width = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert int(bad) == 0, "exp's edges (0 below the range, inf above, NaN through) are wrong"
    # A few ulp: far inside fp32's 1e-4 tolerance, and tight enough to catch a wrong coefficient.
    assert float(worst) < 5e-7, f"relative error {worst} at vector width {width}"
