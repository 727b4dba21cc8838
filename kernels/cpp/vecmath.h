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

#if defined(__AVX512F__)
// BEGIN TABLES: generated by kernels/cpp/tables.py, do not edit
// erf(u / sqrt 2) for u = |x| in [0, 6.3): gelu's Phi; 1 in fp32 from 5.6 on; width 0.2, degree 4, relative error under 4e-07. Row j: coefficient of s^j.
#define TAB_ERF_W 0.2f
#define TAB_ERF_D 4
static const float TAB_ERF[5][32] __attribute__((aligned(64))) = {
  {0.000000000e+00f, 1.585194170e-01f, 3.108434677e-01f, 4.514937699e-01f, 5.762891769e-01f, 6.826894879e-01f, 7.698606849e-01f, 8.384866714e-01f, 8.904014230e-01f, 9.281393886e-01f, 9.544997215e-01f, 9.721931219e-01f, 9.836049080e-01f, 9.906775951e-01f, 9.948897362e-01f, 9.973002076e-01f, 9.986256957e-01f, 9.993261695e-01f, 9.996817708e-01f, 9.998552799e-01f, 9.999366403e-01f, 9.999732971e-01f, 9.999891520e-01f, 9.999957681e-01f, 9.999983907e-01f, 9.999994040e-01f, 9.999998212e-01f, 9.999999404e-01f, 1.000000000e+00f, 1.000000000e+00f, 1.000000000e+00f, 1.000000000e+00f},
  {1.595768631e-01f, 1.564169675e-01f, 1.473079771e-01f, 1.332898140e-01f, 1.158766374e-01f, 9.678833932e-02f, 7.767449319e-02f, 5.989106372e-02f, 4.436840117e-02f, 3.158011287e-02f, 2.159641497e-02f, 1.418984681e-02f, 8.957808837e-03f, 5.433176178e-03f, 3.166166367e-03f, 1.772725489e-03f, 9.536237339e-04f, 4.928790149e-04f, 2.447548322e-04f, 1.167749651e-04f, 5.352981316e-05f, 2.357594531e-05f, 9.976306501e-06f, 4.055997579e-06f, 1.584355687e-06f, 5.946134252e-07f, 2.144092832e-07f, 7.428126025e-08f, 2.472530269e-08f, 7.907341448e-09f, 2.429661361e-09f, 7.172774596e-10f},
  {0.000000000e+00f, -3.128143493e-03f, -5.892248824e-03f, -7.997360080e-03f, -9.270120412e-03f, -9.678831324e-03f, -9.320938028e-03f, -8.384747431e-03f, -7.098943461e-03f, -5.684420001e-03f, -4.319284577e-03f, -3.121769289e-03f, -2.149878070e-03f, -1.412630198e-03f, -8.865307900e-04f, -5.318212789e-04f, -3.051624517e-04f, -1.675809326e-04f, -8.811314183e-05f, -4.437538155e-05f, -2.141246478e-05f, -9.902203601e-06f, -4.389740297e-06f, -1.865843387e-06f, -7.605318046e-07f, -2.973257267e-07f, -1.115012083e-07f, -4.011540256e-08f, -1.384757997e-08f, -4.586797608e-09f, -1.457993393e-09f, -4.447804625e-10f},
  {-1.062251744e-03f, -9.992959676e-04f, -8.236616268e-04f, -5.681652692e-04f, -2.783107338e-04f, -8.050396332e-07f, 2.266922820e-04f, 3.820761631e-04f, 4.603579291e-04f, 4.708138295e-04f, 4.314774997e-04f, 3.631047148e-04f, 2.843210241e-04f, 2.088181354e-04f, 1.446073875e-04f, 9.476751438e-05f, 5.892832269e-05f, 3.483747423e-05f, 1.961069938e-05f, 1.052420157e-05f, 5.389619673e-06f, 2.636005775e-06f, 1.232086220e-06f, 5.506602747e-07f, 2.354393160e-07f, 9.633903630e-08f, 3.774028201e-08f, 1.415857120e-08f, 5.088159671e-09f, 1.751986889e-09f, 5.781229384e-10f, 1.828562857e-10f},
  {0.000000000e+00f, 3.002705307e-05f, 5.540395068e-05f, 7.015898882e-05f, 7.280241698e-05f, 6.447447959e-05f, 4.847388846e-05f, 2.911273077e-05f, 1.048099330e-05f, -4.471541615e-06f, -1.432876434e-05f, -1.909403363e-05f, -1.974529914e-05f, -1.768907896e-05f, -1.430010161e-05f, -1.064188928e-05f, -7.373540939e-06f, -4.790912499e-06f, -2.933223868e-06f, -1.698057076e-06f, -9.318539469e-07f, -4.857132581e-07f, -2.408321222e-07f, -1.137326180e-07f, -5.120679702e-08f, -2.199900706e-08f, -9.024331504e-09f, -3.536881454e-09f, -1.325069277e-09f, -4.747457982e-10f, -1.627274704e-10f, -5.338026202e-11f},
};
// tanh(sqrt(2 / pi) (u + 0.044715 u^3)) for u = |x| in [0, 6.3): gelu_tanh's; 1 in fp32 from 3.9 on; width 0.2, degree 4, relative error under 4e-07. Row j: coefficient of s^j.
#define TAB_GELU_TANH_W 0.2f
#define TAB_GELU_TANH_D 4
static const float TAB_GELU_TANH[5][32] __attribute__((aligned(64))) = {
  {0.000000000e+00f, 1.585142910e-01f, 3.108058572e-01f, 4.513840079e-01f, 5.760792494e-01f, 6.823839545e-01f, 7.695046067e-01f, 8.381543756e-01f, 8.901712298e-01f, 9.280661345e-01f, 9.545977116e-01f, 9.724349976e-01f, 9.839359522e-01f, 9.910354614e-01f, 9.952222109e-01f, 9.975750446e-01f, 9.988315105e-01f, 9.994671345e-01f, 9.997707605e-01f, 9.999073148e-01f, 9.999648929e-01f, 9.999876022e-01f, 9.999958873e-01f, 9.999987483e-01f, 9.999996424e-01f, 9.999998808e-01f, 1.000000000e+00f, 1.000000000e+00f, 1.000000000e+00f, 1.000000000e+00f, 1.000000000e+00f, 1.000000000e+00f},
  {1.595768631e-01f, 1.564018875e-01f, 1.472558379e-01f, 1.331996620e-01f, 1.157720760e-01f, 9.670889378e-02f, 7.765801251e-02f, 5.995574594e-02f, 4.450379312e-02f, 3.175161406e-02f, 2.176010795e-02f, 1.430936158e-02f, 9.015327320e-03f, 5.431084894e-03f, 3.121037269e-03f, 1.706204261e-03f, 8.846611599e-04f, 4.336559505e-04f, 2.003033005e-04f, 8.688088565e-05f, 3.526600631e-05f, 1.335000252e-05f, 4.696748874e-06f, 1.530402869e-06f, 4.602699732e-07f, 1.273292298e-07f, 3.228984014e-08f, 7.480700503e-09f, 1.577885267e-09f, 3.019843542e-10f, 5.226246866e-11f, 8.150824633e-12f},
  {0.000000000e+00f, -3.142506583e-03f, -5.913111847e-03f, -8.012349717e-03f, -9.268133901e-03f, -9.655842558e-03f, -9.282677434e-03f, -8.344355971e-03f, -7.070731837e-03f, -5.677313544e-03f, -4.333516583e-03f, -3.150085919e-03f, -2.181807067e-03f, -1.439103857e-03f, -9.026860935e-04f, -5.373163149e-04f, -3.027052153e-04f, -1.609134197e-04f, -8.045072173e-05f, -3.770149851e-05f, -1.650360173e-05f, -6.724895684e-06f, -2.542023140e-06f, -8.883222335e-07f, -2.860083157e-07f, -8.455371159e-08f, -2.287537981e-08f, -5.644511081e-09f, -1.266049487e-09f, -2.572692614e-10f, -4.720506278e-11f, -7.793667621e-12f},
  {-1.067480887e-03f, -1.003116253e-03f, -8.238618029e-04f, -5.641312455e-04f, -2.715119335e-04f, 5.723791674e-06f, 2.298326726e-04f, 3.802773135e-04f, 4.544113763e-04f, 4.632905766e-04f, 4.252866493e-04f, 3.601195640e-04f, 2.847941360e-04f, 2.116899414e-04f, 1.483061060e-04f, 9.797174425e-05f, 6.096036668e-05f, 3.565207953e-05f, 1.954476647e-05f, 1.001271357e-05f, 4.777972208e-06f, 2.116773658e-06f, 8.677823757e-07f, 3.281163856e-07f, 1.140542665e-07f, 3.632930046e-08f, 1.056979482e-08f, 2.799926069e-09f, 6.731399882e-10f, 1.464040694e-10f, 2.871415258e-11f, 5.062211501e-12f},
  {0.000000000e+00f, 3.068803562e-05f, 5.646887803e-05f, 7.112392632e-05f, 7.315933908e-05f, 6.398521509e-05f, 4.733981405e-05f, 2.787804806e-05f, 9.716051864e-06f, -4.483219982e-06f, -1.369697748e-05f, -1.819228055e-05f, -1.897259972e-05f, -1.728255120e-05f, -1.428130781e-05f, -1.088025965e-05f, -7.694868145e-06f, -5.062886430e-06f, -3.098052275e-06f, -1.760155442e-06f, -9.263278571e-07f, -4.503659170e-07f, -2.017089713e-07f, -8.298298582e-08f, -3.126733361e-08f, -1.075862688e-08f, -3.370593138e-09f, -9.586271776e-10f, -2.467701321e-10f, -5.732093272e-11f, -1.197686655e-11f, -2.248613188e-12f},
};
// log1p(exp(-a)) for a = |x| in [0, 15.75): softplus less max(x, 0); width 0.5, degree 5, relative error under 1.5e-07. Row j: coefficient of s^j.
#define TAB_SOFTPLUS_W 0.5f
#define TAB_SOFTPLUS_D 5
static const float TAB_SOFTPLUS[6][32] __attribute__((aligned(64))) = {
  {6.931471825e-01f, 4.740769863e-01f, 3.132616878e-01f, 2.014132738e-01f, 1.269280165e-01f, 7.888973504e-02f, 4.858735204e-02f, 2.975041792e-02f, 1.814992726e-02f, 1.104774512e-02f, 6.715348456e-03f, 4.078443162e-03f, 2.475685207e-03f, 1.502310159e-03f, 9.114664863e-04f, 5.529315094e-04f, 3.354063665e-04f, 2.034476784e-04f, 1.234021911e-04f, 7.484902744e-05f, 4.539890142e-05f, 2.753607077e-05f, 1.670156234e-05f, 1.013004203e-05f, 6.144193321e-06f, 3.726646355e-06f, 2.260326937e-06f, 1.370958216e-06f, 8.315283822e-07f, 5.043475539e-07f, 3.059022902e-07f, 1.855391218e-07f},
  {-2.500000000e-01f, -1.887703389e-01f, -1.344707161e-01f, -9.121276438e-02f, -5.960146338e-02f, -3.792909160e-02f, -2.371293679e-02f, -1.465611532e-02f, -8.993105032e-03f, -5.493470933e-03f, -3.346425248e-03f, -2.035068814e-03f, -1.236311509e-03f, -7.505911053e-04f, -4.555255873e-04f, -2.763892990e-04f, -1.676750544e-04f, -1.017134855e-04f, -6.169728294e-05f, -3.742311310e-05f, -2.269893412e-05f, -1.376784530e-05f, -8.350710232e-06f, -5.064995094e-06f, -3.072087111e-06f, -1.863319540e-06f, -1.130162104e-06f, -6.854785966e-07f, -4.157639921e-07f, -2.521736917e-07f, -1.529511025e-07f, -9.276954671e-08f},
  {3.124981187e-02f, 2.937536128e-02f, 2.457652986e-02f, 1.864339598e-02f, 1.312426385e-02f, 8.762991987e-03f, 5.647086538e-03f, 3.556622891e-03f, 2.207831480e-03f, 1.358273090e-03f, 8.310030680e-04f, 5.066937883e-04f, 3.083119518e-04f, 1.873650035e-04f, 1.137769796e-04f, 6.905872578e-05f, 4.190445907e-05f, 2.542304719e-05f, 1.542232530e-05f, 9.355021575e-06f, 5.674441582e-06f, 3.441845820e-06f, 2.087630264e-06f, 1.266228423e-06f, 7.680124554e-07f, 4.658253658e-07f, 2.825381955e-07f, 1.713683844e-07f, 1.039402875e-07f, 6.304301081e-08f, 3.823753758e-08f, 2.319224279e-08f},
  {-7.564897686e-08f, -1.199112390e-03f, -1.892827451e-03f, -1.973499777e-03f, -1.665860065e-03f, -1.238905825e-03f, -8.519091061e-04f, -5.580242723e-04f, -3.547398373e-04f, -2.214081323e-04f, -1.366491633e-04f, -8.376321784e-05f, -5.113228326e-05f, -3.113441562e-05f, -1.892868931e-05f, -1.149731543e-05f, -6.979546470e-06f, -4.235544566e-06f, -2.569810476e-06f, -1.558971576e-06f, -9.456754810e-07f, -5.736221738e-07f, -3.479345025e-07f, -2.110384827e-07f, -1.280033501e-07f, -7.763870968e-08f, -4.709053414e-08f, -2.856195458e-08f, -1.732373889e-08f, -1.050739229e-08f, -6.373060746e-09f, -3.865458620e-09f},
  {-3.235021431e-04f, -2.498316753e-04f, -9.240169311e-05f, 3.986067168e-05f, 1.004732694e-04f, 1.054797467e-04f, 8.571679791e-05f, 6.150252739e-05f, 4.119452933e-05f, 2.651307477e-05f, 1.666546450e-05f, 1.032834825e-05f, 6.346667760e-06f, 3.879959422e-06f, 2.364599368e-06f, 1.438366894e-06f, 8.739488635e-07f, 5.306422395e-07f, 3.220589804e-07f, 1.954152538e-07f, 1.185535368e-07f, 7.191673035e-08f, 4.362351902e-08f, 2.646040542e-08f, 1.604956346e-08f, 9.734741901e-09f, 5.904489786e-09f, 3.581279717e-09f, 2.172165336e-09f, 1.317488341e-09f, 7.990983986e-10f, 4.846781310e-10f},
  {2.422133036e-07f, 2.716217932e-05f, 3.191288124e-05f, 1.933207750e-05f, 5.374170087e-06f, -2.447600764e-06f, -4.855487987e-06f, -4.576867468e-06f, -3.482935654e-06f, -2.399427785e-06f, -1.567332674e-06f, -9.933467027e-07f, -6.185534289e-07f, -3.811574913e-07f, -2.334034690e-07f, -1.423869236e-07f, -8.666479090e-08f, -5.267643388e-08f, -3.199096099e-08f, -1.941862671e-08f, -1.178355902e-08f, -7.149138170e-09f, -4.336925485e-09f, -2.630755391e-09f, -1.595735877e-09f, -9.679003155e-10f, -5.870749997e-10f, -3.560840511e-10f, -2.159777635e-10f, -1.309978237e-10f, -7.945444996e-11f, -4.819165206e-11f},
};
// tanh(softplus(x)) for x in [-22.5, 9.5): mish's; 1 in fp32 from 9.01 on; width 1.0, degree 6, relative error under 4e-07. Row j: coefficient of s^j.
#define TAB_TANH_SOFTPLUS_W 1.0f
#define TAB_TANH_SOFTPLUS_D 6
#define TAB_TANH_SOFTPLUS_SHIFT 22
static const float TAB_TANH_SOFTPLUS[7][32] __attribute__((aligned(64))) = {
  {2.789468101e-10f, 7.582560690e-10f, 2.061153692e-09f, 5.602796449e-09f, 1.522997906e-08f, 4.139937815e-08f, 1.125351687e-07f, 3.059022902e-07f, 8.315283822e-07f, 2.260326937e-06f, 6.144193321e-06f, 1.670156234e-05f, 4.539890142e-05f, 1.234021911e-04f, 3.354063665e-04f, 9.114661952e-04f, 2.475680085e-03f, 6.715247408e-03f, 1.814793609e-02f, 4.854915291e-02f, 1.262507439e-01f, 3.034014702e-01f, 5.999999642e-01f, 8.650984168e-01f, 9.719794989e-01f, 9.955116510e-01f, 9.993532300e-01f, 9.999104142e-01f, 9.999877810e-01f, 9.999983311e-01f, 9.999997616e-01f, 9.999999404e-01f},
  {2.789468934e-10f, 7.582562911e-10f, 2.061154358e-09f, 5.602798225e-09f, 1.522998438e-08f, 4.139938881e-08f, 1.125351972e-07f, 3.059023186e-07f, 8.315282685e-07f, 2.260324891e-06f, 6.144176496e-06f, 1.670142774e-05f, 4.539788279e-05f, 1.233946095e-04f, 3.353501961e-04f, 9.110507090e-04f, 2.472608583e-03f, 6.692550145e-03f, 1.798028499e-02f, 4.731406271e-02f, 1.173028126e-01f, 2.441854775e-01f, 3.199979961e-01f, 1.839395314e-01f, 4.866884276e-02f, 8.531721309e-03f, 1.269932138e-03f, 1.779650047e-04f, 2.439519449e-05f, 3.317098617e-06f, 4.496978079e-07f, 6.089872073e-08f},
  {1.394731969e-10f, 3.791274517e-10f, 1.030575292e-09f, 2.801394006e-09f, 7.614977982e-09f, 2.069965532e-08f, 5.626748845e-08f, 1.529508324e-07f, 4.157630258e-07f, 1.130157898e-06f, 3.072063691e-06f, 8.350558346e-06f, 2.269787001e-05f, 6.168957771e-05f, 1.676185348e-04f, 4.551087914e-04f, 1.233230345e-03f, 3.323574550e-03f, 8.822576143e-03f, 2.242620476e-02f, 4.989495873e-02f, 6.933067739e-02f, -1.599830389e-02f, -9.159593284e-02f, -3.876574337e-02f, -7.888280787e-03f, -1.234854339e-03f, -1.761609601e-04f, -2.430419045e-05f, -3.312528634e-06f, -4.494671941e-07f, -6.088686177e-08f},
  {4.648822299e-11f, 1.263680965e-10f, 3.435040863e-10f, 9.337409734e-10f, 2.538170785e-09f, 6.899463223e-09f, 1.875467959e-08f, 5.098046429e-08f, 1.385789830e-07f, 3.766945724e-07f, 1.023946083e-06f, 2.783256832e-06f, 7.564808584e-06f, 2.055687037e-05f, 5.583199163e-05f, 1.514170290e-04f, 4.090076254e-04f, 1.092690392e-03f, 2.829286503e-03f, 6.661149673e-03f, 1.103417855e-02f, -5.103947129e-03f, -4.580178857e-02f, 5.652215332e-03f, 1.739465818e-02f, 4.647873808e-03f, 7.883363869e-04f, 1.155480277e-04f, 1.609605533e-05f, 2.201500820e-06f, 2.990984456e-07f, 4.053632097e-08f},
  {1.162481656e-11f, 3.159952855e-11f, 8.589642192e-11f, 2.334906712e-10f, 6.346934089e-10f, 1.725275256e-09f, 4.689781452e-09f, 1.274812877e-08f, 3.465286014e-08f, 9.419515834e-08f, 2.560410337e-07f, 6.959328402e-07f, 1.891306852e-06f, 5.137892458e-06f, 1.394250285e-05f, 3.772426135e-05f, 1.012492794e-04f, 2.656531287e-04f, 6.516357535e-04f, 1.262272708e-03f, 1.702407026e-04f, -1.007861178e-02f, -3.815816890e-04f, 1.373547129e-02f, -3.659044160e-03f, -1.896667061e-03f, -3.690489102e-04f, -5.646062345e-05f, -7.982856005e-06f, -1.097695758e-06f, -1.494258299e-07f, -2.026596313e-08f},
  {2.348448042e-12f, 6.383743360e-12f, 1.735281363e-11f, 4.716983401e-11f, 1.282208784e-10f, 3.485403355e-10f, 9.474298013e-10f, 2.575373026e-09f, 7.000528601e-09f, 1.902896152e-08f, 5.172276474e-08f, 1.405725669e-07f, 3.819348819e-07f, 1.036869548e-06f, 2.808624004e-06f, 7.561630355e-06f, 2.001530993e-05f, 5.042620978e-05f, 1.078723508e-04f, 8.790321590e-05f, -8.745709201e-04f, -2.483571414e-03f, 7.289725356e-03f, -4.123665858e-03f, -7.367102662e-04f, 5.192651879e-04f, 1.363802294e-04f, 2.260361725e-05f, 3.282030548e-06f, 4.555803059e-07f, 6.222956017e-08f, 8.450513178e-09f},
  {3.839804451e-13f, 1.043767069e-12f, 2.837252785e-12f, 7.712452205e-12f, 2.096461199e-11f, 5.698767500e-11f, 1.549081974e-10f, 4.210815308e-10f, 1.144598860e-09f, 3.111198854e-09f, 8.456054523e-09f, 2.297810475e-08f, 6.240307471e-08f, 1.692013996e-07f, 4.567763767e-07f, 1.218292937e-06f, 3.139139380e-06f, 7.260645361e-06f, 1.046145098e-05f, -3.405292955e-05f, -3.387234174e-04f, 3.899823350e-04f, 7.990702870e-04f, -1.275650691e-03f, 7.593265036e-04f, -6.814366498e-05f, -3.777342863e-05f, -7.075885605e-06f, -1.066105256e-06f, -1.498817142e-07f, -2.056667903e-08f, -2.797487575e-09f},
};
// END TABLES

