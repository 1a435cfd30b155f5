/* The per-block pass of skts (see skts/_kernel.pyx and skts/_numerics/).

   One call reads one block of rows once: row maxima, centred logits, the
   exponentials at one or several beta = 1/T, their row sums and moments, the
   per-row losses, derivatives and error bounds, and their weighted sums. The
   arithmetic is plain C that the compiler vectorises (no BLAS, no libm in the
   loops over logits): exp and log are the polynomials below, whose error
   bounds are proven in their comments and checked by tests/test_kernel.py.

   Determinism: every sum runs in an order fixed by the shape alone (rows in
   16 lanes, lane sums added in order; classes in order, or in 16 lanes
   added in a fixed tree for wide rows). The build turns off floating-point contraction, so the same
   input gives the same bits on every machine and in every vector width.

   Units: u = 2**-53 (float64), u32 = 2**-24 (float32); "ulp" in
   skts/_numerics/ means 2u.
*/
#ifndef SKTS_KERNEL_H
#define SKTS_KERNEL_H

#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>

/* SKTS_PORTABLE (the meson option -Dportable=true; any compiler without GNU
   C) builds the kernel from ISO C11 alone: no vector types, no attributes.
   The arithmetic is the same, operation for operation, so are the bits. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && \
    defined(__GLIBC__) && !defined(SKTS_PORTABLE) && !defined(SKTS_NO_CLONES)
/* One clone per vector width, chosen at load time (glibc's ifunc: not on
   musl, whose wheels, musllinux, take the baseline ISA). SKTS_NO_CLONES
   builds one version, for the -march given (benchmarks/bench_build.py
   times each clone's code on one machine that way). */
#define SKTS_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SKTS_CLONES
#endif

/* Always inlined: each vector-width clone of a caller gets its own copy (an
   out-of-line copy would be built for the baseline ISA, without FMA). */
#if defined(__GNUC__) && !defined(SKTS_PORTABLE)
#define SKTS_INLINE static inline __attribute__((always_inline))
#else
#define SKTS_INLINE static inline
#endif

#define SKTS_CHUNK 4096 /* elements of one sub-chunk of a block (L1/L2) */
#define SKTS_TRANSPOSE_MAX 32
/* Wide rows sum float32 exponentials in runs of this many vectors before
   adding them to float64 lanes (the window's bound counts SKTS_RUN32 - 1). */
#define SKTS_RUN32 8
#define SKTS_LANES 16
#define SKTS_BIG 1.7976931348623157e308
#define SKTS_F32_MIN (-3.4028234663852886e38f)
/* Exponents are clamped here: float64 results stay normal (and the error of
   the clamp, below 1e-304 per term, is in the bounds of skts/_numerics/). */
#define SKTS_EXP_FLOOR (-700.0)
/* float32: exp(-87) = 1.6e-38 is normal; the clamp changes a term by less
   than 1.7e-38, inside the 4e-38 per class of Rows.window's bound. */
#define SKTS_EXP32_FLOOR (-87.0f)

SKTS_INLINE uint64_t skts_bits64(double x) {
    uint64_t b;
    memcpy(&b, &x, 8);
    return b;
}
SKTS_INLINE double skts_from64(uint64_t b) {
    double x;
    memcpy(&x, &b, 8);
    return x;
}
SKTS_INLINE uint32_t skts_bits32(float x) {
    uint32_t b;
    memcpy(&b, &x, 4);
    return b;
}
SKTS_INLINE float skts_from32(uint32_t b) {
    float x;
    memcpy(&x, &b, 4);
    return x;
}

