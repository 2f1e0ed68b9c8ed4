/* bench/bench_reorder.c — the f32 reorder kernels between plain layouts and
 * nChw16c (or nChw8c with --block 8), tensor/reorder_blocked.c, against
 * oneDNN 2.6's reorder primitive and a STREAM copy of the same bytes,
 * measured side by side in one run.
 *
 * For each shape (ResNet-like activations, a small in-cache one, a C = 24
 * one with pad lanes, and one larger than the L3; or --shapes) and each
 * thread count (--threads, default 1,2) it times, interleaved inside every
 * repetition (bench_run with a shuffled order):
 *
 *   mft    NCHW->nChw16c, nChw16c->NCHW, NHWC->nChw16c, nChw16c->NHWC
 *          (mft__reorder_to_blocked_f32 / mft__reorder_from_blocked_f32)
 *   onednn the same four reorders: dnnl_reorder primitives created once per
 *          (shape, threads) outside the timing, run on one stream
 *   copy   STREAM copy a[i] = b[i] (OpenMP, T threads) of as many bytes as a
 *          reorder moves
 *
 * Bytes per call = bytes read + bytes written: the plain tensor (N*C*H*W
 * floats) plus the blocked one (N*ceil(C/B)*B*H*W floats, pad lanes
 * included: the kernels write them). The copy moves (plain + blocked) / 2
 * floats, read once and written once: the same traffic. Reported: GB/s of
 * each, mft/oneDNN = oneDNN time / mft time (> 1: mft faster) and
 * mft/copy = copy time / mft time (1.00 = as fast as a plain copy).
 *
 * Threads: mft_set_num_threads(T) for mft, omp_set_num_threads(T) for oneDNN
 * (its CPU runtime is OpenMP: it reads omp_get_max_threads()) and
 * num_threads(T) for the copy loop.
 *
 * Before timing, every mft result is compared bit for bit with oneDNN's (pad
 * lanes included) or, without oneDNN, with a naive loop; a mismatch exits 1
 * before any number is printed.
 *
 * Built with oneDNN when CMake finds libdnnl and dnnl.h (MFT_BENCH_HAVE_DNNL,
 * Debian: libdnnl-dev); otherwise the oneDNN columns say it is missing.
 *
 * A (shape, threads) block during which other processes used more than a
 * quarter of a core is measured again, up to --retries (3) times 1 s apart,
 * and marked when it stays disturbed.
 *
 * Exit status: 0 ok, 1 wrong result or oneDNN error, 2 usage. */
#include "bench_util.h"

#include <stdbool.h>

#include "mft/mft.h"
#include "reorder_internal.h"
#ifdef MFT_BENCH_HAVE_DNNL
#include <dnnl.h>
#endif

#define MAX_SHAPES  16
#define MAX_THREADS 8

enum { D_NCHW_TO, D_TO_NCHW, D_NHWC_TO, D_TO_NHWC, D_COUNT };
static const char *const dir_name[D_COUNT] = {"NCHW->blk", "blk->NCHW", "NHWC->blk", "blk->NHWC"};

typedef struct shape {
    int64_t N, C, H, W;
} shape;

/* The buffers of one shape: plain source, blocked, plain destination, and
 * the copy's pair. */
typedef struct bufs {
    shape sh;
    int B;
    int64_t S, CB, plain_n, blk_n, copy_n;
    float *plain, *blk, *out, *copy_src, *copy_dst;
} bufs;

/* Plain strides of direction d's plain side. */
static void plain_strides(const bufs *b, int d, int64_t *pn, int64_t *pc, int64_t *ps) {
    const int64_t C = b->sh.C, S = b->S;
    *pn = C * S;
    if (d == D_NCHW_TO || d == D_TO_NCHW) {
        *pc = S;
        *ps = 1;
    } else {
        *pc = 1;
        *ps = C;
    }
}

static bool dir_to_blocked(int d) { return d == D_NCHW_TO || d == D_NHWC_TO; }

