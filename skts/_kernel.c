/* The per-block pass (see _kernel.h). */
#include "_kernel.h"

#include <math.h>
#include <stdlib.h>

#define L SKTS_LANES
#ifndef SKTS_AHEAD
#define SKTS_AHEAD 1024
#endif
/* Helpers are inlined into each vector-width clone of skts_block. */
#define INLINE SKTS_INLINE

static ptrdiff_t chunk_rows(ptrdiff_t k) {
    ptrdiff_t r = SKTS_CHUNK / (k > 0 ? k : 1);
    if (r >= L) r -= r % L; /* whole lanes: the lane of a row is row % 16 */
    return r > 0 ? r : 1;
}

size_t skts_scratch_bytes(ptrdiff_t k) {
    const ptrdiff_t r = chunk_rows(k);
    const ptrdiff_t n = r * k;
    /* d (float64 or float32), a float64 staging copy, and 26 row arrays */
    return (size_t)(2 * n + 26 * r + 64) * sizeof(double);
}

/* Row maxima (and minima) of a row-major chunk: exact in any order, so in
   W lanes (lane q takes elements q, q + W, ...), the lanes combined in
   order. With GNU C (gcc, clang) the lanes are vector types (GCC's vector
   extensions: one vector per clone's width); the portable path (any C11
   compiler, MSVC included; forced by SKTS_PORTABLE) runs the same lanes as
   plain arrays: the same comparisons in the same order, so the same bits. */
/* Both extremes of a row (EXTREMES below): the W lanes' h (maxima) and l
   (minima) into t and u, and the row's tail from j, in both variants. */
#define EXTREMES_LANES(W)                                                     \
    t = h[0];                                                                 \
    u = l[0];                                                                 \
    for (int q = 1; q < W; q++) {                                             \
        t = h[q] > t ? h[q] : t;                                              \
        u = l[q] < u ? l[q] : u;                                              \
    }
#define EXTREMES_TAIL                                                         \
    for (; j < k; j++) {                                                      \
        t = row[j] > t ? row[j] : t;                                          \
        u = row[j] < u ? row[j] : u;                                          \
    }                                                                         \
    *mx = (double)t;                                                          \
    *mn = (double)u;
#if defined(__GNUC__) && !defined(SKTS_PORTABLE)
#define SKTS_VECTORS 1
/* 32-byte vectors: native on AVX2, and on AVX-512 too. A 64-byte vector
   type is lowered piecewise by every clone narrower than AVX-512, lane by
   lane through memory for its comparisons (gcc -Wvector-operation-
   performance): with them the x86-64-v3 clone ran a fit of 10,000 x 100
   2.8x slower than the AVX-512 clone, now 1.5x. (Plain loops over the 16
   lanes, which each clone vectorises at its own width, are as fast where
   the vectoriser handles them: widen and widen_add below; the row extremes
   in a plain loop were 10% slower on AVX-512.) */
typedef float vf8 __attribute__((vector_size(32)));
typedef int32_t vi8 __attribute__((vector_size(32)));
typedef double vd4 __attribute__((vector_size(32)));
typedef int64_t vl4 __attribute__((vector_size(32)));

/* W lanes as two vectors of W / 2 (lane q of the lanes is lane q of h0 for
   q < W / 2, else lane q - W / 2 of h1): the lanes of the portable path. */
#define EXTREME(T, VT, VI, W, NAME, OP)                                       \
    INLINE double NAME(const T *row, ptrdiff_t k) {                           \
        T t = row[0];                                                         \
        ptrdiff_t j = 1;                                                      \
        if (k >= W) {                                                         \
            VT h0, h1, v0, v1;                                                \
            memcpy(&h0, row, sizeof h0);                                      \
            memcpy(&h1, row + W / 2, sizeof h1);                              \
            for (j = W; j + W <= k; j += W) {                                 \
                memcpy(&v0, row + j, sizeof v0);                              \
                memcpy(&v1, row + j + W / 2, sizeof v1);                      \
                const VI m0 = v0 OP h0, m1 = v1 OP h1;                        \
                h0 = (VT)(((VI)v0 & m0) | ((VI)h0 & ~m0));                    \
                h1 = (VT)(((VI)v1 & m1) | ((VI)h1 & ~m1));                    \
            }                                                                 \
            T h[W];                                                           \
            memcpy(h, &h0, sizeof h0);                                        \
            memcpy(h + W / 2, &h1, sizeof h1);                                \
            t = h[0];                                                         \
            for (int q = 1; q < W; q++) t = h[q] OP t ? h[q] : t;             \
        }                                                                     \
        for (; j < k; j++) t = row[j] OP t ? row[j] : t;                      \
        return (double)t;                                                     \
    }
/* Both extremes in one sweep (a row's span asked for too): the lanes and
   comparisons of EXTREME for each, so the same values; the two chains are
   independent, so the sweep costs about one (two sweeps cost 5 ms more than
   one of a first read at 50,000 x 1,000, one thread). */
#define EXTREMES(T, VT, VI, W, NAME)                                          \
    INLINE void NAME(const T *row, ptrdiff_t k, double *mx, double *mn) {     \
        T t = row[0], u = row[0];                                             \
        ptrdiff_t j = 1;                                                      \
        if (k >= W) {                                                         \
            VT h0, h1, l0, l1, v0, v1;                                        \
            memcpy(&h0, row, sizeof h0);                                      \
            memcpy(&h1, row + W / 2, sizeof h1);                              \
            l0 = h0;                                                          \
            l1 = h1;                                                          \
            for (j = W; j + W <= k; j += W) {                                 \
                memcpy(&v0, row + j, sizeof v0);                              \
                memcpy(&v1, row + j + W / 2, sizeof v1);                      \
                const VI m0 = v0 > h0, m1 = v1 > h1;                          \
                const VI n0 = v0 < l0, n1 = v1 < l1;                          \
                h0 = (VT)(((VI)v0 & m0) | ((VI)h0 & ~m0));                    \
                h1 = (VT)(((VI)v1 & m1) | ((VI)h1 & ~m1));                    \
                l0 = (VT)(((VI)v0 & n0) | ((VI)l0 & ~n0));                    \
                l1 = (VT)(((VI)v1 & n1) | ((VI)l1 & ~n1));                    \
            }                                                                 \
            T h[W], l[W];                                                     \
            memcpy(h, &h0, sizeof h0);                                        \
            memcpy(h + W / 2, &h1, sizeof h1);                                \
            memcpy(l, &l0, sizeof l0);                                        \
            memcpy(l + W / 2, &l1, sizeof l1);                                \
            EXTREMES_LANES(W)                                                 \
        }                                                                     \
        EXTREMES_TAIL                                                         \
    }
#else
/* (VT and VI unused: the lanes are an array of W values of type T) */
#define EXTREME(T, VT, VI, W, NAME, OP)                                       \
    INLINE double NAME(const T *row, ptrdiff_t k) {                           \
        T t = row[0];                                                         \
        ptrdiff_t j = 1;                                                      \
        if (k >= W) {                                                         \
            T h[W];                                                           \
            memcpy(h, row, sizeof h);                                         \
            for (j = W; j + W <= k; j += W)                                   \
                for (int q = 0; q < W; q++)                                   \
                    h[q] = row[j + q] OP h[q] ? row[j + q] : h[q];            \
            t = h[0];                                                         \
            for (int q = 1; q < W; q++) t = h[q] OP t ? h[q] : t;             \
        }                                                                     \
        for (; j < k; j++) t = row[j] OP t ? row[j] : t;                      \
        return (double)t;                                                     \
    }
#define EXTREMES(T, VT, VI, W, NAME)                                          \
    INLINE void NAME(const T *row, ptrdiff_t k, double *mx, double *mn) {     \
        T t = row[0], u = row[0];                                             \
        ptrdiff_t j = 1;                                                      \
        if (k >= W) {                                                         \
            T h[W], l[W];                                                     \
            memcpy(h, row, sizeof h);                                         \
            memcpy(l, row, sizeof l);                                         \
            for (j = W; j + W <= k; j += W)                                   \
                for (int q = 0; q < W; q++) {                                 \
                    h[q] = row[j + q] > h[q] ? row[j + q] : h[q];             \
                    l[q] = row[j + q] < l[q] ? row[j + q] : l[q];             \
                }                                                             \
            EXTREMES_LANES(W)                                                 \
        }                                                                     \
        EXTREMES_TAIL                                                         \
    }
#endif
EXTREME(float, vf8, vi8, 16, max32, >)
EXTREME(double, vd4, vl4, 8, max64, >)
EXTREMES(float, vf8, vi8, 16, extremes32)
EXTREMES(double, vd4, vl4, 8, extremes64)

INLINE void row_extremes(const void *z, int z_f32, ptrdiff_t r,
                         ptrdiff_t k, ptrdiff_t ld, double *mx, double *mn) {
    for (ptrdiff_t i = 0; i < r; i++) {
        if (z_f32) {
            const float *row = (const float *)z + i * ld;
            if (mn)
                extremes32(row, k, mx + i, mn + i);
            else
                mx[i] = max32(row, k);
        } else {
            const double *row = (const double *)z + i * ld;
            if (mn)
                extremes64(row, k, mx + i, mn + i);
            else
                mx[i] = max64(row, k);
        }
    }
}

/* Centre a chunk of r rows: d = z - m (clipped as skts/_numerics/ does), in
   float64 (d64) or float32 (d32), class-major (d[j r_ + i]) for at most 32
   classes, else row-major; gap = m - z_y in float64. */
/* Row-major to class-major, with the number of classes a compile-time
   constant (then the compiler vectorises the strided reads). */
#define TRANSPOSE_CASE(K)                                                     \
    case K:                                                                   \
        for (ptrdiff_t j = 0; j < K; j++)                                     \
            for (ptrdiff_t i = 0; i < r; i++) t[j * r + i] = z[i * K + j];    \
        break;
/* The class counts that get a copy of their own (CASE(K) for each) */
#define NARROW_CASES(CASE)                                                    \
    CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8) CASE(9)   \
    CASE(10) CASE(11) CASE(12) CASE(13) CASE(14) CASE(15) CASE(16) CASE(20)   \
    CASE(32)
#define TRANSPOSE(NAME, TI, TO)                                               \
    INLINE void NAME(const TI *restrict z, TO *restrict t, ptrdiff_t r,       \
                     ptrdiff_t k) {                                           \
        switch (k) {                                                          \
            NARROW_CASES(TRANSPOSE_CASE)                                      \
        default:                                                              \
            for (ptrdiff_t i = 0; i < r; i++)                                 \
                for (ptrdiff_t j = 0; j < k; j++) t[j * r + i] = z[i * k + j];\
        }                                                                     \
    }
