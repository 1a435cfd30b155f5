/* The kernel's bits, outside Python: reads the cases that
   tests/test_portable.py writes, runs skts_block / skts_softmax_rows /
   skts_varies / the elementary functions on each (one block, as skts/_kernel.pyx runs it), and prints
   every result as the hexadecimal bits of a float64, one line per case.

   The test builds this file with every compiler and path it can (gcc and
   clang, vectorised and portable, a compiler without GNU C, a cross
   compiler for aarch64 run under qemu-user) and requires each output to be
   the bits the installed extension gives for the same cases. Plain ISO C11,
   so that every one of them can build it.

   Input (little-endian): int64 n_cases, then per case int64 fields (see
   struct header), float64 spread, beta and total, the logits (float32 or
   float64), int64 labels, float64 weights (has_w), float64 row maxima
   (has_mx_in), float64 betas and temperatures (nt each). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../skts/_kernel.h"

enum { BLOCK = 0, SOFTMAX = 1, VARIES = 2, ELEMENTWISE = 3 };

typedef struct {
    int64_t kind, mode, z_f32, n, k, nt, single, second, moments, facts,
        first_spread, pair, deriv_at, higher, has_w, has_mx_in, want_mx,
        want_span, width, log_out, out_f32, slopes;
} header;

static FILE *in;

static void need(void *p, size_t size, size_t count) {
    if (fread(p, size, count, in) != count) {
        fprintf(stderr, "kernel_bits: input ends early\n");
        exit(2);
    }
}

static void *take(size_t size, size_t count) {
    void *p = malloc(size * (count ? count : 1));
    if (!p) {
        fprintf(stderr, "kernel_bits: out of memory\n");
        exit(2);
    }
    need(p, size, count);
    return p;
}

static void put(double x) {
    uint64_t b;
    memcpy(&b, &x, 8);
    printf(" %016" PRIx64, b);
}

int main(int argc, char **argv) {
    if (argc != 2 || !(in = fopen(argv[1], "rb"))) {
        fprintf(stderr, "usage: kernel_bits CASES\n");
        return 2;
    }
    int64_t n_cases;
    need(&n_cases, 8, 1);
    for (int64_t c = 0; c < n_cases; c++) {
        header h;
        need(&h, sizeof h, 1);
        double spread, beta, total;
        need(&spread, 8, 1);
        need(&beta, 8, 1);
        need(&total, 8, 1);
        const size_t n = (size_t)h.n, k = (size_t)h.k, nt = (size_t)h.nt;
        void *z = take(h.z_f32 ? 4 : 8, n * k);
        int64_t *y = take(8, n);
        double *w = h.has_w ? take(8, n) : NULL;
        double *mx_in = h.has_mx_in ? take(8, n) : NULL;
        double *betas = take(8, nt);
        double *temps = take(8, nt);
        void *scratch = calloc(1, skts_scratch_bytes(h.k));
        printf("%" PRId64 ":", c);
        if (h.kind == BLOCK) {
            double *out = calloc(nt * (size_t)h.width + 1, 8);
            double *mx = calloc(n + 1, 8);
            double span = 0.0;
            unsigned char found[3] = {1, 1, 1};
            skts_args a;
            memset(&a, 0, sizeof a);
            a.z = z;
            a.z_f32 = (int)h.z_f32;
            a.n_rows = h.n;
            a.n_classes = h.k;
            a.ld = h.k;
            a.y = y;
            a.w = w;
            a.inv_total = 1.0 / total;
            a.betas = betas;
            a.temps = temps;
            a.nt = h.nt;
            a.mode = (int)h.mode;
            a.single = (int)h.single;
            a.second = (int)h.second;
            a.moments = (int)h.moments;
            a.facts = (int)h.facts;
            a.first_spread = (int)h.first_spread;
            a.spread = spread;
            a.pair = (int)h.pair;
            a.deriv_at = (int)h.deriv_at;
            a.higher = (int)h.higher;
            a.slopes = (int)h.slopes;
            a.mx_in = mx_in;
            a.mx_out = h.want_mx ? mx : NULL;
            a.span_out = h.want_span ? &span : NULL;
            a.out = out;
            a.found = h.facts ? found : NULL;
            skts_block(&a, scratch);
            for (size_t i = 0; i < nt * (size_t)h.width; i++) put(out[i]);
            if (h.facts)
                for (int i = 0; i < 3; i++) put((double)found[i]);
            if (h.want_mx)
                for (size_t i = 0; i < n; i++) put(mx[i]);
            if (h.want_span) put(span);
            free(out);
            free(mx);
        } else if (h.kind == SOFTMAX) {
            void *out = calloc(n * k + 1, h.out_f32 ? 4 : 8);
            skts_softmax_rows(z, (int)h.z_f32, h.n, h.k, beta, (int)h.log_out,
                              out, (int)h.out_f32, scratch);
            for (size_t i = 0; i < n * k; i++)
                put(h.out_f32 ? (double)((float *)out)[i] : ((double *)out)[i]);
            free(out);
        } else if (h.kind == VARIES) {
            put((double)skts_varies(z, (int)h.z_f32, h.n, h.k, h.k, w));
        } else {
            /* the elementary functions, mode 0 exp, 1 expf, 2 log, 3 log1p
               (float32 input for expf only) */
            for (size_t i = 0; i < n * k; i++) {
                const double x = h.z_f32 ? (double)((float *)z)[i] : ((double *)z)[i];
                put(h.mode == 0   ? skts_exp64(x)
                    : h.mode == 1 ? (double)skts_exp32((float)x)
                    : h.mode == 2 ? skts_log64(x)
                                  : skts_log1p64(x));
            }
        }
        printf("\n");
        free(z);
        free(y);
        free(w);
        free(mx_in);
        free(betas);
        free(temps);
        free(scratch);
    }
    fclose(in);
    return 0;
}