static void mft_run_dir(const bufs *b, int d) {
    int64_t pn, pc, ps;
    plain_strides(b, d, &pn, &pc, &ps);
    const int64_t bc1 = b->S * b->B, bn = b->CB * bc1;
    if (dir_to_blocked(d))
        mft__reorder_to_blocked_f32(b->plain, pn, pc, ps, b->blk, bn, bc1, b->B, b->sh.N, b->sh.C,
                                    b->S);
    else
        mft__reorder_from_blocked_f32(b->blk, bn, bc1, b->B, b->out, pn, pc, ps, b->sh.N, b->sh.C,
                                      b->S);
}

/* ------------------------------------------------------------------ oneDNN */
#ifdef MFT_BENCH_HAVE_DNNL
typedef struct dnnl_side {
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    dnnl_primitive_t prim[D_COUNT];
    dnnl_memory_t from[D_COUNT], to[D_COUNT];
    const char *impl[D_COUNT];
    dnnl_primitive_desc_t pd[D_COUNT];
} dnnl_side;

static int dnnl_check(dnnl_status_t st, const char *what) {
    if (st == dnnl_success) return 0;
    fprintf(stderr, "bench_reorder: oneDNN %s failed (status %d)\n", what, (int)st);
    return 1;
}

static void dnnl_side_free(dnnl_side *o) {
    for (int d = 0; d < D_COUNT; d++) {
        if (o->prim[d]) dnnl_primitive_destroy(o->prim[d]);
        if (o->pd[d]) dnnl_primitive_desc_destroy(o->pd[d]);
        if (o->from[d]) dnnl_memory_destroy(o->from[d]);
        if (o->to[d]) dnnl_memory_destroy(o->to[d]);
    }
    if (o->stream) dnnl_stream_destroy(o->stream);
    if (o->eng) dnnl_engine_destroy(o->eng);
    memset(o, 0, sizeof *o);
}

/* Creates the four reorders on b's buffers. Returns 0 or 1. */
static int dnnl_side_init(dnnl_side *o, const bufs *b) {
    memset(o, 0, sizeof *o);
    const dnnl_dims_t dims = {b->sh.N, b->sh.C, b->sh.H, b->sh.W};
    const dnnl_format_tag_t blk_tag = b->B == 16 ? dnnl_nChw16c : dnnl_nChw8c;
    if (dnnl_check(dnnl_engine_create(&o->eng, dnnl_cpu, 0), "engine_create") ||
        dnnl_check(dnnl_stream_create(&o->stream, o->eng, dnnl_stream_default_flags),
                   "stream_create"))
        return 1;
    for (int d = 0; d < D_COUNT; d++) {
        dnnl_memory_desc_t plain_md, blk_md;
        const dnnl_format_tag_t ptag = d == D_NCHW_TO || d == D_TO_NCHW ? dnnl_nchw : dnnl_nhwc;
        if (dnnl_check(dnnl_memory_desc_init_by_tag(&plain_md, 4, dims, dnnl_f32, ptag), "md") ||
            dnnl_check(dnnl_memory_desc_init_by_tag(&blk_md, 4, dims, dnnl_f32, blk_tag), "md"))
            return 1;
        if (dnnl_memory_desc_get_size(&blk_md) != (size_t)b->blk_n * sizeof(float)) {
            fprintf(stderr, "bench_reorder: oneDNN's blocked size %zu != %lld floats\n",
                    dnnl_memory_desc_get_size(&blk_md), (long long)b->blk_n);
            return 1;
        }
        const bool to = dir_to_blocked(d);
        const dnnl_memory_desc_t *fmd = to ? &plain_md : &blk_md, *tmd = to ? &blk_md : &plain_md;
        if (dnnl_check(
                dnnl_reorder_primitive_desc_create(&o->pd[d], fmd, o->eng, tmd, o->eng, NULL),
                "reorder_primitive_desc_create") ||
            dnnl_check(dnnl_primitive_create(&o->prim[d], o->pd[d]), "primitive_create") ||
            dnnl_check(dnnl_memory_create(&o->from[d], fmd, o->eng, to ? b->plain : b->blk),
                       "memory_create") ||
            dnnl_check(dnnl_memory_create(&o->to[d], tmd, o->eng, to ? b->blk : b->out),
                       "memory_create"))
            return 1;
        o->impl[d] = "?";
        const char *s = NULL;
        if (dnnl_primitive_desc_query(o->pd[d], dnnl_query_impl_info_str, 0, &s) == dnnl_success &&
            s)
            o->impl[d] = s;
    }
    return 0;
}