#ifdef SKTS_VECTORS
/* float32 to float32 with GNU C: four rows at a time, four classes at a
   time, as a 4 x 4 transpose in registers (16-byte vectors: native on every
   x86-64 and ARM clone). The strided reads above are built from one scalar
   load per value; these take four values a load (a chunk of 400 x 10 in
   L1 copied 2.1x faster in a C harness, gcc -O3 for AVX-512). A copy: the
   same values either way. */
typedef float vf4 __attribute__((vector_size(16)));
#ifdef __clang__
#define SHUFFLE4(A, B, I0, I1, I2, I3) __builtin_shufflevector(A, B, I0, I1, I2, I3)
#else
typedef int32_t vi4 __attribute__((vector_size(16)));
#define SHUFFLE4(A, B, I0, I1, I2, I3) \
    __builtin_shuffle(A, B, (vi4){I0, I1, I2, I3})
#endif
/* Rows i .. i + 3, classes c .. c + n - 1 (n <= 4; the loads read 4 values
   of each row, past its end into the next rows when n < 4). */
INLINE void tile4(const float *restrict z, float *restrict t, ptrdiff_t r,
                  ptrdiff_t k, ptrdiff_t i, ptrdiff_t c, ptrdiff_t n) {
    vf4 a, b, e, f;
    memcpy(&a, z + i * k + c, sizeof a);
    memcpy(&b, z + (i + 1) * k + c, sizeof b);
    memcpy(&e, z + (i + 2) * k + c, sizeof e);
    memcpy(&f, z + (i + 3) * k + c, sizeof f);
    const vf4 ab0 = SHUFFLE4(a, b, 0, 4, 1, 5);
    const vf4 ab1 = SHUFFLE4(a, b, 2, 6, 3, 7);
    const vf4 ef0 = SHUFFLE4(e, f, 0, 4, 1, 5);
    const vf4 ef1 = SHUFFLE4(e, f, 2, 6, 3, 7);
    const vf4 c0 = SHUFFLE4(ab0, ef0, 0, 1, 4, 5);
    const vf4 c1 = SHUFFLE4(ab0, ef0, 2, 3, 6, 7);
    const vf4 c2 = SHUFFLE4(ab1, ef1, 0, 1, 4, 5);
    const vf4 c3 = SHUFFLE4(ab1, ef1, 2, 3, 6, 7);
    memcpy(t + c * r + i, &c0, sizeof c0);
    if (n > 1) memcpy(t + (c + 1) * r + i, &c1, sizeof c1);
    if (n > 2) memcpy(t + (c + 2) * r + i, &c2, sizeof c2);
    if (n > 3) memcpy(t + (c + 3) * r + i, &c3, sizeof c3);
}
/* Tiles while every load stays inside the chunk's r k values (the last
   tile's loads reach (i + 3) k + 4 ceil(k / 4)); the last rows one value at
   a time. */
INLINE void transpose_tiles(const float *restrict z, float *restrict t,
                            ptrdiff_t r, ptrdiff_t k) {
    const ptrdiff_t reach = (k + 3) / 4 * 4;
    ptrdiff_t i = 0;
    for (; i + 4 <= r && (i + 3) * k + reach <= r * k; i += 4) {
        const char *ahead = (const char *)(z + i * k) + SKTS_AHEAD;
        for (ptrdiff_t b = 0; b < 16 * k; b += 64) __builtin_prefetch(ahead + b);
        for (ptrdiff_t c = 0; c < k; c += 4)
            tile4(z, t, r, k, i, c, k - c < 4 ? k - c : 4);
    }
    for (; i < r; i++)
        for (ptrdiff_t j = 0; j < k; j++) t[j * r + i] = z[i * k + j];
}
#define TILES_CASE(K)                                                         \
    case K:                                                                   \
        transpose_tiles(z, t, r, K);                                          \
        break;
INLINE void transpose_f32_f32(const float *restrict z, float *restrict t,
                              ptrdiff_t r, ptrdiff_t k) {
    switch (k) {
        NARROW_CASES(TILES_CASE)
    default:
        transpose_tiles(z, t, r, k);
    }
}
#else
TRANSPOSE(transpose_f32_f32, float, float)
#endif
TRANSPOSE(transpose_f32_f64, float, double)
TRANSPOSE(transpose_f64_f64, double, double)

/* Row maxima (and minima, if mn) of a class-major chunk src[j r + i],
   across rows: whole vectors at a time (exact in any order). MX and MN are
   of type T, src's: a float32 chunk's extremes are kept in float32 (exact; no
   conversion per logit), widened once per row by the caller. */
#define COLUMN_EXTREMES(T, src, MX, MN)                                       \
    if (mn) { /* (both in one sweep of the chunk) */                          \
        for (ptrdiff_t i = 0; i < r; i++) MX[i] = MN[i] = (src)[i];           \
        for (ptrdiff_t j = 1; j < k; j++)                                     \
            for (ptrdiff_t i = 0; i < r; i++) {                               \
                const T v = (src)[j * r + i];                                 \
                MX[i] = v > MX[i] ? v : MX[i];                                \
                MN[i] = v < MN[i] ? v : MN[i];                                \
            }                                                                 \
    } else {                                                                  \
        for (ptrdiff_t i = 0; i < r; i++) MX[i] = (src)[i];                   \
        for (ptrdiff_t j = 1; j < k; j++)                                     \
            for (ptrdiff_t i = 0; i < r; i++) {                               \
                const T v = (src)[j * r + i];                                 \
                MX[i] = v > MX[i] ? v : MX[i];                                \
            }                                                                 \
    }

INLINE void centre(const void *z, int z_f32, ptrdiff_t r, ptrdiff_t k,
                   ptrdiff_t ld, const int64_t *y, double *d64, float *d32, double *stage,
                   double *gap, double *mx, double *mn, const double *mx_in,
                   float *mx32, float *mn32) {
    if (k <= SKTS_TRANSPOSE_MAX) {
        /* Class-major: a transposing copy, then maxima, minima and the
           differences run across rows, whole vectors at a time. */
        if (d32 && z_f32) {
            const float *zf = (const float *)z;
            transpose_f32_f32(zf, d32, r, k);
            COLUMN_EXTREMES(float, d32, mx32, mn32)
            for (ptrdiff_t i = 0; i < r; i++) {
                mx[i] = (double)mx32[i];
                gap[i] = (double)mx32[i] - (double)zf[i * k + y[i]]; /* exact */
            }
            if (mn)
                for (ptrdiff_t i = 0; i < r; i++) mn[i] = (double)mn32[i];
            for (ptrdiff_t j = 0; j < k; j++)
                for (ptrdiff_t i = 0; i < r; i++) {
                    const float v = d32[j * r + i] - mx32[i];
                    d32[j * r + i] = v < SKTS_F32_MIN ? SKTS_F32_MIN : v;
                }
            return;
        }
        double *t = d32 ? stage : d64;
        if (z_f32) {
            transpose_f32_f64((const float *)z, t, r, k);
        } else {
            transpose_f64_f64((const double *)z, t, r, k);
        }
        COLUMN_EXTREMES(double, t, mx, mn)
        for (ptrdiff_t i = 0; i < r; i++) {
            const double g = mx[i] - t[y[i] * r + i];
            gap[i] = g > SKTS_BIG ? SKTS_BIG : g;
        }
        for (ptrdiff_t j = 0; j < k; j++)
            for (ptrdiff_t i = 0; i < r; i++) {
                double v = t[j * r + i] - mx[i];
                v = v < -SKTS_BIG ? -SKTS_BIG : v;
                if (d32) {
                    d32[j * r + i] =
                        (float)(v < (double)SKTS_F32_MIN ? (double)SKTS_F32_MIN : v);
                } else {
                    t[j * r + i] = v;
                }
            }
        return;
    }
    /* Row-major (more than 32 classes): rows may be ld apart. */
    if (mx_in && !mn) {
        for (ptrdiff_t i = 0; i < r; i++) mx[i] = mx_in[i];
    } else {
        row_extremes(z, z_f32, r, k, ld, mx, mn);
    }
    for (ptrdiff_t i = 0; i < r; i++) {
        const double m = mx[i];
        const double zy = z_f32 ? (double)((const float *)z)[i * ld + y[i]]
                                : ((const double *)z)[i * ld + y[i]];
        const double g = m - zy; /* exact for float32 input */
        gap[i] = g > SKTS_BIG ? SKTS_BIG : g;
    }
    if (!d32 && !d64) return; /* (the sums compute d themselves) */
    if (d32 && z_f32) {
        /* float32 input, float32 arithmetic: d = z - m in float32 */
        const float *zf = (const float *)z;
        for (ptrdiff_t i = 0; i < r; i++) {
            const float m = (float)mx[i];
            for (ptrdiff_t j = 0; j < k; j++) {
                const float v = zf[i * ld + j] - m;
                d32[i * k + j] = v < SKTS_F32_MIN ? SKTS_F32_MIN : v;
            }
        }
        return;
    }
    for (ptrdiff_t i = 0; i < r; i++) {
        const double m = mx[i];
        if (z_f32) {
            const float *zr = (const float *)z + i * ld;
            for (ptrdiff_t j = 0; j < k; j++) {
                const double v = (double)zr[j] - m;
                if (d32) d32[i * k + j] = (float)(v < (double)SKTS_F32_MIN ? (double)SKTS_F32_MIN : v);
                else d64[i * k + j] = v;
            }
        } else {
            const double *zr = (const double *)z + i * ld;
            for (ptrdiff_t j = 0; j < k; j++) {
                double v = zr[j] - m;
                v = v < -SKTS_BIG ? -SKTS_BIG : v;
                if (d32) d32[i * k + j] = (float)(v < (double)SKTS_F32_MIN ? (double)SKTS_F32_MIN : v);
                else d64[i * k + j] = v;
            }
        }
    }
}

/* The sum of 16 lanes in a fixed tree order (halves added, four times):
   short dependency chains, the same bits on every machine. */
#ifdef SKTS_VECTORS
INLINE double tree16(const double *a) {
    /* b[q] = a[q] + a[q + 8], c[q] = b[q] + b[q + 4], (c0 + c2) + (c1 + c3):
       in vector types, or the compiler adds lane by lane through memory */
    vd4 a0, a1, a2, a3;
    memcpy(&a0, a, sizeof a0);
    memcpy(&a1, a + 4, sizeof a1);
    memcpy(&a2, a + 8, sizeof a2);
    memcpy(&a3, a + 12, sizeof a3);
    const vd4 c = (a0 + a2) + (a1 + a3); /* (b[0:4] + b[4:8]) */
    return (c[0] + c[2]) + (c[1] + c[3]);
}
#else
INLINE double tree16(const double *a) {
    double b[8], c[4];
    for (int q = 0; q < 8; q++) b[q] = a[q] + a[q + 8];
    for (int q = 0; q < 4; q++) c[q] = b[q] + b[q + 4];
    return (c[0] + c[2]) + (c[1] + c[3]);
}
#endif