/* exp(x) for x in [-708, 0], relative error below 3.2u (proof):

   k = nearest integer to 2x / ln 2 (shifter trick; off by one at most when
   2x / ln 2 is within rounding of a half-integer), k in [-2044, 0], and
   exp(x) = 2^(k/2) exp(r): half steps of ln 2, so that |r| is half as large
   as with whole ones and a polynomial two degrees lower is as accurate.
   r = (x - k LN2_HI) - k LN2_LO with LN2_HI + LN2_LO = ln(2) / 2. LN2_HI has
   32 trailing zero bits, so k LN2_HI is exact, and x - k LN2_HI is exact by
   Sterbenz's lemma (|x| >= |k| ln2 / 4 when k != 0). |k LN2_LO| < 2e-7, its
   rounding and that of the subtraction move r by at most u |r| + 1e-23, and
   LN2_LO is within 1e-26 relative of ln2 / 2 - LN2_HI, so |r - (x - k
   ln(2) / 2)| <= u |r| + 2e-23: a relative error of exp below 0.18u + 2e-23.
   |r| <= ln(2)/4 + 1e-13 < 0.1733. p is the Taylor polynomial of degree 11:
   its remainder is below e^0.1733 0.1733^12 / 12! < 1.9e-18 < 0.02u
   relative. Horner's evaluation q_i = c_i + r q_{i+1} (c_i = 1/i! rounded;
   c_0 = c_1 = 1 exact) has a relative error below 1.5u, by the running
   error recursion e_i <= (u c_i + |r| q_{i+1} (e_{i+1} + u)) / q_i + u
   evaluated at the worst |r| (tests/test_kernel.py recomputes it in exact
   rational arithmetic). 2^(k/2) is 2^floor(k/2), exact, times 1 or (odd k)
   sqrt(2) rounded to double (within 0.5u); their product is exact (a power
   of two scaling a normal number: set in the exponent bits), and the result
   is normal. In all: 0.18u + 0.02u + 1.5u + 0.5u + u (the product) < 3.2u;
   we use 4 ulp = 8u in every bound. */
SKTS_INLINE double skts_exp64(double x) {
    const double shifter = 0x1.8p52;
    const double kd_s = x * 0x1.71547652b82fep1 + shifter; /* 2 / ln 2 */
    const double kd = kd_s - shifter;
    const int64_t k = (int64_t)(skts_bits64(kd_s) - skts_bits64(shifter));
    const double r = (x - kd * 0x1.62e42feep-2) - kd * 0x1.a39ef35793c76p-34;
    /* Horner's steps as fused multiply-adds: one rounding each (the error
       analysis above counts two), the same bits in every vector width. */
    double p = 1.0 / 39916800.0;
    p = fma(r, p, 1.0 / 3628800.0);
    p = fma(r, p, 1.0 / 362880.0);
    p = fma(r, p, 1.0 / 40320.0);
    p = fma(r, p, 1.0 / 5040.0);
    p = fma(r, p, 1.0 / 720.0);
    p = fma(r, p, 1.0 / 120.0);
    p = fma(r, p, 1.0 / 24.0);
    p = fma(r, p, 1.0 / 6.0);
    p = fma(r, p, 0.5);
    p = fma(r, p, 1.0);
    p = fma(r, p, 1.0);
    /* 2^floor(k/2) in the exponent, and sqrt(2)'s significand (rounded to
       nearest: 0x1.6a09e667f3bcdp0) when k is odd */
    const uint64_t scale = ((uint64_t)((k >> 1) + 1023) << 52) |
                           ((k & 1) ? 0x6a09e667f3bcdULL : 0ULL);
    return p * skts_from64(scale);
}

/* expf(x) for x in [-87, 0], relative error below 4 u32 (the same proof in
   float32: LN2_HI = 0x1.62e4p-1 has 15 significant bits and |k| <= 126, so
   k LN2_HI is exact; Taylor degree 7, remainder < 7.6e-9 < 0.13 u32
   relative; Horner below 2.9 u32; in all below 4.4 u32). */