static int dnnl_run_dir(dnnl_side *o, int d) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, o->from[d]}, {DNNL_ARG_TO, o->to[d]}};
    if (dnnl_primitive_execute(o->prim[d], o->stream, 2, args) != dnnl_success) return 1;
    return dnnl_stream_wait(o->stream) != dnnl_success;
}
#endif

/* ------------------------------------------------------------------ cases */
typedef struct run_ctx {
    bufs *b;
    int d;
    int threads;
#ifdef MFT_BENCH_HAVE_DNNL
    dnnl_side *o;
#endif
} run_ctx;

static int case_mft(void *p) {
    const run_ctx *c = p;
    mft_run_dir(c->b, c->d);
    return 0;
}
#ifdef MFT_BENCH_HAVE_DNNL
static int case_dnnl(void *p) {
    const run_ctx *c = p;
    return dnnl_run_dir(c->o, c->d);
}
#endif
static int case_copy(void *p) {
    const run_ctx *c = p;
    bench_stream_copy_f32(c->b->copy_dst, c->b->copy_src, (size_t)c->b->copy_n, c->threads);
    return 0;
}

/* ------------------------------------------------------------------ verification */
/* mft's result of direction d against oneDNN's (or a naive loop), bitwise,
 * pad lanes included. Returns 0 when equal. */
static int verify(bufs *b, int d, void *dnnl_opaque) {
    const size_t n = (size_t)(dir_to_blocked(d) ? b->blk_n : b->plain_n);
    float *res = dir_to_blocked(d) ? b->blk : b->out;
    float *want = malloc(n * sizeof *want);
    if (!want) return 1;
    /* garbage first: pad lanes must be written */
    for (size_t i = 0; i < n; i++) res[i] = -7.0f;
    mft_run_dir(b, d);
    memcpy(want, res, n * sizeof *want);
    for (size_t i = 0; i < n; i++) res[i] = -9.0f;
    int rc = 0;
#ifdef MFT_BENCH_HAVE_DNNL
    if (dnnl_run_dir((dnnl_side *)dnnl_opaque, d)) rc = 1;
#else
    (void)dnnl_opaque;
    int64_t pn, pc, ps;
    plain_strides(b, d, &pn, &pc, &ps);
    const int64_t B = b->B, S = b->S, C = b->sh.C;
    for (int64_t nn = 0; nn < b->sh.N; nn++)
        for (int64_t c = 0; c < b->CB * B; c++)
            for (int64_t s = 0; s < S; s++) {
                const int64_t bi = nn * b->CB * S * B + (c / B) * S * B + s * B + c % B;
                if (dir_to_blocked(d))
                    b->blk[bi] = c < C ? b->plain[nn * pn + c * pc + s * ps] : 0.0f;
                else if (c < C)
                    b->out[nn * pn + c * pc + s * ps] = b->blk[bi];
            }
#endif
    if (!rc && memcmp(want, res, n * sizeof *want) != 0) {
        size_t i = 0;
        while (i < n && memcmp(want + i, res + i, sizeof *want) == 0) i++;
        fprintf(stderr,
                "bench_reorder: %s %lldx%lldx%lldx%lld differs at float %zu: mft %g, "
                "reference %g\n",
                dir_name[d], (long long)b->sh.N, (long long)b->sh.C, (long long)b->sh.H,
                (long long)b->sh.W, i, (double)want[i], (double)res[i]);
        rc = 1;
    }
    free(want);
    return rc;
}

/* ------------------------------------------------------------------ main */
static void usage(const char *prog) {
    fprintf(stderr,
            "usage: %s [--threads 1,2] [--reps 11] [--block 16|8] [--shapes NxCxHxW,...]\n"
            "       [--retries 3]  (re-measure a (shape, threads) block disturbed by other load)\n"
            "  default shapes: 1x64x28x28 8x64x56x56 8x128x28x28 8x256x14x14 8x512x7x7\n"
            "                  8x24x56x56 64x256x56x56\n",
            prog);
}