/* a[q] = (double)b[q] for 16 lanes (exact): a plain loop, which each
   clone vectorises at its own width (the portable build runs it as it is) */
INLINE void widen(double *a, const float *b) {
    for (int q = 0; q < 16; q++) a[q] = (double)b[q];
}

/* a[q] += (double)b[q] for 16 lanes (float32 lanes into float64 ones) */
INLINE void widen_add(double *a, const float *b) {
    for (int q = 0; q < 16; q++) a[q] += (double)b[q];
}

/* One vector of a wide row in float64: lanes q with IN add exp(x) (and,
   with MOM, e x and e x x) to a, a1, a2; the others add +0, so the sums
   keep their bits. SRC is lane q's d: read from the centred row (lanes past
   its end read on into the scratch buffer, harmlessly), or computed from
   float32 logits, z - m, exactly as centre() would. */
#define LANES64(MOM, IN, SRC)                                                 \
    for (int q = 0; q < L; q++) {                                             \
        const double v = (SRC);                                               \
        double x = (IN) ? v * beta : 0.0;                                     \
        x = x < SKTS_EXP_FLOOR ? SKTS_EXP_FLOOR : x;                          \
        const double ev = skts_exp64(x);                                      \
        const double e = (IN) ? ev : 0.0;                                     \
        a[q] += e;                                                            \
        if (MOM) {                                                            \
            const double ex = e * x, ex2 = ex * x;                            \
            a1[q] += ex;                                                      \
            a2[q] += ex2;                                                     \
            if ((MOM) == 4) {                                                 \
                const double ex3 = ex2 * x;                                   \
                a3[q] += ex3;                                                 \
                a4[q] += ex3 * x;                                             \
            }                                                                 \
        }                                                                     \
    }

/* One class of a class-major chunk, with four moments (restrict: more arrays
   than the vectoriser checks for overlap at run time). */
INLINE void column4_64(const double *restrict dj, ptrdiff_t r, double beta,
                       double *restrict s, double *restrict s1,
                       double *restrict s2, double *restrict s3,
                       double *restrict s4) {
    for (ptrdiff_t i = 0; i < r; i++) {
        double x = dj[i] * beta;
        x = x < SKTS_EXP_FLOOR ? SKTS_EXP_FLOOR : x;
        const double e = skts_exp64(x);
        const double ex = e * x, ex2 = ex * x, ex3 = ex2 * x;
        s[i] += e;
        s1[i] += ex;
        s2[i] += ex2;
        s3[i] += ex3;
        s4[i] += ex3 * x;
    }
}

/* The next chunk's row (AHEAD, the logits' bytes, ESZ bytes a value) from
   value A to value B, fetched into the cache while this row's exponentials
   are computed: the next chunk's centring then finds it there instead of
   waiting for memory (a hint only: it changes no value, and no address
   outside the row is formed). At 50,000 x 1,000 float32 it took the read's
   fixed cost from 16.6 ms to 6.6 on one thread (benchmarks/bench_window.py;
   docs/performance.md). */
#if defined(SKTS_VECTORS) /* (GNU C; not in the portable path) */
#define PREFETCH_RUN(AHEAD, ESZ, A, B)                                        \
    do {                                                                      \
        if (AHEAD)                                                            \
            for (ptrdiff_t c = (A) * (ESZ) - (A) * (ESZ) % 64;               \
                 c < (B) * (ESZ); c += 64)                                    \
                __builtin_prefetch((AHEAD) + c, 0, 2);                        \
    } while (0);
#else
#define PREFETCH_RUN(AHEAD, ESZ, A, B) (void)(AHEAD);
#endif
/* The share of classes [J0, J1) of K in the next chunk's SPAN bytes
   (class-major reads, whose rows are contiguous: a chunk's exponentials run
   one class, or a group of classes, at a time, and each fetches its
   classes' share of the next chunk). At 1,000,000 x 10 float32 it took a
   one-candidate read from 10.9-11.3 ms to 9.3-10.3 on one thread, with the
   labels' prefetch in skts_block (benchmarks/bench_window.py;
   docs/performance.md). */
INLINE void next_part(const char *next, ptrdiff_t span, ptrdiff_t j0,
                      ptrdiff_t j1, ptrdiff_t k) {
    const ptrdiff_t from = span * j0 / k, to = span * j1 / k;
    (void)from, (void)to;
    PREFETCH_RUN(next, 1, from, to)
}
/* The row of the next chunk that row I of this one fetches (see
   PREFETCH_RUN): NULL where there is none. */
#define AHEAD_ROW(I) (next && (I) < next_rows ? next + (I) * ldb : NULL)

/* Row sums of e = exp(x), e x and e x x (moments 1; and e x^3, e x^4 with
   moments 4) with x = max(beta d, floor), in float64 arithmetic. Sums over
   classes follow the classes in order (class-major) or run in 16 lanes
   added by tree16 (row-major). */
/* A wide row's sums from SRC (see LANES64); the last partial vector reads
   TAIL. */
#define ROW64(SRC, TAIL)                                                      \
    PREFETCH_RUN(ahead, esz, 0, k)                                            \
    if (moments == 4) {                                                       \
        for (; j + L <= k; j += L) LANES64(4, 1, SRC)                         \
        if (rem) LANES64(4, q < rem, TAIL)                                    \
        s3[i] = tree16(a3);                                                   \
        s4[i] = tree16(a4);                                                   \
    } else if (moments) {                                                     \
        for (; j + L <= k; j += L) LANES64(1, 1, SRC)                         \
        if (rem) LANES64(1, q < rem, TAIL)                                    \
    } else {                                                                  \
        for (; j + L <= k; j += L) LANES64(0, 1, SRC)                         \
        if (rem) LANES64(0, q < rem, TAIL)                                    \
    }

/* (zf: float32 logits rows ld apart, and mx their maxima, for wide rows:
   d = z - m is computed on the fly, not read from d) */
INLINE void sums64(const double *d, ptrdiff_t r, ptrdiff_t k, double beta,
                   int moments, double *s, double *s1, double *s2, double *s3,
                   double *s4, const float *zf, ptrdiff_t ld, const double *mx,
                   const char *next, ptrdiff_t next_rows, ptrdiff_t ldb,
                   ptrdiff_t esz) {
    if (k <= SKTS_TRANSPOSE_MAX) {
        for (ptrdiff_t i = 0; i < r; i++) s[i] = s1[i] = s2[i] = 0.0;
        if (moments == 4)
            for (ptrdiff_t i = 0; i < r; i++) s3[i] = s4[i] = 0.0;
        const ptrdiff_t span = next ? next_rows * ldb : 0;
        for (ptrdiff_t j = 0; j < k; j++) {
            const double *dj = d + j * r;
            next_part(next, span, j, j + 1, k);
            if (moments == 4) {
                column4_64(dj, r, beta, s, s1, s2, s3, s4);
            } else if (moments) {
                for (ptrdiff_t i = 0; i < r; i++) {
                    double x = dj[i] * beta;
                    x = x < SKTS_EXP_FLOOR ? SKTS_EXP_FLOOR : x;
                    const double e = skts_exp64(x);
                    const double ex = e * x;
                    s[i] += e;
                    s1[i] += ex;
                    s2[i] += ex * x;
                }
            } else {
                for (ptrdiff_t i = 0; i < r; i++) {
                    double x = dj[i] * beta;
                    x = x < SKTS_EXP_FLOOR ? SKTS_EXP_FLOOR : x;
                    s[i] += skts_exp64(x);
                }
            }
        }
        return;
    }
    for (ptrdiff_t i = 0; i < r; i++) {
        double a[L] = {0}, a1[L] = {0}, a2[L] = {0}, a3[L] = {0}, a4[L] = {0};
        ptrdiff_t j = 0;
        const ptrdiff_t rem = k % L;
        const char *ahead = AHEAD_ROW(i);
        if (zf) {
            const float *zr = zf + i * ld;
            const double m = mx[i];
            float tail[L] = {0}; /* (the row's last partial vector, padded) */
            for (ptrdiff_t q = 0; q < rem; q++) tail[q] = zr[k - rem + q];
            ROW64((double)zr[j + q] - m, (double)tail[q] - m)
        } else {
            const double *row = d + i * k;
            ROW64(row[j + q], row[j + q])
        }
        s[i] = tree16(a);
        if (moments) {
            s1[i] = tree16(a1);
            s2[i] = tree16(a2);
        }
    }
}

/* One vector of a wide row in float32: lanes q with IN add exp(x), and the
   moments (MOM: 0, 1, 2 or 4), to b, a1, a2 (a3, a4); the others add +0. Lanes past the
   row's end read on into the (zeroed) scratch buffer, harmlessly. */
#define LANES32(MOM, IN, SRC)                                                 \
    for (int q = 0; q < L; q++) {                                             \
        const float v = (SRC);                                                \
        float x = (IN) ? v * beta : 0.0f;                                     \
        x = x < SKTS_EXP32_FLOOR ? SKTS_EXP32_FLOOR : x;                      \
        const float ev = skts_exp32(x);                                       \
        const float e = (IN) ? ev : 0.0f;                                     \
        const float ex = e * x;                                               \
        b[q] += e;                                                            \
        if ((MOM) >= 1) a1[q] += ex;                                          \
        if ((MOM) >= 2) {                                                     \
            const float ex2 = ex * x;                                         \
            a2[q] += ex2;                                                     \
            if ((MOM) == 4) {                                                 \
                const float ex3 = ex2 * x;                                    \
                a3[q] += ex3;                                                 \
                a4[q] += ex3 * x;                                             \
            }                                                                 \
        }                                                                     \
    }
/* A wide row: S in runs of SKTS_RUN32 vectors summed in float32 lanes (b),
   each run then added to the float64 lanes a; the last run takes what is
   left, the tail included, so no run has more than SKTS_RUN32 terms. */