// One coefficient for each lane from a 32-interval table row: two registers and one vpermt2ps,
// which reads only the index's low five bits.
AI vf vtable_row(const float* row, vi idx) {
  return (vf)_mm512_permutex2var_ps(_mm512_load_ps(row), (__m512i)idx, _mm512_load_ps(row + 16));
}
// Interval round(y) + shift's polynomial at s = y - round(y), for round(y) + shift in [0, 31]
// (kernels/cpp/tables.py). Adding 1.5 * 2^23 + shift rounds y into the low mantissa bits, which
// serve as the index as they are; s is exact, whatever the shift.
template <int D>
AI vf vtable(const float (*T)[32], vf y, int shift = 0) {
  const float magic = 12582912.f + (float)shift;
  const vf a = y + magic;
  const vi idx = (vi)a;
  const vf s = y - (a - magic);
  vf p = vtable_row(T[D], idx);
#pragma GCC unroll 8
  for (int j = D - 1; j >= 0; --j) p = p * s + vtable_row(T[j], idx);
  return p;
}
#endif

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
AI vf vgelu(vf x) {
#if defined(__AVX512F__)
  // erf from a table in |x| (about two thirds of the rational form's instructions): 1.3e-7 from double.
  // The clamp passes a NaN on as 31.49; the product with x makes the result NaN again.
  const vf e = vtable<TAB_ERF_D>(TAB_ERF, vmin(vabs(x) * (1.0f / TAB_ERF_W), vsplat(31.49f)));
  return 0.5f * x * (1.0f + vcopysign(e, x));
#else
  return 0.5f * x * (1.0f + verf_body(x * 0.70710678118654752f));
#endif
}
// A NaN x needs no select here either.
AI vf vgelu_tanh(vf x) {
#if defined(__AVX512F__)
  // The same for tanh of the cubic: one table in |x| (kernels/cpp/tables.py).
  const vf t = vtable<TAB_GELU_TANH_D>(TAB_GELU_TANH, vmin(vabs(x) * (1.0f / TAB_GELU_TANH_W), vsplat(31.49f)));
  return 0.5f * x * (1.0f + vcopysign(t, x));
#else
  return 0.5f * x * (1.0f + vtanh_body(0.79788456080286536f * (x + 0.044715f * x * x * x)));
#endif
}
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
AI vf vsoftplus_unscaled(vf v) {
#if defined(__AVX512F__)
  // log1p(exp(-|v|)) from a table while every lane is in [-15.7, inf]: a third fewer instructions.
  // Past its last interval the table stays at 1.4e-7, which rounds away beside v >= 15.7 but not
  // in place of exp(v) below -15.7; such a vector (or one with a NaN) takes the form below. The
  // test comes after the table, not before: as a branch around it, streamed softplus ran 7-15%
  // slower (bench/activations.py, same rounds).
  const vf r = vmax(v, vsplat(0.f)) + vtable<TAB_SOFTPLUS_D>(TAB_SOFTPLUS, vmin(vabs(v) * (1.0f / TAB_SOFTPLUS_W), vsplat(31.49f)));
  const __mmask16 in = _mm512_cmp_ps_mask((__m512)v, _mm512_set1_ps(-15.7f), _CMP_GE_OQ);
  if (__builtin_expect(_kortestc_mask16_u8(in, in), 1)) return r;
#endif
  return vmax(v, vsplat(0.f)) + vlog1p_unit(vexp_nonpos(-vabs(v)));
}

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
#if defined(__AVX512F__)
  // From a table while every lane is at least -22.4 (a sixth fewer instructions than the exp and
  // the reciprocal); beyond 9.49 the last interval's end is 1 - 2^-24, as fp32 rounds the form
  // below. A lane further down, or a NaN, takes that form: there tanh(softplus(x)) is exp(x) to
  // fp32, which a table left at its first interval would not keep.
  const vf t = vtable<TAB_TANH_SOFTPLUS_D>(TAB_TANH_SOFTPLUS, vmin(x, vsplat(9.49f)), TAB_TANH_SOFTPLUS_SHIFT);
  const __mmask16 in = _mm512_cmp_ps_mask((__m512)x, _mm512_set1_ps(-22.4f), _CMP_GE_OQ);
  if (__builtin_expect(_kortestc_mask16_u8(in, in), 1)) return t;
#endif
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