static int parse_shapes(const char *s, shape *out, int max) {
    int n = 0;
    char buf[512];
    if (strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int64_t d[4];
        if (n >= max || bench_parse_dims(tok, d, 4) != 4) return -1;
        out[n++] = (shape){d[0], d[1], d[2], d[3]};
    }
    return n > 0 ? n : -1;
}

int main(int argc, char **argv) {
    shape shapes[MAX_SHAPES] = {{1, 64, 28, 28},  {8, 64, 56, 56}, {8, 128, 28, 28},
                                {8, 256, 14, 14}, {8, 512, 7, 7},  {8, 24, 56, 56},
                                {64, 256, 56, 56}};
    int nshapes = 7, threads[MAX_THREADS] = {1, 2}, nth = 2, reps = 11, B = 16, retries = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) {
            nth = bench_parse_int_list(argv[++i], threads, MAX_THREADS);
            if (nth < 1) goto bad;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            if (bench_parse_int(argv[++i], &reps) || reps < 7) goto bad;
        } else if (!strcmp(argv[i], "--retries") && i + 1 < argc) {
            char *end;
            const long v = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i] || v < 0 || v > 100) goto bad;
            retries = (int)v;
        } else if (!strcmp(argv[i], "--block") && i + 1 < argc) {
            if (bench_parse_int(argv[++i], &B) || (B != 8 && B != 16)) goto bad;
        } else if (!strcmp(argv[i], "--shapes") && i + 1 < argc) {
            nshapes = parse_shapes(argv[++i], shapes, MAX_SHAPES);
            if (nshapes < 1) goto bad;
        } else {
            goto bad;
        }
    }
    bench_env_warnings("bench_reorder", threads, nth);
#ifndef MFT_BENCH_HAVE_DNNL
    printf("oneDNN: missing (built without libdnnl / dnnl.h; apt-get install libdnnl-dev and "
           "reconfigure); its columns are n/a, results are checked against a naive loop\n");
#else
    printf("oneDNN: %d.%d.%d (%s)\n", dnnl_version()->major, dnnl_version()->minor,
           dnnl_version()->patch, dnnl_version()->hash);