#define ROW32(MOM, SRC, TAIL)                                                 \
    {                                                                         \
        ptrdiff_t j = 0;                                                      \
        const ptrdiff_t runs = k / L / SKTS_RUN32;                            \
        for (ptrdiff_t t = 0; t < runs; t++) {                                \
            float b[L] = {0};                                                 \
            PREFETCH_RUN(ahead, esz, j, j + SKTS_RUN32 * L)                   \
            for (int u = 0; u < SKTS_RUN32; u++, j += L) LANES32(MOM, 1, SRC) \
            widen_add(a, b);                                                  \
        }                                                                     \
        float b[L] = {0};                                                     \
        PREFETCH_RUN(ahead, esz, j, k)                                        \
        for (; j + L <= k; j += L) LANES32(MOM, 1, SRC)                       \
        if (rem) LANES32(MOM, q < rem, TAIL)                                  \
        widen_add(a, b);                                                      \
    }
/* All the moments a row may want, from SRC (TAIL for its last vector). */
#define ROW32_ALL(SRC, TAIL)                                                  \
    if (moments == 4) {                                                       \
        ROW32(4, SRC, TAIL)                                                   \
    } else if (moments == 2) {                                                \
        ROW32(2, SRC, TAIL)                                                   \
    } else if (moments == 1) {                                                \
        ROW32(1, SRC, TAIL)                                                   \
    } else {                                                                  \
        ROW32(0, SRC, TAIL)                                                   \
    }

/* sums64 (with moments) at beta and at beta + delta, |delta| <= 1e-9 beta,
   in one read: the second point's exponentials are the first's times
   P(v) = 1 + v + v^2/2, v = delta d (|v| < 1e-6 wherever beta d is above
   the clamp; 0 where it is clamped). P carries one rounding (the others are
   scaled by |v|) and the product another, so each exponential stays within
   3.2u + 2u of its value, inside the 4 ulp per exponential that the slopes'
   bound counts; the truncation, below |v|^3/6 < 2e-19 (0.002u), is far
   below u. */
#define PAIR_TERM(DV)                                                         \
    double x = (DV) * beta;                                                   \
    const int low = x < SKTS_EXP_FLOOR;                                       \
    x = low ? SKTS_EXP_FLOOR : x;                                             \
    const double e = skts_exp64(x);                                           \
    const double v = low ? 0.0 : (DV) * delta;                                \
    const double p = 1.0 + v * (1.0 + v * 0.5);                               \
    const double e2 = e * p;                                                  \
    double x2 = (DV) * beta2;                                                 \
    x2 = x2 < SKTS_EXP_FLOOR ? SKTS_EXP_FLOOR : x2;                           \
    const double ex = e * x, ex2 = e2 * x2;
/* (restrict: six accumulators and a column are more arrays than the
   vectoriser checks for overlap at run time) */
INLINE void pair_columns(const double *restrict d, ptrdiff_t r, ptrdiff_t k,
                         double beta, double beta2, double delta,
                         double *restrict s, double *restrict s1,
                         double *restrict s2, double *restrict t,
                         double *restrict t1, double *restrict t2) {
    for (ptrdiff_t i = 0; i < r; i++)
        s[i] = s1[i] = s2[i] = t[i] = t1[i] = t2[i] = 0.0;
    for (ptrdiff_t j = 0; j < k; j++) {
        const double *restrict dj = d + j * r;
        for (ptrdiff_t i = 0; i < r; i++) {
            PAIR_TERM(dj[i])
            s[i] += e;
            s1[i] += ex;
            s2[i] += ex * x;
            t[i] += e2;
            t1[i] += ex2;
            t2[i] += ex2 * x2;
        }
    }
}

/* A wide row's pair of sums from SRC (see LANES64); the tail reads TAIL. */
#define PAIR_ROW(SRC, TAIL)                                                   \
    for (; j + L <= k; j += L)                                                \
        for (int q = 0; q < L; q++) {                                         \
            PAIR_TERM(SRC)                                                    \
            a[q] += e;                                                        \
            a1[q] += ex;                                                      \
            a2[q] += ex * x;                                                  \
            b[q] += e2;                                                       \
            b1[q] += ex2;                                                     \
            b2[q] += ex2 * x2;                                                \
        }                                                                     \
    if (rem)                                                                  \
        for (int q = 0; q < L; q++) {                                         \
            /* the tail as one vector (see sums64) */                         \
            const int in = q < rem;                                           \
            const double dv = in ? (TAIL) : 0.0;                              \
            PAIR_TERM(dv)                                                     \
            a[q] += in ? e : 0.0;                                             \
            a1[q] += in ? ex : 0.0;                                           \
            a2[q] += in ? ex * x : 0.0;                                       \
            b[q] += in ? e2 : 0.0;                                            \
            b1[q] += in ? ex2 : 0.0;                                          \
            b2[q] += in ? ex2 * x2 : 0.0;                                     \
        }

INLINE void sums64_pair(const double *d, ptrdiff_t r, ptrdiff_t k, double beta,
                        double beta2, double *s, double *s1, double *s2,
                        double *t, double *t1, double *t2, const float *zf,
                        ptrdiff_t ld, const double *mx) {
    const double delta = beta2 - beta; /* exact: the two are that close */
    if (k <= SKTS_TRANSPOSE_MAX) {
        pair_columns(d, r, k, beta, beta2, delta, s, s1, s2, t, t1, t2);
        return;
    }
    for (ptrdiff_t i = 0; i < r; i++) {
        double a[L] = {0}, a1[L] = {0}, a2[L] = {0};
        double b[L] = {0}, b1[L] = {0}, b2[L] = {0};
        ptrdiff_t j = 0;
        const ptrdiff_t rem = k % L;
        if (zf) {
            const float *zr = zf + i * ld;
            const double m = mx[i];
            float tail[L] = {0}; /* (the row's last partial vector, padded) */
            for (ptrdiff_t q = 0; q < rem; q++) tail[q] = zr[k - rem + q];
            PAIR_ROW((double)zr[j + q] - m, (double)tail[q] - m)
        } else {
            const double *row = d + i * k;
            PAIR_ROW(row[j + q], row[j + q])
        }
        s[i] = tree16(a);
        s1[i] = tree16(a1);
        s2[i] = tree16(a2);
        t[i] = tree16(b);
        t1[i] = tree16(b1);
        t2[i] = tree16(b2);
    }
}

/* The same in float32 arithmetic, accumulated in float64. */
/* d = z - m in float32, clamped as centre() does */
INLINE float clamp32(float v) { return v < SKTS_F32_MIN ? SKTS_F32_MIN : v; }

/* group32: G classes of a class-major chunk (from d, rows r apart), row by
   row: their exponentials' float32 tree sum added to the row's float64 S,
   and the moments (MOM: 0, 1, 2 or 4; e x, e x^2, e x^3, e x^4) added to
   the float32 f1 .. f4 one class at a time, in class order (the order of
   one class at a time over all rows: the same bits). */
/* (class C's exponential eC and its x; with MOM, its moments into m1..m4) */
#define CLASS32(C, MOM)                                                       \
    float x##C = d##C[i] * beta;                                              \
    x##C = x##C < SKTS_EXP32_FLOOR ? SKTS_EXP32_FLOOR : x##C;                 \
    const float e##C = skts_exp32(x##C);                                      \
    if ((MOM) >= 1) {                                                         \
        const float ex = e##C * x##C;                                         \
        m1 += ex;                                                             \
        if ((MOM) >= 2) {                                                     \
            const float ex2 = ex * x##C;                                      \
            m2 += ex2;                                                        \
            if ((MOM) == 4) {                                                 \
                const float ex3 = ex2 * x##C;                                 \
                m3 += ex3;                                                    \
                m4 += ex3 * x##C;                                             \
            }                                                                 \
        }                                                                     \
    }
#define GROUP32_BODY(MOM, CLASSES, SUM)                                       \
    for (ptrdiff_t i = 0; i < r; i++) {                                       \
        float m1 = f1[i], m2 = f2[i];                                         \
        float m3 = (MOM) == 4 ? f3[i] : 0.0f, m4 = (MOM) == 4 ? f4[i] : 0.0f;  \
        CLASSES                                                               \
        s[i] += (double)(SUM);                                                \
        if ((MOM) >= 1) f1[i] = m1;                                           \
        if ((MOM) >= 2) f2[i] = m2;                                           \
        if ((MOM) == 4) f3[i] = m3, f4[i] = m4;                               \
    }
/* (restrict: more arrays than the vectoriser checks for overlap at run
   time; G and MOM are constants where it is inlined) */
INLINE void group32(const float *restrict d, ptrdiff_t r, float beta, int G,
                    int MOM, double *restrict s, float *restrict f1,
                    float *restrict f2, float *restrict f3,
                    float *restrict f4) {
    const float *d0 = d, *d1 = d + r, *d2 = d + 2 * r, *d3 = d + 3 * r;
    if (G == 4) {
        GROUP32_BODY(MOM, CLASS32(0, MOM) CLASS32(1, MOM) CLASS32(2, MOM)
                     CLASS32(3, MOM), (e0 + e1) + (e2 + e3))
    } else if (G == 2) {
        GROUP32_BODY(MOM, CLASS32(0, MOM) CLASS32(1, MOM), e0 + e1)
    } else {
        (void)d1, (void)d2, (void)d3;
        GROUP32_BODY(MOM, CLASS32(0, MOM), e0)
    }
}
/* group32 with the moments a read asks for (each call specialised) */
INLINE void group32_moments(const float *d, ptrdiff_t r, float beta, int G,
                            int moments, double *s, float *f1, float *f2,
                            float *f3, float *f4) {
    if (moments == 4) {
        group32(d, r, beta, G, 4, s, f1, f2, f3, f4);
    } else if (moments == 2) {
        group32(d, r, beta, G, 2, s, f1, f2, f3, f4);
    } else if (moments == 1) {
        group32(d, r, beta, G, 1, s, f1, f2, f3, f4);
    } else {
        group32(d, r, beta, G, 0, s, f1, f2, f3, f4);
    }
}

/* (zf, ld, mx: as in sums64; d = z - m in float32 then, clamped as
   centre() does) */