SKTS_INLINE float skts_exp32(float x) {
    const float shifter = 0x1.8p23f;
    /* (fmaf: one rounding where the analysis counts two; kd * LN2_HI is
       exact, so the first reduction step is the same either way.) */
    const float kd_s = fmaf(x, 0x1.715476p0f, shifter);
    const float kd = kd_s - shifter;
    const int32_t k = (int32_t)(skts_bits32(kd_s) - skts_bits32(shifter));
    const float r = fmaf(-kd, 1.428606765330187e-06f, fmaf(-kd, 0x1.62e4p-1f, x));
    float p = 1.0f / 5040.0f;
    p = fmaf(r, p, 1.0f / 720.0f);
    p = fmaf(r, p, 1.0f / 120.0f);
    p = fmaf(r, p, 1.0f / 24.0f);
    p = fmaf(r, p, 1.0f / 6.0f);
    p = fmaf(r, p, 0.5f);
    p = fmaf(r, p, 1.0f);
    p = fmaf(r, p, 1.0f);
    return p * skts_from32((uint32_t)(k + 127) << 23);
}

/* log(s) for s >= 1 (finite), relative error below 5u (proof): s = 2^e f
   with f in [0.75, 1.5) (exact), t = (f - 1) / (f + 1) (f - 1 exact by
   Sterbenz; t within 2u), |t| < 0.2; log f = 2 t S(t^2) with S the atanh
   series to t^24/25 (remainder < 1e-18 relative). t^2 carries 5u, damped by
   t^2 < 0.04 in S: S within 1.3u; 2 t S within 4.3u. e LN2_HI is exact
   (32 trailing zero bits), and where e != 0, |log f| <= 0.71 |log s|: the
   two additions bring the total below 5u. s = 1 gives 0 exactly. */
