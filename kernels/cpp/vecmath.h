// Vector math for assay's C++ kernel templates, written on GCC/Clang vector extensions so one
// source compiles to AVX-512, AVX2 or SSE/NEON for whatever -march=native finds. The transcendental
// functions are Cephes-style polynomials (as Sleef and ATen's Vectorized use): branch-free, so
// every lane of a vector runs the same instructions. Accuracy: a few ulp, far inside fp32 1e-4.
#pragma once
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <omp.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__)
#define VW 16
#elif defined(__AVX__)
#define VW 8
#else
#define VW 4
#endif

typedef float vf __attribute__((vector_size(VW * 4)));
typedef int32_t vi __attribute__((vector_size(VW * 4)));

#define AI static inline __attribute__((always_inline))

AI vf vsplat(float c) { return (vf){} + c; }
AI vf vload(const float* p) { vf v; memcpy(&v, p, sizeof v); return v; }
AI void vstore(float* p, vf v) { memcpy(p, &v, sizeof v); }
// First n lanes only; the rest read as zero. For row tails, so no scalar twin of every op is needed.
AI vf vload_n(const float* p, long n) { vf v = {}; memcpy(&v, p, n * 4); return v; }
AI void vstore_n(float* p, vf v, long n) { memcpy(p, &v, n * 4); }
// Streaming store: skips the read-for-ownership of the output line. p must be VW*4 aligned.
AI void vstream(float* p, vf v) {
#if defined(__AVX512F__)
  _mm512_stream_ps(p, (__m512)v);
#elif defined(__AVX__)
  _mm256_stream_ps(p, (__m256)v);
#elif defined(__SSE__)
  _mm_stream_ps(p, (__m128)v);
#else
  vstore(p, v);
#endif
}
// Ask for a line ahead of use. A row reduction fetches the next row while it computes this one:
// a row's passes are too short for the hardware prefetcher to hide DRAM latency by itself.
AI void vprefetch(const float* p) { __builtin_prefetch(p, 0, 3); }

AI void vfence() {
#if defined(__SSE__)
  _mm_sfence();
#endif
}

// m's lanes are all ones or all zeros (a comparison's result). Written as a vector ?: so the
// compiler can keep the comparison in an AVX-512 mask register and blend in one instruction.
AI vf vsel(vi m, vf a, vf b) { return m ? a : b; }
// a > b ? a : b, NaN in a giving b: exactly what maxps and minps compute, but GCC does not pick
// them for the ?: form (it compared and blended: two instructions where one does).
AI vf vmax(vf a, vf b) {
#if defined(__AVX512F__)
  return (vf)_mm512_max_ps((__m512)a, (__m512)b);
#elif defined(__AVX__)
  return (vf)_mm256_max_ps((__m256)a, (__m256)b);
#else
  return a > b ? a : b;
#endif
}
AI vf vmin(vf a, vf b) {
#if defined(__AVX512F__)
  return (vf)_mm512_min_ps((__m512)a, (__m512)b);
#elif defined(__AVX__)
  return (vf)_mm256_min_ps((__m256)a, (__m256)b);
#else
  return a < b ? a : b;
#endif
}
AI vf vabs(vf a) { return (vf)((vi)a & 0x7fffffff); }
AI vf vcopysign(vf mag, vf sgn) { return (vf)(((vi)mag & 0x7fffffff) | ((vi)sgn & (int32_t)0x80000000)); }

AI float vhsum(vf v) { float s = 0; for (int i = 0; i < VW; ++i) s += v[i]; return s; }
AI float vhmax(vf v) { float s = v[0]; for (int i = 1; i < VW; ++i) s = v[i] > s ? v[i] : s; return s; }

AI vf vsqrt(vf x) {
#if defined(__AVX512F__)
  return (vf)_mm512_sqrt_ps((__m512)x);
#elif defined(__AVX__)
  return (vf)_mm256_sqrt_ps((__m256)x);
#else
  vf r; for (int i = 0; i < VW; ++i) r[i] = sqrtf(x[i]); return r;
#endif
}
AI vf vrsqrt(vf x) { return 1.0f / vsqrt(x); }