INLINE void sums32(const float *d, ptrdiff_t r, ptrdiff_t k, float beta,
                   int moments, double *s, double *s1, double *s2, double *s3,
                   double *s4, float *f1, float *f2, float *f3, float *f4,
                   const float *zf, ptrdiff_t ld, const double *mx,
                   const char *next, ptrdiff_t next_rows, ptrdiff_t ldb,
                   ptrdiff_t esz) {
    /* The row sum S in float64 (its error enters the proven bounds: wide
       rows add runs of at most SKTS_RUN32 float32 terms, each run within
       (SKTS_RUN32 - 1) u32 of its exact sum, as the terms are positive;
       narrow rows, groups of at most 4 classes, see group32); the
       moments, which only steer or enter a bound with a safety factor of 2,
       in float32. moments: 0 (S only), 1 (and E[x]), 2 (and E[x^2]) or 4
       (and E[x^3], E[x^4]). */
    if (k <= SKTS_TRANSPOSE_MAX) {
        for (ptrdiff_t i = 0; i < r; i++) s[i] = 0.0, f1[i] = f2[i] = 0.0f;
        if (moments == 4)
            for (ptrdiff_t i = 0; i < r; i++) f3[i] = f4[i] = 0.0f;
        /* S adds the classes' exponentials in groups of g (4 from 8
           classes, 2 from 4: a group's float32 tree sum is within
           log2(g) <= log2 K - 1 units, the float64 sum of at most 8 groups
           adds below 1e-7 of one, inside the log2 K units the window's
           bound counts for S); the moments take one class at a time, in
           order. */
        const int g = k >= 8 ? 4 : k >= 4 ? 2 : 1;
        /* (while each group runs, its classes' share of the next chunk is
           fetched) */
        const ptrdiff_t span = next ? next_rows * ldb : 0;
        ptrdiff_t j = 0;
        if (g == 4)
            for (; j + 4 <= k; j += 4) {
                next_part(next, span, j, j + 4, k);
                group32_moments(d + j * r, r, beta, 4, moments, s, f1, f2, f3, f4);
            }
        if (g >= 2)
            for (; j + 2 <= k; j += 2) {
                next_part(next, span, j, j + 2, k);
                group32_moments(d + j * r, r, beta, 2, moments, s, f1, f2, f3, f4);
            }
        for (; j < k; j++) {
            next_part(next, span, j, j + 1, k);
            group32_moments(d + j * r, r, beta, 1, moments, s, f1, f2, f3, f4);
        }
        for (ptrdiff_t i = 0; i < r; i++) s1[i] = f1[i], s2[i] = f2[i];
        if (moments == 4)
            for (ptrdiff_t i = 0; i < r; i++) s3[i] = f3[i], s4[i] = f4[i];
        return;
    }
    for (ptrdiff_t i = 0; i < r; i++) {
        double a[L] = {0};
        float a1[L] = {0}, a2[L] = {0}, a3[L] = {0}, a4[L] = {0};
        const ptrdiff_t rem = k % L;
        const char *ahead = AHEAD_ROW(i);
        if (zf) {
            const float *zr = zf + i * ld;
            const float m = (float)mx[i];
            float tail[L] = {0}; /* (the row's last partial vector, padded) */
            for (ptrdiff_t q = 0; q < rem; q++) tail[q] = zr[k - rem + q];
            ROW32_ALL(clamp32(zr[j + q] - m), clamp32(tail[q] - m))
        } else {
            const float *row = d + i * k;
            ROW32_ALL(row[j + q], row[j + q])
        }
        if (moments == 4) {
            double c3[L], c4[L];
            widen(c3, a3);
            widen(c4, a4);
            s3[i] = tree16(c3);
            s4[i] = tree16(c4);
        }
        s[i] = tree16(a);
        if (moments) {
            double c1[L], c2[L];
            widen(c1, a1);
            widen(c2, a2);
            s1[i] = tree16(c1);
            s2[i] = tree16(c2);
        }
    }
}

/* A read's F' per row (v1 = E[d] + g) from the x-moments (E[d] =
   E[x] / beta, with BX the beta of the exponents), and with SECOND the
   variance of d (v2; else E_p[-d]), and v3 = v1 squared. One reciprocal a
   row, in one loop that restrict lets vectorise (the five float64
   divisions a row before cost a window with slopes about 1 ms a candidate
   at 1,000,000 x 10 on one thread; see slope_rows). Steering only: no
   proof uses these values. */
INLINE void deriv_rows(const double *restrict s, const double *restrict s1,
                       const double *restrict s2, const double *restrict gap,
                       ptrdiff_t r, double bx, int second, double *restrict v1,
                       double *restrict v2, double *restrict v3) {
    if (second) {
        for (ptrdiff_t i = 0; i < r; i++) {
            const double q = 1.0 / (s[i] * bx);
            const double mean_d = s1[i] * q;
            const double var = s2[i] * q / bx - mean_d * mean_d;
            v1[i] = mean_d + gap[i];
            v2[i] = var > 0.0 ? var : 0.0;
            v3[i] = v1[i] * v1[i];
        }
    } else {
        for (ptrdiff_t i = 0; i < r; i++) {
            const double mean_d = s1[i] * (1.0 / (s[i] * bx));
            v1[i] = mean_d + gap[i];
            v2[i] = -mean_d;
            v3[i] = v1[i] * v1[i];
        }
    }
}

/* A window's F' and F'' per row at one candidate, as deriv_rows computes
   them (v2, v3: the same bits), and the bound on F'_row = g - M1 (v4; see
   Rows.window): with M1 = E_p[-d] and M2 = E_p[d^2] as computed, twice
   u32 (M1 (20 + chain + run32 + log2 K + 3 beta M1) + 3.01 beta M2) +
   4 u64 (g + M1) (float64: g's rounding, M1's three, from one reciprocal
   a row, and F'_row's), and for the clamped exponents K T 1e-35 (in M1's
   sum) + M1 K 1e-37 (in S); SLACK is 20 + chain + run32 + log2 K, added in
   that order. One loop, which restrict lets vectorise: with seven arrays
   the compiler gave up its run-time overlap checks and left it scalar. At
   1,000,000 x 10 on one thread, the window of two candidates with slopes
   took 21.0-22.0 ms in two scalar loops of five divisions a row, 18.5-19.3
   in this loop with them, 16.2-16.9 with the reciprocal
   (benchmarks/bench_window.py). */
INLINE void slope_rows(const double *restrict s, const double *restrict s1,
                       const double *restrict s2, const double *restrict gap,
                       ptrdiff_t r, double beta, double bx, double t,
                       ptrdiff_t k, double slack, double *restrict v2,
                       double *restrict v3, double *restrict v4) {
    const double unit64 = 0x1p-53, unit32 = 0x1p-24;
    for (ptrdiff_t i = 0; i < r; i++) {
        const double q = 1.0 / (s[i] * bx);
        const double mean_d = s1[i] * q;
        const double m2 = s2[i] * q / bx;
        const double var = m2 - mean_d * mean_d;
        const double m1 = -mean_d;
        v2[i] = mean_d + gap[i];
        v3[i] = var > 0.0 ? var : 0.0;
        v4[i] = 2.0 * unit32 * (m1 * (slack + 3.0 * beta * m1) +
                                3.01 * beta * m2) +
                4.0 * unit64 * (gap[i] + m1) + (double)k * (t * 1e-35 + m1 * 1e-37);
    }
}

/* acc[lane] += scale_i * v_i over the rows of a chunk starting at row0 of
   the block (row0 is a multiple of 16 whenever r >= 16). A row of weight 0
   counts for nothing, even with an infinite value. */
INLINE void accumulate(double *acc, ptrdiff_t row0, ptrdiff_t r,
                              const double *w, double inv_total,
                              const double *v) {
    if (w) {
        for (ptrdiff_t i = 0; i < r; i++) {
            const double sc = w[i] * inv_total;
            acc[(row0 + i) % L] += sc > 0.0 ? sc * v[i] : 0.0;
        }
        return;
    }
    ptrdiff_t i = 0;
    if (row0 % L == 0)
        for (; i + L <= r; i += L)
            for (int q = 0; q < L; q++) acc[q] += inv_total * v[i + q];
    for (; i < r; i++) acc[(row0 + i) % L] += inv_total * v[i];
}

/* acc[q] += scale * log(prod of the rows q, q + L, ... of a chunk, at
   most 8 a product): one logarithm per 8 rows where a row's log S takes
   one each. S is in [1, K] (its largest term is exp(0) = 1), so a product
   of 8 stays in [1, K^8] (finite for any K below 2^128) and is within 8
   float64 units of its exact value; with the logarithm's 5 units of
   itself, the sum of the 8 rows' log S is within (8 + 40 log K) float64
   units: far inside the float32 units the window counts. (The window's
   unweighted rows of at most 32 classes; weighted or wider ones take each
   row's log S: a row's K exponentials dwarf its logarithm from about 100
   classes, and with the products a fit of 1,000 classes measured 4 to 8%
   slower.) */
INLINE void add_log_products(double *acc, const double *restrict s,
                             ptrdiff_t r, double scale) {
    double lg[L] = {0};
    ptrdiff_t i = 0;
    for (; i + 8 * L <= r; i += 8 * L) {
        double p[L];
        for (int q = 0; q < L; q++) p[q] = s[i + q];
        for (int t = 1; t < 8; t++)
            for (int q = 0; q < L; q++) p[q] *= s[i + t * L + q];
        for (int q = 0; q < L; q++) lg[q] += skts_log64(p[q]);
    }
    if (i < r) { /* at most 7 vectors and a partial one: 8 a lane */
        double p[L];
        for (int q = 0; q < L; q++) p[q] = 1.0;
        for (; i + L <= r; i += L)
            for (int q = 0; q < L; q++) p[q] *= s[i + q];
        for (int q = 0; i < r; i++, q++) p[q] *= s[i];
        for (int q = 0; q < L; q++) lg[q] += skts_log64(p[q]);
    }
    for (int q = 0; q < L; q++) acc[q] += scale * lg[q];
}

INLINE double lanes(const double *acc) {
    double t = acc[0];
    for (int q = 1; q < L; q++) t += acc[q];
    return t;
}

/* Each row's third and fourth cumulants of d under p = softmax(beta d) (the
   third and fourth derivatives of its log S in beta), from the raw moments
   of x = beta d: k3 = m3 - 3 m1 m2 + 2 m1^3, k4 = m4 - 4 m1 m3 - 3 m2^2 +
   12 m1^2 m2 - 6 m1^4, times t^3 and t^4 (t = 1 / beta). They only steer
   (higher-order Newton steps), never decide: no error bound. (restrict: as
   in pair_columns.) */
INLINE void cumulants(const double *restrict s, const double *restrict s1,
                      const double *restrict s2, const double *restrict s3,
                      const double *restrict s4, ptrdiff_t r, double t,
                      double *restrict k3, double *restrict k4) {
    const double t2 = t * t;
    for (ptrdiff_t i = 0; i < r; i++) {
        const double m1 = s1[i] / s[i], m2 = s2[i] / s[i];
        const double m3 = s3[i] / s[i], m4 = s4[i] / s[i];
        const double mm = m1 * m1;
        k3[i] = (m3 - m1 * (3.0 * m2 - 2.0 * mm)) * (t2 * t);
        k4[i] = (m4 - 4.0 * m1 * m3 - 3.0 * m2 * m2 + mm * (12.0 * m2 - 6.0 * mm)) *
                (t2 * t2);
    }
}