SKTS_INLINE double skts_log64(double s) {
    const uint64_t b = skts_bits64(s);
    /* The biased exponent as a double without an integer conversion (which
       would not vectorise): 2^52 + E, exactly, minus 2^52. */
    double e = skts_from64((b >> 52) | 0x4330000000000000ULL) - (0x1p52 + 1023.0);
    double f = skts_from64((b & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
    const int big = f >= 1.5;
    f = big ? 0.5 * f : f;
    e = big ? e + 1.0 : e;
    const double t = (f - 1.0) / (f + 1.0);
    const double t2 = t * t;
    double q = 1.0 / 25.0;
    q = 1.0 / 23.0 + t2 * q;
    q = 1.0 / 21.0 + t2 * q;
    q = 1.0 / 19.0 + t2 * q;
    q = 1.0 / 17.0 + t2 * q;
    q = 1.0 / 15.0 + t2 * q;
    q = 1.0 / 13.0 + t2 * q;
    q = 1.0 / 11.0 + t2 * q;
    q = 1.0 / 9.0 + t2 * q;
    q = 1.0 / 7.0 + t2 * q;
    q = 1.0 / 5.0 + t2 * q;
    q = 1.0 / 3.0 + t2 * q;
    q = 1.0 + t2 * q;
    return e * 0x1.62e42feep-1 + (e * 0x1.a39ef35793c76p-33 + (t + t) * q);
}

/* log(1 + e) for e in [0, 1], relative error below 5u: t = e / (2 + e)
   (within 2u), 0 <= t <= 1/3, log(1 + e) = 2 t S(t^2), the atanh series to
   t^32/33 (remainder < 2e-18 relative); every term is non-negative. */
SKTS_INLINE double skts_log1p64(double e) {
    const double t = e / (2.0 + e);
    const double t2 = t * t;
    double q = 1.0 / 33.0;
    for (int i = 31; i >= 1; i -= 2) q = 1.0 / (double)i + t2 * q;
    return (t + t) * q;
}

/* --- modes of the passes -------------------------------------------------- */
enum {
    SKTS_NLL = 0,    /* out[k] = sum w loss                                   */
    SKTS_SLOPES = 1, /* out[5k..5k+4] = sums of loss, slope, var_x, err, |slope|
                        (higher: 7 per beta, and F'''_row, F''''_row) */
    SKTS_DERIV = 2,  /* out[4k..4k+3] = sums of loss, F'_row, F''_row (or E[-d]), F'_row^2
                        (higher: 6 per beta, and F'''_row, F''''_row) */
    SKTS_WINDOW = 3  /* out[4k..4k+3] = est, err (float32 arithmetic), and at
                        deriv_at F', F'' (else 0); with slopes out[5k..5k+4],
                        F' and F'' at every beta and a proven bound on F' */
};

typedef struct {
    const void *z;       /* the block's first row */
    int z_f32;           /* 1: float32 logits, 0: float64 */
    ptrdiff_t n_rows;    /* rows of the block */
    ptrdiff_t n_classes;
    ptrdiff_t ld;        /* elements from one row of z to the next (n_classes
                            when contiguous; larger only above 32 classes) */
    const int64_t *y;
    const double *w;     /* normalised weights of the block's rows, or NULL */
    double inv_total;    /* 1 / total weight */
    const double *betas; /* nt values, in the order wanted */
    const double *temps; /* the temperatures (1 / beta, as given) */
    ptrdiff_t nt;
    int mode;
    int single;          /* float32 arithmetic (SKTS_DERIV, SKTS_WINDOW) */
    int second;          /* SKTS_DERIV: F'' (1) or E_p[-d] (0) */
    int moments;         /* SKTS_SLOPES: compute F' (1) or the loss only (0) */
    int facts;           /* SKTS_SLOPES: compute the three exact facts */
    int first_spread;    /* SKTS_WINDOW: 0: E_p|d| measured at betas[0] (the
                            smallest) bounds every beta; -1: use spread (in
                            the binary window too) */
    double spread;       /* SKTS_WINDOW: a known bound on E_p[-d] */
    int pair;            /* SKTS_SLOPES (float64, moments): betas[1] is within
                            1e-9 relative of betas[0], and its exponentials are
                            derived from betas[0]'s in the same read */
    int deriv_at;        /* SKTS_WINDOW: index of the beta where F' and F''
                            are also wanted (float32 exponentials), or -1 */
    int slopes;          /* SKTS_WINDOW, more than 2 classes: F', F'' and a
                            proven bound on the error of F' at every beta */
    int higher;          /* SKTS_DERIV and SKTS_SLOPES (moments, no pair): two
                            more sums, of F'''_row and F''''_row (the rows'
                            third and fourth cumulants of d), to steer */
    const double *mx_in; /* the block's row maxima, if known (wide float32
                            rows are then read in one sweep), or NULL */
    double *mx_out;      /* where to write the block's row maxima, or NULL */
    double *span_out;    /* where to write the largest row range (max z -
                            min z, rounded to nearest) of the block, or NULL */
    double *finite_out;  /* where to write 1 if every logit of the block is
                            finite, 0 if one is not, or NULL (not looked at) */
    double *out;         /* this block's results */
    unsigned char *found; /* SKTS_SLOPES with facts: top, bottom, varies */
} skts_args;

size_t skts_scratch_bytes(ptrdiff_t n_classes);
/* 1 if a label lies outside [0, n_classes) (found chunk by chunk, before
   any logit is read at a label of the chunk; out is then not to be used),
   else 0 */
int skts_block(const skts_args *a, void *scratch);
double skts_exp32_sum(const float *x, ptrdiff_t n);
int skts_varies(const void *z, int z_f32, ptrdiff_t n, ptrdiff_t k, ptrdiff_t ld,
                const double *w);
void skts_softmax_rows(const void *z, int z_f32, ptrdiff_t n_rows,
                       ptrdiff_t n_classes, double beta, int log_out,
                       void *out, int out_f32, void *scratch);
size_t skts_report_bytes(ptrdiff_t n_classes);
ptrdiff_t skts_report_rows(const void *z, int z_f32, ptrdiff_t n, ptrdiff_t k,
                           double beta, const int64_t *y, const double *w,
                           ptrdiff_t nw, ptrdiff_t ldw, double threshold,
                           int64_t *predicted, double *top, double *p_y,
                           double *log_p_y, double *sumsq, double *colsum,
                           int64_t *high_at, double *high_p, ptrdiff_t cap,
                           void *scratch);

#endif