#if defined(__AVX512F__)
// exp with expf's edges (0 below, inf above, NaN through) in 12 instructions: scalef applies 2^n
// with correct underflow and overflow, so neither the integer exponent trick nor the edge selects
// are needed. Degree-5 polynomial (near-minimax on [-ln2/2, ln2/2], fitted by least squares on
// Chebyshev nodes): at most 1.7e-7 relative error over the whole range, measured against
// double-precision exp. Half the cost of the Cephes form (vexp_core), which made softmax exp-bound.
// The body, for x already in [-104, 89] (or NaN); vexp below clamps to that range first.
AI vf vexp_body(vf x) {
  const vf n = (vf)_mm512_roundscale_ps((__m512)(x * 1.44269504088896341f), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  vf r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  vf p = vsplat(8.333837950275442e-3f);
  p = p * r + 4.189857793821108e-2f;
  p = p * r + 1.6666886383480484e-1f;
  p = p * r + 4.999914257250813e-1f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return (vf)_mm512_scalef_ps((__m512)p, (__m512)n);
}
AI vf vexp(vf x) {
  // max_ps/min_ps return their second operand when either is NaN, so NaN passes through.
  return vexp_body(vmin(vsplat(89.f), vmax(vsplat(-104.f), x)));
}
#endif

#if !defined(__AVX512F__)
// Cephes-style exp for x already in [-104, 88.72283]. 2^n is applied as two factors, so n from
// -150 to 128 needs no exponent field outside the normal range and underflow stays gradual.
AI vf vexp_core(vf x) {
  vf n = (x * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round to nearest
  vf r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  vf p = vsplat(1.9875691500E-4f);
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * (r * r) + r + 1.0f;
  vi ni = __builtin_convertvector(n, vi), n1 = ni >> 1, n2 = ni - n1;
  return p * (vf)((n1 + 127) << 23) * (vf)((n2 + 127) << 23);
}

// exp with expf's edges: 0 below the range, inf above, NaN through.
AI vf vexp(vf x) {
  vf y = vexp_core(vmin(vmax(x, vsplat(-104.f)), vsplat(88.72283f)));
  y = vsel(x > 88.72283f, vsplat(INFINITY), y);
  return vsel(x != x, x, y);
}
#endif

// exp of x <= 0 (or NaN, which passes through): only the lower clamp, which keeps -inf's
// range reduction finite; the upper one could never act.
AI vf vexp_nonpos(vf x) {
#if defined(__AVX512F__)
  return vexp_body(vmax(vsplat(-104.f), x));  // maxps returns its second operand for a NaN
#else
  return vexp(x);
#endif
}

// exp on inputs clamped to the finite range: no inf, no NaN out. The building block of the
// activations below, where those edge values would only cost instructions.
AI vf vexp_clamped(vf x) {
  x = vmin(vmax(x, vsplat(-87.33654f)), vsplat(88.37626f));
#if defined(__AVX512F__)
  return vexp_body(x);  // inside vexp's range already: its clamp would be two more instructions
#else
  return vexp_core(x);
#endif
}

// 1/x by the hardware estimate plus one Newton step (~1 ulp): a fraction of a divide's cost.
AI vf vrcp(vf x) {
#if defined(__AVX512F__)
  vf r = (vf)_mm512_rcp14_ps((__m512)x);
#elif defined(__AVX__)
  vf r = (vf)_mm256_rcp_ps((__m256)x);
  r = r * (2.0f - x * r);
#else
  vf r = 1.0f / x;
#endif
  return r * (2.0f - x * r);
}

AI vf vnan_through(vf x, vf y) { return vsel(x != x, x, y); }

AI vf vlog(vf x) {
  vf xin = x;
  x = vmax(x, vsplat(1.17549435e-38f));
  vi ix = (vi)x;
  vf e = __builtin_convertvector((ix >> 23) - 126, vf);
  vf m = (vf)((ix & 0x807fffff) | 0x3f000000);  // mantissa in [0.5, 1)
  vi small = m < 0.707106781186547524f;
  e = e - vsel(small, vsplat(1.f), vsplat(0.f));
  m = vsel(small, m + m, m) - 1.0f;
  vf z = m * m;
  vf y = vsplat(7.0376836292E-2f);
  y = y * m - 1.1514610310E-1f;
  y = y * m + 1.1676998740E-1f;
  y = y * m - 1.2420140846E-1f;
  y = y * m + 1.4249322787E-1f;
  y = y * m - 1.6668057665E-1f;
  y = y * m + 2.0000714765E-1f;
  y = y * m - 2.4999993993E-1f;
  y = y * m + 3.3333331174E-1f;
  y = y * m * z;
  y = y + e * -2.12194440e-4f;
  y = y - 0.5f * z;
  vf r = m + y + e * 0.693359375f;
  r = vsel(xin == 0.f, vsplat(-INFINITY), r);
  r = vsel(xin < 0.f, vsplat(NAN), r);
  r = vsel(xin == INFINITY, xin, r);
  return vsel(xin != xin, xin, r);
}

// tanh as Eigen's 13/6-degree rational of x on [-9, 9] (tanh is +-1 in fp32 beyond), a couple
// of ulp: no exp, no select between a small- and a large-|x| form (the rcp is the only costly
// step), about half the instructions of 1 - 2 / (1 + e^2x). The numerator is scaled up by two
// ulp so that near 9, where tanh rounds to 1, the rational reaches 1 on every ISA path and the
// clamp makes it exactly +-1 (gelu_tanh's 1 + tanh is then exactly 0). A NaN x comes out as -1.
#define TANH_UP(a) ((a) * (1.0f + 0x1p-22f))
AI vf vtanh_body(vf x) {
  const vf c = vmin(vmax(x, vsplat(-9.f)), vsplat(9.f));
  const vf z = c * c;
  vf p = vsplat(TANH_UP(-2.76076847742355e-16f));
  p = p * z + TANH_UP(2.00018790482477e-13f);
  p = p * z + TANH_UP(-8.60467152213735e-11f);
  p = p * z + TANH_UP(5.12229709037114e-08f);
  p = p * z + TANH_UP(1.48572235717979e-05f);
  p = p * z + TANH_UP(6.37261928875436e-04f);
  p = p * z + TANH_UP(4.89352455891786e-03f);
  vf q = vsplat(1.19825839466702e-06f);
  q = q * z + 1.18534705686654e-04f;
  q = q * z + 2.26843463243900e-03f;
  q = q * z + 4.89352518554385e-03f;
  return vmin(vmax(c * p * vrcp(q), vsplat(-1.f)), vsplat(1.f));
}
#undef TANH_UP
AI vf vtanh(vf x) { return vnan_through(x, vtanh_body(x)); }

AI vf vsigmoid(vf x) { return vnan_through(x, vrcp(1.0f + vexp_clamped(-x))); }

// erf as one rational function of x on [-4, 4] (erf is +-1 in fp32 beyond): an odd degree-13
// numerator over an even degree-8 denominator, the coefficients Eigen and XLA use. No exp: about
// two thirds of the instructions of the A&S 7.1.26 form with its exp, at a few ulp.
// The body: a NaN x comes out as -1 (the clamp turns it into -4).
AI vf verf_body(vf x) {
  const vf c = vmin(vmax(x, vsplat(-4.f)), vsplat(4.f));
  const vf z = c * c;
  vf p = vsplat(-2.72614225801306e-10f);
  p = p * z + 2.77068142495902e-08f;
  p = p * z - 2.10102402082508e-06f;
  p = p * z - 5.69250639462346e-05f;
  p = p * z - 7.34990630326855e-04f;
  p = p * z - 2.95459980854025e-03f;
  p = p * z - 1.60960333262415e-02f;
  vf q = vsplat(-1.45660718464996e-05f);
  q = q * z - 2.13374055278905e-04f;
  q = q * z - 1.68282697438203e-03f;
  q = q * z - 7.37332916720468e-03f;
  q = q * z - 1.42647390514189e-02f;
  // The rational overshoots 1 by an ulp near 4; erf never does (gelu's 1 + erf must stay >= 0).
  return vmin(vmax(c * p * vrcp(q), vsplat(-1.f)), vsplat(1.f));
}
AI vf verf(vf x) { return vnan_through(x, verf_body(x)); }

// A NaN x needs no select: the product with x is NaN again.
AI vf vgelu(vf x) { return 0.5f * x * (1.0f + verf_body(x * 0.70710678118654752f)); }
// A NaN x needs no select here either.
AI vf vgelu_tanh(vf x) { return 0.5f * x * (1.0f + vtanh_body(0.79788456080286536f * (x + 0.044715f * x * x * x))); }
// A NaN x needs no select: the clamp turns it into a number, and the product with x is NaN again.
AI vf vsilu(vf x) { return x * vrcp(1.0f + vexp_clamped(-x)); }
// log1p(t) for t in [0, 1] as t q(t), q of degree 8 interpolating log1p(t) / t at Chebyshev-
// Lobatto nodes, so exact at both ends (softplus(0) is ln 2 to the ulp): 1.6e-7 relative error
// in fp32 Horner with FMA (measured over 2e5 points). No divide and no rcp: nine instructions
// where 2 atanh(t / (2 + t)) took twelve.
AI vf vlog1p_unit(vf t) {
  vf q = vsplat(0.005253457929939032f);
  q = q * t - 0.02979203127324581f;
  q = q * t + 0.0790819600224495f;
  q = q * t - 0.13775134086608887f;
  q = q * t + 0.1918097883462906f;
  q = q * t - 0.2486920803785324f;
  q = q * t + 0.3332352042198181f;
  q = q * t - 0.4999977648258209f;
  q = q * t + 1.0f;
  return q * t;
}

// log(1 + exp(v)) as max(v, 0) + log1p(exp(-|v|)), so the log's argument stays in [1, 2] and
// nothing overflows. A NaN reaches the result through exp and the log (vmax drops it; the sum
// keeps it).
AI vf vsoftplus_unscaled(vf v) { return vmax(v, vsplat(0.f)) + vlog1p_unit(vexp_nonpos(-vabs(v))); }

// torch's softplus: x where beta*x > threshold, else log1p(exp(beta*x)) / beta.
AI vf vsoftplus(vf x, float beta, float threshold) {
  // torch's defaults, beta 1 and threshold 20, need neither the scaling nor the select: beyond
  // 17, x + log1p(exp(-x)) rounds to x in fp32. The test is loop-invariant; GCC unswitches on it.
  if (beta == 1.0f && threshold >= 17.f) return vsoftplus_unscaled(x);
  const vf bx = x * beta;
  return vsel(bx > threshold, x, vsoftplus_unscaled(bx) * (1.0f / beta));
}

// tanh(softplus(x)) for beta 1: with e = exp(x), tanh(log(1 + e)) = n / (n + 2), n = e (e + 2).
// One exp, no log, no tanh. Valid whenever threshold >= 9.1: beyond 9.01 tanh(x) rounds to 1 and
// n / (n + 2) is within an ulp of it, so where softplus switches to x changes nothing; x is capped
// at 20 so n stays finite. Other beta or threshold: the composition.
AI vf vtanh_softplus(vf x, float beta, float threshold) {
  if (beta != 1.0f || !(threshold >= 9.1f)) return vtanh(vsoftplus(x, beta, threshold));
  const vf e = vexp(vmin(vsplat(20.f), x));  // in this order vmin passes a NaN through
  const vf n = e * (e + 2.0f);
  return n * vrcp(n + 2.0f);
}

AI vf vmish(vf x) { return x * vtanh_softplus(x, 1.0f, 20.0f); }
AI vf vrelu(vf x) { return vsel(x > 0.f, x, vsplat(0.f)); }
AI vf vclamp(vf x, float lo, float hi) { return vmin(vmax(x, vsplat(lo)), vsplat(hi)); }

AI float* aligned_scratch(size_t nfloats) {
  size_t bytes = (nfloats * 4 + 63) / 64 * 64;
  return (float*)aligned_alloc(64, bytes ? bytes : 64);
}

// Lanes [0, n) of v, the rest zero: so a partial tail can join a reduction.
AI vf vfirst(vf v, long n) {
  static const int32_t iota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  vi idx; memcpy(&idx, iota, sizeof idx);
  return vsel(idx < (int32_t)n, v, vsplat(0.f));
}

#define LD(p, i, n) ((n) == VW ? vload((p) + (i)) : vload_n((p) + (i), (n)))

// o[0, n) = f(i, lanes) for each vector; f sees lanes < VW only at the ends, where LD masks.
// NT: streaming stores once o is aligned (the head before that is a partial vector).
template <int U, int NT, class F>
AI void vmap_range(float* __restrict o, long n, F f) {
  long i = 0;
  if (NT) {
    long mis = (long)(((uintptr_t)o >> 2) & (VW - 1));
    if (mis) {
      long h = VW - mis < n ? VW - mis : n;
      vstore_n(o, f(0L, h), h);
      i = h;
    }
  }
  for (; i + U * VW <= n; i += U * VW) {
#pragma GCC unroll 16
    for (int u = 0; u < U; ++u) {
      vf y = f(i + u * VW, (long)VW);
      if (NT) vstream(o + i + u * VW, y); else vstore(o + i + u * VW, y);
    }
  }
  for (; i + VW <= n; i += VW) {
    vf y = f(i, (long)VW);
    if (NT) vstream(o + i, y); else vstore(o + i, y);
  }
  if (i < n) vstore_n(o + i, f(i, n - i), n - i);
}