/* 1 if a logit of the chunk is not finite (its exponent bits all ones),
   else 0: an integer OR over the values, which the compiler vectorises. It
   runs just before the chunk is centred, which then finds the logits in the
   cache (the finiteness test of a fit's first read, without a read of its
   own). Not inlined, one clone per vector width: inlined, it changed how
   the compiler built the rest of skts_block, whose window read at 1,000
   classes became 15% slower even without finite_out. */
#if defined(__GNUC__) && !defined(SKTS_PORTABLE)
#define SKTS_NOINLINE __attribute__((noinline))
#else
#define SKTS_NOINLINE
#endif
SKTS_CLONES SKTS_NOINLINE
static int chunk_nonfinite(const void *z, int z_f32, ptrdiff_t r, ptrdiff_t k,
                           ptrdiff_t ld) {
    /* (contiguous rows: one run of r k values; else one run per row) */
    const ptrdiff_t runs = ld == k ? 1 : r, len = ld == k ? r * k : k;
    int bad = 0;
    for (ptrdiff_t i = 0; i < runs; i++) {
        if (z_f32) {
            const float *x = (const float *)z + i * ld;
            for (ptrdiff_t j = 0; j < len; j++)
                bad |= (skts_bits32(x[j]) & 0x7f800000u) == 0x7f800000u;
        } else {
            const double *x = (const double *)z + i * ld;
            for (ptrdiff_t j = 0; j < len; j++)
                bad |= (skts_bits64(x[j]) & 0x7ff0000000000000ULL) ==
                       0x7ff0000000000000ULL;
        }
    }
    return bad;
}

#define MAXV 8 /* accumulators per beta */

/* The largest mx[i] - mn[i] of a chunk (0 if none is larger; NaN ignored),
   in L lanes: the same value as in order (a maximum is exact), without a
   loop-carried dependence through memory per row (one row a store-forward:
   3.5 ms of a 15 ms one-candidate window at 1,000,000 x 10, one thread). */
INLINE double chunk_span(const double *restrict mx, const double *restrict mn,
                         ptrdiff_t r) {
    double lane[L] = {0};
    ptrdiff_t i = 0;
    for (; i + L <= r; i += L)
        for (int q = 0; q < L; q++) {
            const double g = mx[i + q] - mn[i + q];
            lane[q] = g > lane[q] ? g : lane[q];
        }
    for (int q = 0; i < r; i++, q++) {
        const double g = mx[i] - mn[i];
        lane[q] = g > lane[q] ? g : lane[q];
    }
    double out = 0.0;
    for (int q = 0; q < L; q++) out = lane[q] > out ? lane[q] : out;
    return out;
}

/* Whether every label of a chunk is a class index (one unsigned compare a
   row, no branch: it vectorises). Checked here, chunk by chunk, before the
   chunk's logits are read at its labels: the labels are then in L1 for
   that read (a separate sweep of a block's labels before the kernel, in
   the Cython caller, cost 1.5 ms of an 11 ms one-candidate window at
   1,000,000 x 10, one thread). */
INLINE int labels_ok(const int64_t *y, ptrdiff_t r, ptrdiff_t k) {
    const uint64_t limit = (uint64_t)k;
    int outside = 0;
    for (ptrdiff_t i = 0; i < r; i++) outside |= (uint64_t)y[i] >= limit;
    return !outside;
}