#endif
    printf("block %d; GB/s = (plain + blocked bytes) / median time; copy = STREAM copy of the "
           "same bytes; reps %d (median), order shuffled\n",
           B, reps);
    printf("%-3s %-14s %6s %-10s %8s %8s %8s %9s %8s  %s\n", "T", "shape", "MB", "direction", "mft",
           "oneDNN", "copy", "mft/1DNN", "mft/copy", "oneDNN impl");

    int rc = 0;
    for (int si = 0; si < nshapes && !rc; si++) {
        bufs b = {.sh = shapes[si], .B = B};
        b.S = b.sh.H * b.sh.W;
        b.CB = (b.sh.C + B - 1) / B;
        b.plain_n = b.sh.N * b.sh.C * b.S;
        b.blk_n = b.sh.N * b.CB * B * b.S;
        b.copy_n = (b.plain_n + b.blk_n) / 2;
        b.plain = bench_alloc((size_t)b.plain_n * sizeof(float));
        b.blk = bench_alloc((size_t)b.blk_n * sizeof(float));
        b.out = bench_alloc((size_t)b.plain_n * sizeof(float));
        b.copy_src = bench_alloc((size_t)b.copy_n * sizeof(float));
        b.copy_dst = bench_alloc((size_t)b.copy_n * sizeof(float));
        bench_fill_f32(b.plain, (size_t)b.plain_n, 1);
        bench_fill_f32(b.copy_src, (size_t)b.copy_n, 2);
        const double bytes = (double)(b.plain_n + b.blk_n) * sizeof(float);
        char sname[64];
        const int64_t dims4[4] = {b.sh.N, b.sh.C, b.sh.H, b.sh.W};
        bench_format_dims(sname, sizeof sname, dims4, 4);

        for (int ti = 0; ti < nth && !rc; ti++) {
            const int T = threads[ti];
            mft_set_num_threads(T);
#ifdef _OPENMP
            omp_set_num_threads(T);
#endif
            run_ctx ctx[2 * D_COUNT + 1];
            bench_case cases[2 * D_COUNT + 1];
            double *samples = malloc(sizeof(double) * (size_t)reps * (2 * D_COUNT + 1));
            int nc = 0;
            void *dn = NULL;
#ifdef MFT_BENCH_HAVE_DNNL
            dnnl_side o;
            if (dnnl_side_init(&o, &b)) {
                dnnl_side_free(&o);
                free(samples);
                rc = 1;
                break;
            }
            dn = &o;
#endif
            for (int d = 0; d < D_COUNT && !rc; d++)
                if (verify(&b, d, dn)) rc = 1;
            if (rc || !samples) {
                rc = 1;
#ifdef MFT_BENCH_HAVE_DNNL
                dnnl_side_free(&o);
#endif
                free(samples);
                break;
            }
            for (int d = 0; d < D_COUNT; d++) {
                ctx[nc] = (run_ctx){.b = &b, .d = d, .threads = T};
                cases[nc] = (bench_case){
                    .key = dir_name[d], .fn = case_mft, .ctx = &ctx[nc], .bytes = bytes};
                nc++;
#ifdef MFT_BENCH_HAVE_DNNL
                ctx[nc] = (run_ctx){.b = &b, .d = d, .threads = T, .o = &o};
                cases[nc] = (bench_case){
                    .key = dir_name[d], .fn = case_dnnl, .ctx = &ctx[nc], .bytes = bytes};
                nc++;
#endif
            }
            ctx[nc] = (run_ctx){.b = &b, .d = 0, .threads = T};
            cases[nc] =
                (bench_case){.key = "copy", .fn = case_copy, .ctx = &ctx[nc], .bytes = bytes};
            const int icopy = nc++;
            for (int k = 0; k < nc; k++) cases[k].samples = samples + (size_t)k * (size_t)reps;

            bench_opts opt = bench_default_opts();
            opt.reps = reps;
            opt.shuffle = 1;
            /* samples of at least ~16 MB of traffic: small shapes repeat inside one */
            opt.inner = bytes >= 16e6 ? 1 : (int)(16e6 / bytes) + 1;
            /* a block disturbed by other processes is measured again */
            bench_load load;
            for (int attempt = 0;; attempt++) {
                bench_load_snap snap = bench_load_begin();
                if (bench_run(cases, nc, &opt)) {
                    fprintf(stderr, "bench_reorder: a oneDNN reorder failed\n");
                    rc = 1;
                }
                load = bench_load_end(&snap);
                if (rc || !bench_load_disturbed(&load) || attempt == retries) break;
                bench_sleep(1.0);
            }
            const double tcopy = cases[icopy].stats.median;
#ifdef MFT_BENCH_HAVE_DNNL
            const int per = 2; /* cases: mft, oneDNN per direction */
#else
            const int per = 1;
#endif
            for (int d = 0; d < D_COUNT && !rc; d++) {
                const double tm = cases[d * per].stats.median;
                const double td = per == 2 ? cases[d * per + 1].stats.median : NAN;
                char dgbs[16] = "n/a", dratio[16] = "n/a";
                if (per == 2) {
                    snprintf(dgbs, sizeof dgbs, "%.1f", bench_gbps(bytes, td));
                    snprintf(dratio, sizeof dratio, "%.2f", td / tm);
                }
                const char *impl = "";
#ifdef MFT_BENCH_HAVE_DNNL
                impl = o.impl[d];
#endif
                printf("%-3d %-14s %6.1f %-10s %8.1f %8s %8.1f %9s %8.2f  %s\n", T, sname,
                       bytes / 1e6, dir_name[d], bench_gbps(bytes, tm), dgbs,
                       bench_gbps(bytes, tcopy), dratio, tcopy / tm, impl);
            }
            if (bench_load_disturbed(&load))
                printf("    (disturbed after %d retries: other processes used %.2f cores, steal "
                       "%.2f; numbers unreliable)\n",
                       retries, load.other_cores, load.steal_cores);
            fflush(stdout);
#ifdef MFT_BENCH_HAVE_DNNL
            dnnl_side_free(&o);
#endif
            free(samples);
        }
        free(b.plain);
        free(b.blk);
        free(b.out);
        free(b.copy_src);
        free(b.copy_dst);
    }
    mft_set_num_threads(0);
    return rc;
bad:
    usage(argv[0]);
    return 2;
}