SKTS_CLONES
int skts_block(const skts_args *a, void *scratch) {
    const ptrdiff_t k = a->n_classes, n = a->n_rows, nt = a->nt;
    const ptrdiff_t rc = chunk_rows(k);
    const int single = a->single;
    double *d64 = (double *)scratch;
    float *d32 = (float *)scratch;
    double *rows = (double *)scratch + 2 * rc * k;
    double *gap = rows, *mx = rows + rc, *mn = rows + 2 * rc, *s = rows + 3 * rc;
    double *s1 = rows + 4 * rc, *s2 = rows + 5 * rc, *v0 = rows + 6 * rc;
    double *v1 = rows + 7 * rc, *v2 = rows + 8 * rc, *v3 = rows + 9 * rc;
    double *v4 = rows + 10 * rc, *spread = rows + 11 * rc;
    float *f1 = (float *)(rows + 12 * rc), *f2 = (float *)(rows + 13 * rc);
    double *ls = rows + 14 * rc;
    /* SKTS_SLOPES with pair: the second beta's row sums, from the first read */
    double *t0 = rows + 15 * rc, *t1 = rows + 16 * rc, *t2 = rows + 17 * rc;
    /* higher: sums of e x^3 and e x^4, and the rows' third and fourth
       cumulants of d */
    double *s3 = rows + 20 * rc, *s4 = rows + 21 * rc;
    float *f3 = (float *)(rows + 22 * rc), *f4 = (float *)(rows + 23 * rc);
    double *v5 = rows + 24 * rc, *v6 = rows + 25 * rc;
    /* float32 rows' extremes, before they are widened into mx and mn */
    float *mx32 = (float *)(rows + 18 * rc), *mn32 = (float *)(rows + 19 * rc);
    const double unit64 = 0x1p-53, unit32 = 0x1p-24;
    const double log2k = log2((double)(k > 2 ? k : 2));
    /* wide rows' float32 runs in S (see sums32) */
    const double run32 = k > SKTS_TRANSPOSE_MAX ? SKTS_RUN32 - 1.0 : 0.0;
    const int nv = (a->mode == SKTS_NLL ? 1 : a->mode == SKTS_SLOPES ? 5
                 : 4) /* SKTS_DERIV; SKTS_WINDOW: estimate, bound, F', F'' */
                 + (a->higher ? 2 : 0)
                 + (a->mode == SKTS_WINDOW && a->slopes); /* F''s bound */
    /* (with slopes: the float32 moments' longest sequential sum, per lane
       above 32 classes, over the classes below) */
    const double chain = (double)(k > SKTS_TRANSPOSE_MAX ? (k + L - 1) / L : k);
    double *acc = (double *)calloc((size_t)(nt * nv * L), sizeof(double));
    int top = 1, bottom = 1, varies = 0, nonfinite = 0;
    double span = 0.0;
    const int binary_window = a->mode == SKTS_WINDOW && k == 2;
    if (!acc) return 0; /* the caller sees out untouched (NaN) */
    for (ptrdiff_t row0 = 0; row0 < n; row0 += rc) {
        const ptrdiff_t r = n - row0 < rc ? n - row0 : rc;
        const ptrdiff_t ld = a->ld;
        /* the next chunk of the block, which the first candidate's wide rows
           fetch (see PREFETCH_RUN) */
        const ptrdiff_t esz = a->z_f32 ? 4 : 8, ldb = ld * esz;
        const ptrdiff_t next_rows = n - row0 - r < r ? n - row0 - r : r;
        const char *next =
            next_rows > 0 ? (const char *)a->z + (row0 + r) * ldb : NULL;
        const void *z = a->z_f32 ? (const void *)((const float *)a->z + row0 * ld)
                                 : (const void *)((const double *)a->z + row0 * ld);
        const int64_t *y = a->y + row0;
        if (!labels_ok(y, r, k)) {
            free(acc);
            return 1; /* (out is not to be used) */
        }
        const double *w = a->w ? a->w + row0 : NULL;
        /* Wide float32 rows whose maxima are known (a previous read found
           them): d = z - m is computed where it is used, so the logits are
           read once, as the arithmetic consumes them (no separate sweep for
           the maxima, no centred copy); the same bits. */
        if (a->finite_out) nonfinite |= chunk_nonfinite(z, a->z_f32, r, k, ld);
        const int fuse = k > SKTS_TRANSPOSE_MAX && a->z_f32 && a->mx_in != NULL &&
                         (!single || nt == 1); /* (not for several float32
                         candidates: each would recompute d) */
        centre(z, a->z_f32, r, k, ld, y, fuse ? NULL : d64,
               single && !binary_window && !fuse ? d32 : NULL, d64 + rc * k, gap,
               mx, a->facts || binary_window || a->span_out ? mn : NULL,
               a->mx_in ? a->mx_in + row0 : NULL, mx32, mn32);
        /* the next chunk's labels (and weights), which its labels' check and
           centring read first: fetched while this chunk's exponentials are
           computed (see PREFETCH_RUN) */
        PREFETCH_RUN(next ? (const char *)(y + r) : NULL, 8, 0, next_rows)
        PREFETCH_RUN(next && w ? (const char *)(w + r) : NULL, 8, 0, next_rows)
        if (a->span_out) {
            const double g = chunk_span(mx, mn, r);
            span = g > span ? g : span;
        }
        if (a->mx_out)
            for (ptrdiff_t i = 0; i < r; i++) a->mx_out[row0 + i] = mx[i];
        if (k > SKTS_TRANSPOSE_MAX && !fuse) {
            /* The last row's masked last vector reads up to 16 elements past
               it: zeros there (the scratch is not cleared when allocated). */
            if (single)
                memset(d32 + r * k, 0, L * sizeof(float));
            else
                memset(d64 + r * k, 0, L * sizeof(double));
        }
        if (a->facts) {
            for (ptrdiff_t i = 0; i < r; i++) {
                const int live = w ? w[i] > 0.0 : 1;
                if (!live) continue;
                /* zy == m  <=>  gap == 0 (exact); zy == min: via z itself */
                const double zy = a->z_f32
                    ? (double)((const float *)z)[i * ld + y[i]]
                    : ((const double *)z)[i * ld + y[i]];
                top &= gap[i] == 0.0;
                bottom &= zy == mn[i];
                varies |= mx[i] > mn[i];
            }
        }
        if (binary_window) {
            /* One exponential per row, in float64: S = 1 + exp(-beta |z1 - z0|) */
            for (ptrdiff_t i = 0; i < r; i++) {
                const double g = mx[i] - mn[i]; /* |z1 - z0| */
                s[i] = g > SKTS_BIG ? SKTS_BIG : g;
            }
            for (ptrdiff_t q = 0; q < nt; q++) {
                const double beta = a->betas[q];
                const int measure = a->first_spread == q;
                if (a->first_spread < 0) /* a known bound, as below */
                    for (ptrdiff_t i = 0; i < r; i++) spread[i] = a->spread;
                for (ptrdiff_t i = 0; i < r; i++) {
                    double x = s[i] * -beta;
                    x = x < SKTS_EXP_FLOOR ? SKTS_EXP_FLOOR : x;
                    const double e = skts_exp64(x);
                    if (measure) spread[i] = s[i] * e / (1.0 + e);
                    const double lse = skts_log1p64(e);
                    v0[i] = gap[i] * beta + lse;
                    v1[i] = (32.0 + log2k + 3.0 * spread[i] * beta + 8.0 * lse) *
                            (2.0 * unit64);
                }
                double *acq = acc + q * nv * L;
                accumulate(acq, row0, r, w, a->inv_total, v0);
                accumulate(acq + L, row0, r, w, a->inv_total, v1);
                if (a->deriv_at == q) {
                    /* F' and F'' of the row: p = e / (1 + e) on d = -|z1 - z0|
                       (a loop of its own, which vectorises) */
                    for (ptrdiff_t i = 0; i < r; i++) {
                        double x = s[i] * -beta;
                        x = x < SKTS_EXP_FLOOR ? SKTS_EXP_FLOOR : x;
                        const double e = skts_exp64(x);
                        const double p = e / (1.0 + e), mean_d = -s[i] * p;
                        v2[i] = mean_d + gap[i];
                        v3[i] = s[i] * s[i] * p * (1.0 - p);
                    }
                    accumulate(acq + 2 * L, row0, r, w, a->inv_total, v2);
                    accumulate(acq + 3 * L, row0, r, w, a->inv_total, v3);
                }
            }
            continue;
        }
        for (ptrdiff_t q = 0; q < nt; q++) {
            const double beta = a->betas[q];
            double *acq = acc + q * nv * L;
            if (single) {
                const int nmom = a->mode != SKTS_WINDOW
                                     ? (a->higher ? 4 : a->second ? 2 : 1)
                                 : a->deriv_at == q || a->slopes ? 2
                                                                 : a->first_spread == q;
                sums32(d32, r, k, (float)beta, nmom, s, s1, s2, s3, s4, f1, f2,
                       f3, f4, fuse ? (const float *)z : NULL, ld, mx,
                       q == 0 ? next : NULL, next_rows, ldb, esz);
            } else {
                const int mom = a->mode != SKTS_NLL &&
                                !(a->mode == SKTS_SLOPES && !a->moments);
                if (a->pair && mom && q == 0) {
                    sums64_pair(d64, r, k, beta, a->betas[1], s, s1, s2, t0, t1,
                                t2, fuse ? (const float *)z : NULL, ld, mx);
                } else if (a->pair && mom && q == 1) {
                    for (ptrdiff_t i = 0; i < r; i++)
                        s[i] = t0[i], s1[i] = t1[i], s2[i] = t2[i];
                } else {
                    sums64(d64, r, k, beta, mom && a->higher ? 4 : mom, s, s1,
                           s2, s3, s4, fuse ? (const float *)z : NULL, ld, mx,
                           q == 0 ? next : NULL, next_rows, ldb, esz);
                }
            }
            /* log S in a loop of its own: it vectorises there (the
               unweighted window takes the log of products of rows) */
            const int products =
                a->mode == SKTS_WINDOW && !w && k <= SKTS_TRANSPOSE_MAX;
            if (!products)
                for (ptrdiff_t i = 0; i < r; i++) ls[i] = skts_log64(s[i]);
            if (a->mode == SKTS_NLL || (a->mode == SKTS_SLOPES && !a->moments)) {
                for (ptrdiff_t i = 0; i < r; i++)
                    v0[i] = gap[i] * beta + ls[i];
                accumulate(acq, row0, r, w, a->inv_total, v0);
            } else if (a->mode == SKTS_SLOPES) {
                const double t = a->temps[q];
                /* (three loops, each with few enough arrays to vectorise) */
                for (ptrdiff_t i = 0; i < r; i++) v0[i] = gap[i] * beta + ls[i];
                for (ptrdiff_t i = 0; i < r; i++) {
                    const double slope = gap[i] - (-s1[i] / s[i]) * t;
                    v1[i] = slope;
                    v4[i] = fabs(slope);
                }
                for (ptrdiff_t i = 0; i < r; i++) {
                    const double m1x = -s1[i] / s[i], m2x = s2[i] / s[i];
                    const double var = m2x - m1x * m1x;
                    v2[i] = var > 0.0 ? var : 0.0;
                    v3[i] = 2.0 * unit64 * (2.0 * gap[i] + (2.0 * (double)k + 12.0) *
                            (m1x * t) + 4.0 * t * (m2x + m1x * m1x)) +
                            (double)k * t * (2.0 * 700.0 * 1e-304 + 1e-304 * m1x);
                }
                accumulate(acq, row0, r, w, a->inv_total, v0);
                accumulate(acq + L, row0, r, w, a->inv_total, v1);
                accumulate(acq + 2 * L, row0, r, w, a->inv_total, v2);
                accumulate(acq + 3 * L, row0, r, w, a->inv_total, v3);
                accumulate(acq + 4 * L, row0, r, w, a->inv_total, v4);
                if (a->higher) {
                    cumulants(s, s1, s2, s3, s4, r, t, v5, v6);
                    accumulate(acq + 5 * L, row0, r, w, a->inv_total, v5);
                    accumulate(acq + 6 * L, row0, r, w, a->inv_total, v6);
                }
            } else if (a->mode == SKTS_DERIV) {
                /* x-moments to d-moments: E[d] = E[x] / beta */
                const double bx = single ? (double)(float)beta : beta;
                const int second = a->second || a->higher;
                for (ptrdiff_t i = 0; i < r; i++) v0[i] = gap[i] * beta + ls[i];
                deriv_rows(s, s1, s2, gap, r, bx, second, v1, v2, v3);
                accumulate(acq, row0, r, w, a->inv_total, v0);
                accumulate(acq + L, row0, r, w, a->inv_total, v1);
                accumulate(acq + 2 * L, row0, r, w, a->inv_total, v2);
                accumulate(acq + 3 * L, row0, r, w, a->inv_total, v3);
                if (a->higher) {
                    cumulants(s, s1, s2, s3, s4, r, 1.0 / bx, v5, v6);
                    accumulate(acq + 4 * L, row0, r, w, a->inv_total, v5);
                    accumulate(acq + 5 * L, row0, r, w, a->inv_total, v6);
                }
            } else { /* SKTS_WINDOW, float32 exponentials */
                const double bx = (double)(float)beta;
                if (a->first_spread == q) {
                    /* (one division a row: the spread only enters the bound,
                       which is doubled) */
                    for (ptrdiff_t i = 0; i < r; i++)
                        spread[i] = -s1[i] / (s[i] * bx);
                } else if (a->first_spread < 0) {
                    for (ptrdiff_t i = 0; i < r; i++) spread[i] = a->spread;
                }
                for (ptrdiff_t i = 0; i < r; i++) {
                    v0[i] = gap[i] * beta + (products ? 0.0 : ls[i]);
                    /* (see Rows.window: S and log S are float64, so neither
                       a float32 sum's nor a float32 log's error enters) */
                    v1[i] = (8.0 + run32 + log2k + 3.0 * spread[i] * beta) *
                            (2.0 * unit32);
                }
                accumulate(acq, row0, r, w, a->inv_total, v0);
                if (products) add_log_products(acq, s, r, a->inv_total);
                accumulate(acq + L, row0, r, w, a->inv_total, v1);
                if (a->slopes) {
                    slope_rows(s, s1, s2, gap, r, beta, bx, a->temps[q], k,
                               20.0 + chain + run32 + log2k, v2, v3, v4);
                    accumulate(acq + 2 * L, row0, r, w, a->inv_total, v2);
                    accumulate(acq + 3 * L, row0, r, w, a->inv_total, v3);
                    accumulate(acq + 4 * L, row0, r, w, a->inv_total, v4);
                } else if (a->deriv_at == q) {
                    /* F' and F'' there, as SKTS_DERIV computes them (v4: the
                       squares, not used) */
                    deriv_rows(s, s1, s2, gap, r, bx, 1, v2, v3, v4);
                    accumulate(acq + 2 * L, row0, r, w, a->inv_total, v2);
                    accumulate(acq + 3 * L, row0, r, w, a->inv_total, v3);
                }
            }
        }
    }
    for (ptrdiff_t q = 0; q < nt; q++)
        for (int v = 0; v < nv; v++) a->out[q * nv + v] = lanes(acc + (q * nv + v) * L);
    if (a->mode == SKTS_WINDOW)
        for (ptrdiff_t q = 0; q < nt; q++) a->out[q * nv + 1] += 4e-38 * (double)k;
    if (a->span_out) *a->span_out = span;
    if (a->finite_out) *a->finite_out = nonfinite ? 0.0 : 1.0;
    if (a->found) {
        a->found[0] = (unsigned char)top;
        a->found[1] = (unsigned char)bottom;
        a->found[2] = (unsigned char)varies;
    }
    free(acc);
    return 0;
}

/* The sum of a row (square: of its squares) in L lanes combined in order
   where it has L values or more, else in order. */
INLINE double lane_sum(const double *row, ptrdiff_t k, int square) {
    if (k >= L) {
        double acc[L] = {0};
        ptrdiff_t j = 0;
        for (; j + L <= k; j += L)
            for (int q = 0; q < L; q++)
                acc[q] += square ? row[j + q] * row[j + q] : row[j + q];
        for (int q = 0; j < k; j++, q++) acc[q] += square ? row[j] * row[j] : row[j];
        return lanes(acc);
    }
    double t = square ? row[0] * row[0] : row[0];
    for (ptrdiff_t j = 1; j < k; j++) t += square ? row[j] * row[j] : row[j];
    return t;
}

/* The first position of m (the row's maximum) in a row: the first block of
   L values that holds it (the block test vectorises), then its first there
   (from the end, without a branch). */
#define FIRST_MAX(NAME, T)                                                    \
    INLINE ptrdiff_t NAME(const T *row, ptrdiff_t k, double m) {              \
        ptrdiff_t at = 0;                                                     \
        for (; at + L <= k; at += L) {                                        \
            int hit = 0;                                                      \
            for (int q = 0; q < L; q++) hit |= (double)row[at + q] == m;      \
            if (hit) break;                                                   \
        }                                                                     \
        ptrdiff_t first = k - 1;                                              \
        for (ptrdiff_t j = (at + L < k ? at + L : k) - 1; j >= at; j--)       \
            first = (double)row[j] == m ? j : first;                          \
        return first;                                                         \
    }
FIRST_MAX(first_max32, float)
FIRST_MAX(first_max64, double)

/* softmax (or log-softmax) of a chunk of rows at beta, with the number of
   classes a compile-time constant where it is small (then every loop over a
   row is unrolled and vectorised). Exponents below -708 give 0 (a
   probability below 3e-308). */
INLINE void softmax_chunk(const void *z, int z_f32, ptrdiff_t r, ptrdiff_t k,
                          double beta, int log_out, void *out, int out_f32,
                          double *u, double *e, double *mx, double *s) {
    row_extremes(z, z_f32, r, k, k, mx, NULL);
    for (ptrdiff_t i = 0; i < r; i++)
        for (ptrdiff_t j = 0; j < k; j++) {
            const double zv = z_f32 ? (double)((const float *)z)[i * k + j]
                                    : ((const double *)z)[i * k + j];
            double x = zv - mx[i];
            x = x < -SKTS_BIG ? -SKTS_BIG : x;
            u[i * k + j] = x * beta;
        }
    const ptrdiff_t n = r * k;
    for (ptrdiff_t q = 0; q < n; q++) {
        const double x = u[q];
        e[q] = x < -708.0 ? 0.0 : skts_exp64(x < -708.0 ? 0.0 : x);
    }
    for (ptrdiff_t i = 0; i < r; i++) s[i] = lane_sum(e + i * k, k, 0);
    if (log_out) {
        for (ptrdiff_t i = 0; i < r; i++) s[i] = skts_log64(s[i]);
        for (ptrdiff_t i = 0; i < r; i++)
            for (ptrdiff_t j = 0; j < k; j++) {
                const double v = u[i * k + j] - s[i];
                if (out_f32) ((float *)out)[i * k + j] = (float)v;
                else ((double *)out)[i * k + j] = v;
            }
    } else {
        for (ptrdiff_t i = 0; i < r; i++) s[i] = 1.0 / s[i];
        for (ptrdiff_t i = 0; i < r; i++)
            for (ptrdiff_t j = 0; j < k; j++) {
                const double v = e[i * k + j] * s[i];
                if (out_f32) ((float *)out)[i * k + j] = (float)v;
                else ((double *)out)[i * k + j] = v;
            }
    }
}

#define SOFTMAX_CASE(K)                                                       \
    case K:                                                                   \
        softmax_chunk(zc, z_f32, r, K, beta, log_out, oc, out_f32, u, e, mx, s); \
        break;

SKTS_CLONES
void skts_softmax_rows(const void *z, int z_f32, ptrdiff_t n, ptrdiff_t k,
                       double beta, int log_out, void *out, int out_f32,
                       void *scratch) {
    const ptrdiff_t rc = chunk_rows(k);
    double *u = (double *)scratch, *e = u + rc * k;
    double *mx = e + rc * k, *s = mx + rc;
    const size_t isz = z_f32 ? 4 : 8, osz = out_f32 ? 4 : 8;
    for (ptrdiff_t row0 = 0; row0 < n; row0 += rc) {
        const ptrdiff_t r = n - row0 < rc ? n - row0 : rc;
        const void *zc = (const char *)z + (size_t)(row0 * k) * isz;
        void *oc = (char *)out + (size_t)(row0 * k) * osz;
        switch (k) {
            SOFTMAX_CASE(2) SOFTMAX_CASE(3) SOFTMAX_CASE(4) SOFTMAX_CASE(5)
            SOFTMAX_CASE(6) SOFTMAX_CASE(8) SOFTMAX_CASE(10) SOFTMAX_CASE(16)
        default:
            softmax_chunk(zc, z_f32, r, k, beta, log_out, oc, out_f32, u, e, mx, s);
        }
    }
}

/* Sum of exp(x) over n float32 values, in 16 lanes (the hardware bound of
   benchmarks/bench_fit.py: exponentials per second). */
SKTS_CLONES
double skts_exp32_sum(const float *x, ptrdiff_t n) {
    float acc[L] = {0};
    ptrdiff_t i = 0;
    for (; i + L <= n; i += L)
        for (int q = 0; q < L; q++) acc[q] += skts_exp32(x[i + q]);
    double t = 0.0;
    for (int q = 0; q < L; q++) t += acc[q];
    for (; i < n; i++) t += skts_exp32(x[i]);
    return t;
}

/* Whether some row of positive weight (w NULL: every row) has two different
   logits; stops at the first such row (on real data, the first row). */
SKTS_CLONES
int skts_varies(const void *z, int z_f32, ptrdiff_t n, ptrdiff_t k, ptrdiff_t ld,
                const double *w) {
    for (ptrdiff_t i = 0; i < n; i++) {
        if (w && !(w[i] > 0.0)) continue;
        double mx, mn;
        const void *row = z_f32 ? (const void *)((const float *)z + i * ld)
                                : (const void *)((const double *)z + i * ld);
        row_extremes(row, z_f32, 1, k, k, &mx, &mn);
        if (mx > mn) return 1;
    }
    return 0;
}

/* The calibration report's quantities of n rows at beta, in one read of the
   logits (skts/metrics/_report.py), chunk by chunk: the probabilities are
   softmax_chunk's (skts_softmax_rows's bits), and of them each row's first
   argmax of the logits (what predict says) and p there, p_y, the
   log-softmax's beta (z_y - m) - log S where p_y is not a normal float64
   (the caller takes log p_y of the others, as 0 here), sum_j p_j^2, the weighted column sums
   sum_i w[b ldw + i] p_ij (added to colsum, nw x k) and the flat positions
   i k + j and values of the probabilities above `threshold` (at most cap of
   them, in order). Returns their number, -1 if they are more than cap
   (nothing beyond cap written), or -2 for a label outside [0, k) (checked
   before the chunk is read). scratch: skts_report_bytes(k). */
INLINE ptrdiff_t report_chunk(const void *z, int z_f32, ptrdiff_t r, ptrdiff_t k,
                              ptrdiff_t row0, double beta, const int64_t *y,
                              const double *w, ptrdiff_t nw, ptrdiff_t ldw,
                              double threshold, int64_t *predicted, double *top,
                              double *p_y, double *log_p_y, double *sumsq,
                              double *colsum, int64_t *high_at, double *high_p,
                              ptrdiff_t cap, ptrdiff_t count, double *u, double *e,
                              double *mx, double *s, double *p) {
    for (ptrdiff_t i = 0; i < r; i++)
        if (y[i] < 0 || y[i] >= k) return -2;
    softmax_chunk(z, z_f32, r, k, beta, 0, p, 0, u, e, mx, s); /* s: 1 / S */
    for (ptrdiff_t i = 0; i < r; i++) {
        const ptrdiff_t arg =
            z_f32 ? first_max32((const float *)z + i * k, k, mx[i])
                  : first_max64((const double *)z + i * k, k, mx[i]);
        const double *pr = p + i * k;
        const double sq = lane_sum(pr, k, 1);
        for (ptrdiff_t b = 0; b < nw; b++) {
            const double wb = w[b * ldw + i];
            if (wb == 0.0) continue;
            double *c = colsum + b * k;
            for (ptrdiff_t j = 0; j < k; j++) c[j] += wb * pr[j];
        }
        const double py = pr[y[i]];
        predicted[i] = arg;
        top[i] = pr[arg];
        p_y[i] = py;
        if (py >= 2.2250738585072014e-308) {
            log_p_y[i] = 0.0; /* (the caller takes log p_y, vectorised) */
        } else { /* (S again, as the log-softmax adds it) */
            log_p_y[i] = u[i * k + y[i]] - skts_log64(lane_sum(e + i * k, k, 0));
        }
        sumsq[i] = sq;
    }
    /* the values above the threshold, L at a time: skipped where none is
       (the test vectorises), else each written and counted if above (no
       branch on the value) while the arrays have room for all L */
    const ptrdiff_t m = r * k;
    for (ptrdiff_t q0 = 0; q0 < m; q0 += L) {
        const ptrdiff_t q1 = q0 + L < m ? q0 + L : m;
        int hit = 0;
        if (q1 - q0 == L)
            for (int q = 0; q < L; q++) hit |= p[q0 + q] > threshold;
        else
            hit = 1;
        if (!hit) continue;
        if (count + (q1 - q0) <= cap) {
            for (ptrdiff_t q = q0; q < q1; q++) {
                high_at[count] = (int64_t)(row0 * k + q);
                high_p[count] = p[q];
                count += p[q] > threshold;
            }
        } else {
            for (ptrdiff_t q = q0; q < q1; q++)
                if (p[q] > threshold) {
                    if (count >= cap) return -1;
                    high_at[count] = (int64_t)(row0 * k + q);
                    high_p[count++] = p[q];
                }
        }
    }
    return count;
}

size_t skts_report_bytes(ptrdiff_t k) {
    return skts_scratch_bytes(k) + (size_t)(chunk_rows(k) * k) * sizeof(double);
}

#define REPORT_CASE(K)                                                        \
    case K:                                                                   \
        count = report_chunk(zc, z_f32, r, K, row0, beta, y + row0, w ? w + row0 : w, \
                             nw, ldw, threshold, predicted + row0, top + row0,\
                             p_y + row0, log_p_y + row0, sumsq + row0, colsum,\
                             high_at, high_p, cap, count, u, e, mx, s, p);    \
        break;

SKTS_CLONES
ptrdiff_t skts_report_rows(const void *z, int z_f32, ptrdiff_t n, ptrdiff_t k,
                           double beta, const int64_t *y, const double *w,
                           ptrdiff_t nw, ptrdiff_t ldw, double threshold,
                           int64_t *predicted, double *top, double *p_y,
                           double *log_p_y, double *sumsq, double *colsum,
                           int64_t *high_at, double *high_p, ptrdiff_t cap,
                           void *scratch) {
    const ptrdiff_t rc = chunk_rows(k);
    double *u = (double *)scratch, *e = u + rc * k;
    double *mx = e + rc * k, *s = mx + rc;
    double *p = (double *)((char *)scratch + skts_scratch_bytes(k));
    const size_t isz = z_f32 ? 4 : 8;
    ptrdiff_t count = 0;
    for (ptrdiff_t row0 = 0; row0 < n && count >= 0; row0 += rc) {
        const ptrdiff_t r = n - row0 < rc ? n - row0 : rc;
        const void *zc = (const char *)z + (size_t)(row0 * k) * isz;
        /* (a compile-time number of classes where it is small, as softmax) */
        switch (k) {
            REPORT_CASE(2) REPORT_CASE(3) REPORT_CASE(4) REPORT_CASE(5)
            REPORT_CASE(6) REPORT_CASE(8) REPORT_CASE(10) REPORT_CASE(16)
        default:
            count = report_chunk(zc, z_f32, r, k, row0, beta, y + row0, w ? w + row0 : w,
                                 nw, ldw, threshold, predicted + row0, top + row0,
                                 p_y + row0, log_p_y + row0, sumsq + row0, colsum,
                                 high_at, high_p, cap, count, u, e, mx, s, p);
        }
    }
    return count;
}
