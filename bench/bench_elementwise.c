/* bench/bench_elementwise.c — the elementwise engine (relu, add, mul by a
 * scalar, per-channel bias add; in-place and _out variants; non-dense
 * operands) and two reductions, against STREAM loops measured side by side in
 * the same run, plus the per-call overhead on a tiny tensor.
 *
 * Bandwidth block: for each tensor size (8x64x56x56 f32, plus any --size)
 * and each thread count (--threads, default 1,2) it times, round-robin inside
 * every repetition (see bench_run in bench_util.h):
 *
 *   references   memcpy, stream_copy (a=b), stream_add (a=b+c), stream_sum
 *                (s+=b: the read bandwidth), T threads each
 *   targets      relu, mul_scalar (x*2.5), add (x+y), bias (x + b, b of sizes
 *                (1,C,1,1) in x's format), each on NCHW and on NHWC inputs,
 *                allocating (the result is released inside the timing, as a
 *                PyTorch temporary is)
 *   context      relu_inplace (mft_relu_), relu_out / add_out (into a
 *                preallocated tensor of x's format), add_inplace (mft_add_):
 *                the same kernels without the allocation
 *   non-dense    relu and add (first operand) on a t[..., ::2] view
 *                (wstep2) and on a narrow of a tensor with a padded row pitch
 *                (padded), in both formats; compared with the dense case
 *   reductions   sum_all (mft_sum over every dim), sum_nhw (over every dim but
 *                C, keepdim: per-channel sums), both formats
 *
 * Bytes credited per call are what an optimal kernel must move, in tensor
 * sizes T: copy-like ops (relu, mul_scalar, in-place relu) 2T, add-like 3T,
 * bias 2T + C floats, sums 1T; non-dense cases are credited the bytes of
 * their dense twin (logical bandwidth). Each case names its reference:
 * stream_copy for copy-like ops, stream_add for add-like ones, stream_sum for
 * reductions; "/ref" = case GB/s / reference GB/s at the same thread count in
 * the same run (1.00 = as fast as the STREAM loop moving the same bytes).
 * Targets: the eight allocating relu/mul_scalar/add/bias cases >= 0.90 of
 * their reference; the non-dense cases <= 2.0 x the time of their dense twin.
 *
 * Call block: on a 1x4x4x4 tensor (--tiny) every case is one mft call, timed
 * --calls (10000) calls per sample, so the median is the per-call time:
 * relu and add (NCHW and NHWC; target <= 0.5 us), mul_scalar, relu_inplace,
 * add_out, and noop (the driver's own cost per call, ~2 ns).
 *
 * Verification: before timing and again after, every case runs once more and
 * its result is compared, element by element in logical order, with a naive
 * loop over the inputs read through their strides (exact for the elementwise
 * ops, relative 1e-5 of sum |x| for the sums), plus its dtype, sizes and
 * layout (a fresh result packed in x's format, as PyTorch's TensorIterator
 * gives; in-place and _out destinations keep theirs). The in-place cases are
 * reset from x first. A mismatch or an mft error exits with status 1 before
 * any number is printed.
 *
 * Exit status: 0 ok (targets missed are reported, not an error), 1 mft error
 * or wrong result, 2 usage. */
#include "bench_util.h"

#include <inttypes.h>
#include <stdbool.h>

#include "mft/mft.h"

#define MAX_SIZES       8
#define MAX_THREADS     16
#define TARGET_RATIO    0.90  /* allocating op >= 90% of its STREAM reference */
#define TARGET_NONDENSE 2.0   /* non-dense operand <= 2 x the dense time */
#define TARGET_CALL_S   0.5e-6 /* per call on the tiny tensor */
#define MUL_SCALAR      2.5
#define DEFAULT_CALLS   10000

/* ------------------------------------------------------------------ cases */
typedef enum op_id {
    OP_MEMCPY,
    OP_STREAM_COPY,
    OP_STREAM_ADD,
    OP_STREAM_SUM,
    OP_NOOP,
    OP_RELU,
    OP_RELU_INPLACE,
    OP_RELU_OUT,
    OP_MUL_SCALAR,
    OP_ADD,
    OP_ADD_INPLACE,
    OP_ADD_OUT,
    OP_BIAS,
    OP_SUM_ALL,
    OP_SUM_NHW
} op_id;

/* layout of the first operand x */
typedef enum src_id { S_DENSE, S_WSTEP2, S_PADDED, S_COUNT } src_id;
static const char *const SRC_NAMES[S_COUNT] = {"dense", "wstep2", "padded"};

typedef enum target_kind { T_NONE, T_RATIO, T_NONDENSE, T_CALL } target_kind;

typedef struct variant_spec {
    const char *key;
    const char *desc;
    op_id op;
    mft_format fmt; /* format of x (and y, bias, out) */
    src_id src;
    const char *ref; /* key of the bandwidth reference case (NULL: none) */
    const char *rel; /* key of the case this one is compared with (NULL: none) */
    target_kind target;
} variant_spec;

#define NCHW MFT_CONTIGUOUS
#define NHWC MFT_CHANNELS_LAST
static const variant_spec BW_VARIANTS[] = {
    /* references, T threads each */
    {"memcpy", "memcpy, split over the threads", OP_MEMCPY, NCHW, S_DENSE, NULL, NULL, T_NONE},
    {"stream_copy", "STREAM copy a[i]=b[i]", OP_STREAM_COPY, NCHW, S_DENSE, NULL, NULL, T_NONE},
    {"stream_add", "STREAM add a[i]=b[i]+c[i]", OP_STREAM_ADD, NCHW, S_DENSE, NULL, NULL, T_NONE},
    {"stream_sum", "STREAM read s+=b[i]", OP_STREAM_SUM, NCHW, S_DENSE, NULL, NULL, T_NONE},
    /* targets: allocating ops, dense inputs */
    {"relu_nchw", "mft_relu NCHW (allocates)", OP_RELU, NCHW, S_DENSE, "stream_copy", NULL,
     T_RATIO},
    {"relu_nhwc", "mft_relu NHWC (allocates)", OP_RELU, NHWC, S_DENSE, "stream_copy", NULL,
     T_RATIO},
    {"mul_scalar_nchw", "mft_mul_scalar(x, 2.5) NCHW", OP_MUL_SCALAR, NCHW, S_DENSE,
     "stream_copy", NULL, T_RATIO},
    {"mul_scalar_nhwc", "mft_mul_scalar(x, 2.5) NHWC", OP_MUL_SCALAR, NHWC, S_DENSE,
     "stream_copy", NULL, T_RATIO},
    {"add_nchw", "mft_add(x, y) NCHW", OP_ADD, NCHW, S_DENSE, "stream_add", NULL, T_RATIO},
    {"add_nhwc", "mft_add(x, y) NHWC", OP_ADD, NHWC, S_DENSE, "stream_add", NULL, T_RATIO},
    {"bias_nchw", "mft_add(x, b[1,C,1,1]) NCHW", OP_BIAS, NCHW, S_DENSE, "stream_copy", NULL,
     T_RATIO},
    {"bias_nhwc", "mft_add(x, b[1,C,1,1]) NHWC", OP_BIAS, NHWC, S_DENSE, "stream_copy", NULL,
     T_RATIO},
    /* context: no allocation */
    {"relu_inplace_nchw", "mft_relu_ NCHW", OP_RELU_INPLACE, NCHW, S_DENSE, "stream_copy",
     "relu_nchw", T_NONE},
    {"relu_inplace_nhwc", "mft_relu_ NHWC", OP_RELU_INPLACE, NHWC, S_DENSE, "stream_copy",
     "relu_nhwc", T_NONE},
    {"relu_out_nchw", "mft_relu_out prealloc NCHW", OP_RELU_OUT, NCHW, S_DENSE, "stream_copy",
     "relu_nchw", T_NONE},
    {"relu_out_nhwc", "mft_relu_out prealloc NHWC", OP_RELU_OUT, NHWC, S_DENSE, "stream_copy",
     "relu_nhwc", T_NONE},
    {"add_inplace_nchw", "mft_add_(x, y) NCHW", OP_ADD_INPLACE, NCHW, S_DENSE, "stream_add",
     "add_nchw", T_NONE},
    {"add_inplace_nhwc", "mft_add_(x, y) NHWC", OP_ADD_INPLACE, NHWC, S_DENSE, "stream_add",
     "add_nhwc", T_NONE},
    {"add_out_nchw", "mft_add_out prealloc NCHW", OP_ADD_OUT, NCHW, S_DENSE, "stream_add",
     "add_nchw", T_NONE},
    {"add_out_nhwc", "mft_add_out prealloc NHWC", OP_ADD_OUT, NHWC, S_DENSE, "stream_add",
     "add_nhwc", T_NONE},
    /* non-dense first operand vs its dense twin */
    {"relu_wstep2_nchw", "mft_relu x[...,::2] NCHW", OP_RELU, NCHW, S_WSTEP2, "stream_copy",
     "relu_nchw", T_NONDENSE},
    {"relu_padded_nchw", "mft_relu padded-pitch NCHW", OP_RELU, NCHW, S_PADDED, "stream_copy",
     "relu_nchw", T_NONDENSE},
    {"relu_wstep2_nhwc", "mft_relu x[...,::2] NHWC", OP_RELU, NHWC, S_WSTEP2, "stream_copy",
     "relu_nhwc", T_NONDENSE},
    {"relu_padded_nhwc", "mft_relu padded-pitch NHWC", OP_RELU, NHWC, S_PADDED, "stream_copy",
     "relu_nhwc", T_NONDENSE},
    {"add_wstep2_nchw", "mft_add(x[...,::2], y) NCHW", OP_ADD, NCHW, S_WSTEP2, "stream_add",
     "add_nchw", T_NONDENSE},
    {"add_padded_nchw", "mft_add(padded x, y) NCHW", OP_ADD, NCHW, S_PADDED, "stream_add",
     "add_nchw", T_NONDENSE},
    {"add_wstep2_nhwc", "mft_add(x[...,::2], y) NHWC", OP_ADD, NHWC, S_WSTEP2, "stream_add",
     "add_nhwc", T_NONDENSE},
    {"add_padded_nhwc", "mft_add(padded x, y) NHWC", OP_ADD, NHWC, S_PADDED, "stream_add",
     "add_nhwc", T_NONDENSE},
    /* reductions vs the read bandwidth */
    {"sum_all_nchw", "mft_sum all dims NCHW", OP_SUM_ALL, NCHW, S_DENSE, "stream_sum", NULL,
     T_NONE},
    {"sum_all_nhwc", "mft_sum all dims NHWC", OP_SUM_ALL, NHWC, S_DENSE, "stream_sum", NULL,
     T_NONE},
    {"sum_nhw_nchw", "mft_sum (N,H,W) keepdim NCHW", OP_SUM_NHW, NCHW, S_DENSE, "stream_sum",
     NULL, T_NONE},
    {"sum_nhw_nhwc", "mft_sum (N,H,W) keepdim NHWC", OP_SUM_NHW, NHWC, S_DENSE, "stream_sum",
     NULL, T_NONE},
};
#define NBW ((int)(sizeof BW_VARIANTS / sizeof BW_VARIANTS[0]))

static const variant_spec CALL_VARIANTS[] = {
    {"noop", "empty case: the driver's cost per call", OP_NOOP, NCHW, S_DENSE, NULL, NULL, T_NONE},
    {"call_relu_nchw", "mft_relu NCHW (allocates)", OP_RELU, NCHW, S_DENSE, NULL, NULL, T_CALL},
    {"call_relu_nhwc", "mft_relu NHWC (allocates)", OP_RELU, NHWC, S_DENSE, NULL, NULL, T_CALL},
    {"call_add_nchw", "mft_add(x, y) NCHW", OP_ADD, NCHW, S_DENSE, NULL, NULL, T_CALL},
    {"call_add_nhwc", "mft_add(x, y) NHWC", OP_ADD, NHWC, S_DENSE, NULL, NULL, T_CALL},
    {"call_mul_scalar_nchw", "mft_mul_scalar(x, 2.5) NCHW", OP_MUL_SCALAR, NCHW, S_DENSE, NULL,
     NULL, T_NONE},
    {"call_relu_inplace_nchw", "mft_relu_ NCHW", OP_RELU_INPLACE, NCHW, S_DENSE, NULL,
     "call_relu_nchw", T_NONE},
    {"call_add_out_nchw", "mft_add_out prealloc NCHW", OP_ADD_OUT, NCHW, S_DENSE, NULL,
     "call_add_nchw", T_NONE},
};
#define NCALL ((int)(sizeof CALL_VARIANTS / sizeof CALL_VARIANTS[0]))
#define NMAXV (NBW > NCALL ? NBW : NCALL)

typedef enum block_id { B_BANDWIDTH, B_CALL } block_id;
static const char *const BLOCK_NAMES[2] = {"bandwidth", "call"};

static bool is_ref_op(op_id op) { return op <= OP_NOOP; }
static bool is_inplace(op_id op) { return op == OP_RELU_INPLACE || op == OP_ADD_INPLACE; }
static bool is_out(op_id op) { return op == OP_RELU_OUT || op == OP_ADD_OUT; }
static bool is_binary(op_id op) {
    return op == OP_ADD || op == OP_ADD_INPLACE || op == OP_ADD_OUT;
}
static bool is_sum(op_id op) { return op == OP_SUM_ALL || op == OP_SUM_NHW; }

static int find_variant(const variant_spec *vs, int n, const char *key) {
    if (!key) return -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(vs[i].key, key)) return i;
    return -1;
}

/* ------------------------------------------------------------------ data of one size */
typedef struct size_data {
    int ndim;
    int64_t sizes[MFT_MAX_DIMS];
    int64_t numel, channels;
    size_t tensor_bytes;
    mft_tensor *x[2][S_COUNT];    /* [format][src]: the first operand */
    mft_tensor *xbase[2][S_COUNT]; /* owners of the non-dense views' storage */
    mft_tensor *y[2];             /* second operand, dense */
    mft_tensor *bias[2];          /* (1,C,1,...) */
    mft_tensor *dst[NMAXV];       /* per variant: in-place tensor or _out destination */
    float *ref_a, *ref_b, *ref_c;  /* STREAM / memcpy buffers */
    double *expect;               /* scratch: expected values, numel */
    float *got, *xin, *yin;       /* scratch: gathered values, numel each */
} size_data;

static int fi(mft_format f) { return f == MFT_CHANNELS_LAST ? 1 : 0; }

static void report_mft_error(const char *what) {
    fprintf(stderr, "bench_elementwise: %s failed: %s (%s)\n", what,
            mft_status_str(mft_last_error()), mft_last_error_message());
}

static void free_size_data(size_data *sd) {
    for (int f = 0; f < 2; f++) {
        for (int s = 0; s < S_COUNT; s++) {
            mft_tensor_release(sd->x[f][s]);
            mft_tensor_release(sd->xbase[f][s]);
        }
        mft_tensor_release(sd->y[f]);
        mft_tensor_release(sd->bias[f]);
    }
    for (int v = 0; v < NMAXV; v++) mft_tensor_release(sd->dst[v]);
    free(sd->ref_a);
    free(sd->ref_b);
    free(sd->ref_c);
    free(sd->expect);
    free(sd->got);
    free(sd->xin);
    free(sd->yin);
    memset(sd, 0, sizeof *sd);
}

/* Inputs (seeded normal values: half of them negative, so relu does work; the
 * same logical values in either format), the non-dense views, one destination
 * per in-place / _out variant of `vs`, reference buffers. False on an mft
 * error. */
static bool make_size_data(size_data *sd, int ndim, const int64_t *sizes, const variant_spec *vs,
                           int nv) {
    memset(sd, 0, sizeof *sd);
    sd->ndim = ndim;
    memcpy(sd->sizes, sizes, (size_t)ndim * sizeof *sizes);
    sd->numel = 1;
    for (int i = 0; i < ndim; i++) sd->numel *= sizes[i];
    sd->channels = sizes[1];
    sd->tensor_bytes = (size_t)sd->numel * sizeof(float);
    const uint64_t seed = 20240611;
    const mft_format fmts[2] = {MFT_CONTIGUOUS, MFT_CHANNELS_LAST};
    bool warn_dense = false; /* some variant uses a non-dense view */
    for (int v = 0; v < nv; v++)
        if (vs[v].src != S_DENSE) warn_dense = true;

    int64_t wide[MFT_MAX_DIMS], bsz[MFT_MAX_DIMS];
    int64_t w = sizes[ndim - 1];
    for (int i = 0; i < ndim; i++) bsz[i] = i == 1 ? sizes[1] : 1;
    for (int f = 0; f < 2; f++) {
        mft_format fmt = fmts[f];
        sd->x[f][S_DENSE] = mft_randn(ndim, sizes, MFT_F32, fmt, seed);
        sd->y[f] = mft_randn(ndim, sizes, MFT_F32, fmt, seed + 1);
        sd->bias[f] = mft_randn(ndim, bsz, MFT_F32, fmt, seed + 2);
        /* every other element of a tensor twice as wide: t[..., ::2] */
        memcpy(wide, sizes, (size_t)ndim * sizeof *sizes);
        wide[ndim - 1] = 2 * w;
        sd->xbase[f][S_WSTEP2] = mft_randn(ndim, wide, MFT_F32, fmt, seed + 3);
        sd->x[f][S_WSTEP2] = mft_slice(sd->xbase[f][S_WSTEP2], ndim - 1, 0, 2 * w, 2);
        /* padded row pitch: the last dim W stored as round_up(W + 1, 16) */
        wide[ndim - 1] = (w + 16) / 16 * 16;
        sd->xbase[f][S_PADDED] = mft_randn(ndim, wide, MFT_F32, fmt, seed + 4);
        sd->x[f][S_PADDED] = mft_narrow(sd->xbase[f][S_PADDED], ndim - 1, 0, w);
        for (int s = 0; s < S_COUNT; s++)
            if (!sd->x[f][s]) {
                report_mft_error("creating the input tensors");
                return false;
            }
        if (!sd->y[f] || !sd->bias[f]) {
            report_mft_error("creating the input tensors");
            return false;
        }
        /* dense only for degenerate sizes (e.g. N = 1 with a padded last dim
         * that is outermost in memory); the cases then time a dense view */
        for (int s = S_WSTEP2; s < S_COUNT; s++)
            if (warn_dense && mft_tensor_is_dense(sd->x[f][s]))
                fprintf(stderr,
                        "bench_elementwise: note: the %s %s view of this size is dense; its "
                        "cases measure a dense input\n",
                        mft_format_name(fmt), SRC_NAMES[s]);
    }
    for (int v = 0; v < nv; v++) {
        if (!is_inplace(vs[v].op) && !is_out(vs[v].op)) continue;
        sd->dst[v] = mft_zeros(ndim, sizes, MFT_F32, vs[v].fmt);
        if (!sd->dst[v]) {
            report_mft_error("creating the destination tensors");
            return false;
        }
    }
    sd->ref_a = bench_alloc(sd->tensor_bytes);
    sd->ref_b = bench_alloc(sd->tensor_bytes);
    sd->ref_c = bench_alloc(sd->tensor_bytes);
    bench_fill_f32(sd->ref_b, (size_t)sd->numel, 1);
    bench_fill_f32(sd->ref_c, (size_t)sd->numel, 2);
    sd->expect = malloc((size_t)sd->numel * sizeof *sd->expect);
    sd->got = malloc(sd->tensor_bytes);
    sd->xin = malloc(sd->tensor_bytes);
    sd->yin = malloc(sd->tensor_bytes);
    if (!sd->expect || !sd->got || !sd->xin || !sd->yin) {
        fprintf(stderr, "bench_elementwise: out of memory\n");
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ running one case */
typedef struct ew_ctx {
    const variant_spec *spec;
    size_data *sd;
    int threads;
    const mft_tensor *x, *y, *bias;
    mft_tensor *dst; /* in-place tensor or _out destination */
    int sum_ndims;
    int sum_dims[MFT_MAX_DIMS];
    double stream_sum; /* last result of the read loop */
    long faults;       /* minor page faults of the last verification call */
} ew_ctx;

/* Runs the case once. Allocating ops return their result in *res when res is
 * non-NULL (verification), else release it (timing). 0 ok, 1 mft error. */
static int run_op(ew_ctx *c, mft_tensor **res) {
    const size_data *sd = c->sd;
    size_t n = (size_t)sd->numel;
    mft_tensor *r = NULL;
    mft_status st = MFT_OK;
    switch (c->spec->op) {
    case OP_MEMCPY:
        bench_memcpy_par(sd->ref_a, sd->ref_b, sd->tensor_bytes, c->threads);
        bench_escape(sd->ref_a);
        return 0;
    case OP_STREAM_COPY:
        bench_stream_copy_f32(sd->ref_a, sd->ref_b, n, c->threads);
        bench_escape(sd->ref_a);
        return 0;
    case OP_STREAM_ADD:
        bench_stream_add_f32(sd->ref_a, sd->ref_b, sd->ref_c, n, c->threads);
        bench_escape(sd->ref_a);
        return 0;
    case OP_STREAM_SUM:
        c->stream_sum = bench_stream_sum_f32(sd->ref_b, n, c->threads);
        bench_escape(&c->stream_sum);
        return 0;
    case OP_NOOP:
        bench_clobber();
        return 0;
    case OP_RELU: r = mft_relu(c->x); break;
    case OP_MUL_SCALAR: r = mft_mul_scalar(c->x, MUL_SCALAR); break;
    case OP_ADD: r = mft_add(c->x, c->y); break;
    case OP_BIAS: r = mft_add(c->x, c->bias); break;
    case OP_SUM_ALL: r = mft_sum(c->x, 0, NULL, false); break;
    case OP_SUM_NHW: r = mft_sum(c->x, c->sum_ndims, c->sum_dims, true); break;
    case OP_RELU_INPLACE: st = mft_relu_(c->dst); break;
    case OP_ADD_INPLACE: st = mft_add_(c->dst, c->y); break;
    case OP_RELU_OUT: st = mft_relu_out(c->dst, c->x); break;
    case OP_ADD_OUT: st = mft_add_out(c->dst, c->x, c->y); break;
    }
    if (is_inplace(c->spec->op) || is_out(c->spec->op)) {
        if (st != MFT_OK) {
            report_mft_error(c->spec->key);
            return 1;
        }
        return 0;
    }
    if (!r) {
        report_mft_error(c->spec->key);
        return 1;
    }
    if (res)
        *res = r;
    else
        mft_tensor_release(r);
    return 0;
}

static int run_case(void *p) { return run_op(p, NULL); }

/* ------------------------------------------------------------------ verification */
/* The values of an F32 tensor in logical (row-major) order, read through its
 * strides: the naive reference's view of any layout. */
static void gather_f32(const mft_tensor *t, float *out) {
    int nd = mft_tensor_ndim(t);
    const int64_t *sz = mft_tensor_sizes(t), *st = mft_tensor_strides(t);
    const float *base = mft_tensor_data(t);
    int64_t n = mft_tensor_numel(t), idx[MFT_MAX_DIMS] = {0}, off = 0;
    for (int64_t i = 0; i < n; i++) {
        out[i] = base[off];
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < sz[d]) {
                off += st[d];
                break;
            }
            off -= (idx[d] - 1) * st[d];
            idx[d] = 0;
        }
    }
}

static bool check_result_shape(const ew_ctx *c, const mft_tensor *r, const char *when) {
    const variant_spec *v = c->spec;
    const size_data *sd = c->sd;
    int64_t want[MFT_MAX_DIMS];
    int nd = sd->ndim;
    memcpy(want, sd->sizes, sizeof want);
    if (v->op == OP_SUM_ALL) nd = 0;
    if (v->op == OP_SUM_NHW)
        for (int d = 0; d < nd; d++)
            if (d != 1) want[d] = 1;
    const char *why = NULL;
    if (mft_tensor_dtype(r) != MFT_F32)
        why = "result dtype is not f32";
    else if (mft_tensor_ndim(r) != nd ||
             (nd && memcmp(mft_tensor_sizes(r), want, (size_t)nd * sizeof *want)))
        why = "result sizes differ";
    else if (nd && !mft_tensor_is_contiguous(r, v->fmt))
        why = is_inplace(v->op) || is_out(v->op) ? "destination lost its layout"
                                                 : "result is not packed in the input's format";
    else if (!is_inplace(v->op) && !is_out(v->op) && mft_tensor_shares_storage(r, c->x))
        why = "result shares the input's storage";
    if (why) {
        fprintf(stderr, "bench_elementwise: VERIFY FAILED (%s) %s: %s (want %s)\n", when, v->key,
                why, mft_format_name(v->fmt));
        return false;
    }
    return true;
}

/* Expected values (in sd->expect, logical order) of the case, from its inputs. */
static int64_t expected(const ew_ctx *c, double *abs_sum) {
    size_data *sd = c->sd;
    int64_t n = sd->numel, inner = n / sd->sizes[0] / sd->channels, C = sd->channels;
    float *x = sd->xin, *y = sd->yin;
    gather_f32(c->x, x);
    if (is_binary(c->spec->op)) gather_f32(c->y, y);
    if (c->spec->op == OP_BIAS) gather_f32(c->bias, y); /* C values */
    *abs_sum = 0.0;
    switch (c->spec->op) {
    case OP_RELU:
    case OP_RELU_INPLACE:
    case OP_RELU_OUT:
        for (int64_t i = 0; i < n; i++) sd->expect[i] = x[i] > 0.0f ? x[i] : 0.0f;
        return n;
    case OP_MUL_SCALAR:
        for (int64_t i = 0; i < n; i++) sd->expect[i] = (float)((double)x[i] * MUL_SCALAR);
        return n;
    case OP_ADD:
    case OP_ADD_INPLACE:
    case OP_ADD_OUT:
        for (int64_t i = 0; i < n; i++) sd->expect[i] = x[i] + y[i];
        return n;
    case OP_BIAS:
        for (int64_t i = 0; i < n; i++) sd->expect[i] = x[i] + y[(i / inner) % C];
        return n;
    case OP_SUM_ALL:
        sd->expect[0] = 0.0;
        for (int64_t i = 0; i < n; i++) {
            sd->expect[0] += x[i];
            *abs_sum += fabs(x[i]);
        }
        return 1;
    case OP_SUM_NHW:
        for (int64_t k = 0; k < C; k++) sd->expect[k] = 0.0;
        for (int64_t i = 0; i < n; i++) {
            sd->expect[(i / inner) % C] += x[i];
            *abs_sum += fabs(x[i]);
        }
        return C;
    default:
        return 0;
    }
}

/* Runs the case once more and checks its result; prints why not otherwise. */
static bool verify_case(ew_ctx *c, const char *when) {
    const variant_spec *v = c->spec;
    const size_data *sd = c->sd;
    size_t n = (size_t)sd->numel;
    if (v->op == OP_NOOP) return true;
    long f0 = bench_minor_faults();
    if (is_ref_op(v->op)) {
        int rc = run_op(c, NULL);
        c->faults = f0 < 0 ? -1 : bench_minor_faults() - f0;
        if (rc) return false;
        bool ok = true;
        if (v->op == OP_MEMCPY || v->op == OP_STREAM_COPY) {
            ok = memcmp(sd->ref_a, sd->ref_b, sd->tensor_bytes) == 0;
        } else if (v->op == OP_STREAM_ADD) {
            for (size_t i = 0; i < n && ok; i++) ok = sd->ref_a[i] == sd->ref_b[i] + sd->ref_c[i];
        } else {
            double s = 0.0, a = 0.0;
            for (size_t i = 0; i < n; i++) {
                s += sd->ref_b[i];
                a += fabs(sd->ref_b[i]);
            }
            ok = fabs(c->stream_sum - s) <= 1e-4 * a + 1e-30; /* f32 lanes */
        }
        if (!ok)
            fprintf(stderr, "bench_elementwise: VERIFY FAILED (%s) %s: wrong reference result\n",
                    when, v->key);
        return ok;
    }

    mft_tensor *r = NULL;
    if (is_inplace(v->op) && mft_copy_(c->dst, c->x) != MFT_OK) { /* reset to x */
        report_mft_error("resetting the in-place tensor");
        return false;
    }
    f0 = bench_minor_faults();
    int rc = run_op(c, &r);
    c->faults = f0 < 0 ? -1 : bench_minor_faults() - f0;
    if (rc) return false;
    if (!r) r = mft_tensor_retain(c->dst);
    bool ok = check_result_shape(c, r, when);
    if (ok) {
        double abs_sum;
        int64_t m = expected(c, &abs_sum);
        float *got = sd->got;
        gather_f32(r, got);
        for (int64_t i = 0; i < m && ok; i++) {
            double e = sd->expect[i], g = got[i];
            bool good = is_sum(v->op) ? fabs(g - e) <= 1e-5 * abs_sum + 1e-30
                                      : (float)e == got[i];
            if (!good) {
                fprintf(stderr,
                        "bench_elementwise: VERIFY FAILED (%s) %s: logical element %" PRId64
                        " is %.9g, the naive loop gives %.9g\n",
                        when, v->key, i, g, e);
                ok = false;
            }
        }
    }
    mft_tensor_release(r);
    return ok;
}

/* ------------------------------------------------------------------ measuring */
typedef struct result {
    block_id block;
    int size_idx;
    int threads, mft_threads;
    int inner;
    int nv;
    const variant_spec *vs;
    bench_stats stats[NMAXV];
    double bytes[NMAXV]; /* credited per call */
    long faults[NMAXV];  /* minor page faults of one call (after timing) */
    bench_load load;
    int attempts;
} result;

static double traffic(const size_data *sd, op_id op) {
    double t = (double)sd->tensor_bytes;
    switch (op) {
    case OP_STREAM_ADD:
    case OP_ADD:
    case OP_ADD_INPLACE:
    case OP_ADD_OUT: return 3.0 * t;
    case OP_BIAS: return 2.0 * t + (double)sd->channels * sizeof(float);
    case OP_STREAM_SUM:
    case OP_SUM_ALL:
    case OP_SUM_NHW: return t;
    case OP_NOOP: return 0.0;
    default: return 2.0 * t;
    }
}

static double gbps_of(const result *r, int v) { return bench_gbps(r->bytes[v], r->stats[v].median); }
/* case bandwidth / reference bandwidth (NaN without a reference) */
static double ratio_ref(const result *r, int v) {
    int k = find_variant(r->vs, r->nv, r->vs[v].ref);
    return k < 0 ? NAN : gbps_of(r, v) / gbps_of(r, k);
}
/* case time / related case time (NaN without one) */
static double ratio_rel(const result *r, int v) {
    int k = find_variant(r->vs, r->nv, r->vs[v].rel);
    return k < 0 ? NAN : r->stats[v].median / r->stats[k].median;
}
/* 1 met, 0 missed, -1 no target */
static int target_met(const result *r, int v) {
    switch (r->vs[v].target) {
    case T_RATIO: return ratio_ref(r, v) >= TARGET_RATIO;
    case T_NONDENSE: return ratio_rel(r, v) <= TARGET_NONDENSE;
    case T_CALL: return r->stats[v].median <= TARGET_CALL_S;
    default: return -1;
    }
}

/* Times every variant of the block at `threads` threads; fills *res.
 * 0 ok, 1 mft error or wrong result. */
static int measure(size_data *sd, block_id block, int threads, const bench_opts *o0, int calls,
                   result *res) {
    const variant_spec *vs = block == B_BANDWIDTH ? BW_VARIANTS : CALL_VARIANTS;
    int nv = block == B_BANDWIDTH ? NBW : NCALL;
    bench_opts o = *o0;
    if (block == B_CALL) {
        o.inner = calls;
        o.warmup = o0->warmup * (calls / 10 > 0 ? calls / 10 : 1);
    }
    ew_ctx ctx[NMAXV];
    bench_case cases[NMAXV];
    double *samples = calloc((size_t)nv * (size_t)o.reps, sizeof *samples);
    if (!samples) {
        fprintf(stderr, "bench_elementwise: out of memory\n");
        return 1;
    }
    mft_set_num_threads(threads);
    res->block = block;
    res->threads = threads;
    res->mft_threads = mft_num_threads();
    res->inner = o.inner;
    res->nv = nv;
    res->vs = vs;
    for (int v = 0; v < nv; v++) {
        const variant_spec *spec = &vs[v];
        ew_ctx *c = &ctx[v];
        memset(c, 0, sizeof *c);
        c->spec = spec;
        c->sd = sd;
        c->threads = threads;
        c->x = sd->x[fi(spec->fmt)][spec->src];
        c->y = sd->y[fi(spec->fmt)];
        c->bias = sd->bias[fi(spec->fmt)];
        c->dst = sd->dst[v];
        for (int d = 0; d < sd->ndim; d++)
            if (d != 1) c->sum_dims[c->sum_ndims++] = d;
        res->bytes[v] = traffic(sd, spec->op);
        memset(&cases[v], 0, sizeof cases[v]);
        cases[v].key = spec->key;
        cases[v].desc = spec->desc;
        cases[v].fn = run_case;
        cases[v].ctx = c;
        cases[v].bytes = res->bytes[v];
        cases[v].samples = samples + (size_t)v * (size_t)o.reps;
    }

    int rc = 0;
    for (int v = 0; v < nv && !rc; v++)
        if (!verify_case(&ctx[v], "before timing")) rc = 1;
    if (!rc) {
        bench_load_snap snap = bench_load_begin();
        rc = bench_run(cases, nv, &o) ? 1 : 0;
        res->load = bench_load_end(&snap);
    }
    for (int v = 0; v < nv && !rc; v++)
        if (!verify_case(&ctx[v], "after timing")) rc = 1;
    for (int v = 0; v < nv; v++) {
        res->stats[v] = cases[v].stats;
        res->faults[v] = ctx[v].faults;
    }
    free(samples);
    return rc;
}

/* ------------------------------------------------------------------ output */
static const char *mark_of(const result *r, int v) {
    int m = target_met(r, v);
    if (m < 0) return "";
    switch (r->vs[v].target) {
    case T_RATIO: return m ? "ok (>=0.90)" : "BELOW 0.90";
    case T_NONDENSE: return m ? "ok (<=2.0x)" : "ABOVE 2.0x";
    case T_CALL: return m ? "ok (<=0.5us)" : "ABOVE 0.5us";
    default: return "";
    }
}

static void print_load(const result *r) {
    if (r->load.ok)
        printf("machine load during the timing: other processes %.2f cores, steal %.2f cores "
               "(%d attempt%s)%s\n",
               r->load.other_cores, r->load.steal_cores, r->attempts, r->attempts == 1 ? "" : "s",
               bench_load_disturbed(&r->load) ? " -- DISTURBED, numbers unreliable" : "");
}

static void print_table(const size_data *sd, const result *r, const bench_opts *o) {
    char dims[128];
    bench_format_dims(dims, sizeof dims, sd->sizes, sd->ndim);
    if (r->block == B_CALL) {
        printf("\n== per-call time, %s f32, %d thread%s (mft reports %d), %d calls per sample, "
               "median of %d reps ==\n",
               dims, r->threads, r->threads == 1 ? "" : "s", r->mft_threads, r->inner, o->reps);
        print_load(r);
        printf("%-24s %-40s %9s %9s %8s  %s\n", "case", "what", "ns/call", "p25-p75", "x rel",
               "target");
        for (int v = 0; v < r->nv; v++) {
            const bench_stats *st = &r->stats[v];
            double rel = ratio_rel(r, v);
            char rels[16] = "";
            if (!isnan(rel)) snprintf(rels, sizeof rels, "%.2f", rel);
            printf("%-24s %-40s %9.1f %8.1f%% %8s  %s\n", r->vs[v].key, r->vs[v].desc,
                   st->median * 1e9, 50.0 * (st->p75 - st->p25) / st->median, rels,
                   mark_of(r, v));
        }
        return;
    }
    printf("\n== %s f32 (%.2f MB per tensor), %d thread%s (mft reports %d), median of %d reps ==\n",
           dims, (double)sd->tensor_bytes * 1e-6, r->threads, r->threads == 1 ? "" : "s",
           r->mft_threads, o->reps);
    print_load(r);
    printf("%-18s %-30s %8s %9s %4s %7s %-11s %6s %6s %6s  %s\n", "case", "what", "median",
           "p25-p75", "T", "GB/s", "ref", "/ref", "x rel", "faults", "target");
    printf("%-18s %-30s %8s %9s %43s\n", "", "", "ms", "+-% med", "/call");
    for (int v = 0; v < r->nv; v++) {
        const bench_stats *st = &r->stats[v];
        double rr = ratio_ref(r, v), rel = ratio_rel(r, v);
        char rrs[16] = "", rels[16] = "";
        if (!isnan(rr)) snprintf(rrs, sizeof rrs, "%.3f", rr);
        if (!isnan(rel)) snprintf(rels, sizeof rels, "%.2f", rel);
        printf("%-18s %-30s %8.4f %8.1f%% %4.1f %7.2f %-11s %6s %6s %6ld  %s\n", r->vs[v].key,
               r->vs[v].desc, st->median * 1e3, 50.0 * (st->p75 - st->p25) / st->median,
               r->bytes[v] / (double)sd->tensor_bytes, gbps_of(r, v),
               r->vs[v].ref ? r->vs[v].ref : "", rrs, rels, r->faults[v], mark_of(r, v));
    }
}

static void print_json(const size_data *sds, const size_data *tiny, const result *res, int nres,
                       const bench_opts *o, int calls) {
    FILE *f = stdout;
    fprintf(f, "{\"bench\":\"elementwise\",\"mft_version\":");
    bench_json_str(f, mft_version());
    fprintf(f, ",\"dtype\":\"f32\",\"openmp\":%s,\"num_procs\":%d,",
            bench_have_openmp() ? "true" : "false", bench_num_procs());
    fprintf(f, "\"reps\":%d,\"warmup\":%d,\"pre\":%d,\"calls\":%d,", o->reps, o->warmup, o->pre,
            calls);
    fprintf(f, "\"targets\":{\"ratio_ref\":%.2f,\"nondense_max\":%.1f,\"call_s\":%.1e},",
            TARGET_RATIO, TARGET_NONDENSE, TARGET_CALL_S);
    fprintf(f, "\"bytes_note\":\"bytes = what an optimal kernel moves: copy-like 2T, add-like 3T, "
               "bias 2T+C floats, sums 1T (T = tensor bytes); non-dense cases as their dense "
               "twin; call block: median_s is per call\",");
    fprintf(f, "\"verified\":true,\"results\":[");
    for (int i = 0; i < nres; i++) {
        const result *r = &res[i];
        const size_data *sd = r->block == B_CALL ? tiny : &sds[r->size_idx];
        fprintf(f, "%s\n{\"block\":\"%s\",\"sizes\":[", i ? "," : "", BLOCK_NAMES[r->block]);
        for (int d = 0; d < sd->ndim; d++) fprintf(f, "%s%" PRId64, d ? "," : "", sd->sizes[d]);
        fprintf(f, "],\"numel\":%" PRId64 ",\"tensor_bytes\":%zu,", sd->numel, sd->tensor_bytes);
        fprintf(f, "\"threads\":%d,\"mft_threads\":%d,\"inner\":%d,\"attempts\":%d,"
                   "\"other_cores\":",
                r->threads, r->mft_threads, r->inner, r->attempts);
        bench_json_num(f, r->load.ok ? r->load.other_cores : NAN);
        fprintf(f, ",\"steal_cores\":");
        bench_json_num(f, r->load.ok ? r->load.steal_cores : NAN);
        fprintf(f, ",\"disturbed\":%s,\"variants\":{",
                bench_load_disturbed(&r->load) ? "true" : "false");
        for (int v = 0; v < r->nv; v++) {
            const variant_spec *vs = &r->vs[v];
            const bench_stats *st = &r->stats[v];
            int met = target_met(r, v);
            fprintf(f, "%s\n  ", v ? "," : "");
            bench_json_str(f, vs->key);
            fprintf(f, ":{\"desc\":");
            bench_json_str(f, vs->desc);
            fprintf(f, ",\"format\":\"%s\",\"src\":\"%s\",\"median_s\":",
                    vs->fmt == MFT_CHANNELS_LAST ? "nhwc" : "nchw", SRC_NAMES[vs->src]);
            bench_json_num(f, st->median);
            fprintf(f, ",\"min_s\":");
            bench_json_num(f, st->min);
            fprintf(f, ",\"p25_s\":");
            bench_json_num(f, st->p25);
            fprintf(f, ",\"p75_s\":");
            bench_json_num(f, st->p75);
            fprintf(f, ",\"max_s\":");
            bench_json_num(f, st->max);
            fprintf(f, ",\"bytes\":%.0f,\"faults_per_call\":%ld,\"gbps\":", r->bytes[v],
                    r->faults[v]);
            bench_json_num(f, r->block == B_CALL ? NAN : gbps_of(r, v));
            fprintf(f, ",\"ref\":");
            if (vs->ref)
                bench_json_str(f, vs->ref);
            else
                fputs("null", f);
            fprintf(f, ",\"ratio_ref\":");
            bench_json_num(f, ratio_ref(r, v));
            fprintf(f, ",\"rel\":");
            if (vs->rel)
                bench_json_str(f, vs->rel);
            else
                fputs("null", f);
            fprintf(f, ",\"ratio_rel\":");
            bench_json_num(f, ratio_rel(r, v));
            static const char *const tk[] = {"none", "ratio_ref", "nondense", "call"};
            fprintf(f, ",\"target\":\"%s\",\"target_met\":%s}", tk[vs->target],
                    met < 0 ? "null" : met ? "true" : "false");
        }
        fprintf(f, "}}");
    }
    fprintf(f, "\n]}\n");
}

/* The one-line verdict per target kind over all results. */
static void print_summary(const result *res, int nres) {
    static const char *const what[] = {
        "", "relu/mul_scalar/add/bias vs STREAM copy|add: lowest ratio",
        "non-dense operand vs dense: highest time ratio", "per call on the tiny tensor: highest"};
    printf("\nall results verified against a naive loop over the inputs' strides.\n");
    for (int k = T_RATIO; k <= T_CALL; k++) {
        double worst = NAN;
        const char *wkey = "";
        int wt = 0, all = 1, any = 0;
        for (int i = 0; i < nres; i++)
            for (int v = 0; v < res[i].nv; v++) {
                if ((int)res[i].vs[v].target != k) continue;
                double x = k == T_RATIO      ? ratio_ref(&res[i], v)
                           : k == T_NONDENSE ? ratio_rel(&res[i], v)
                                             : res[i].stats[v].median * 1e9;
                bool worse = k == T_RATIO ? !(x >= worst) : !(x <= worst);
                if (!any || worse) {
                    worst = x;
                    wkey = res[i].vs[v].key;
                    wt = res[i].threads;
                }
                any = 1;
                if (target_met(&res[i], v) != 1) all = 0;
            }
        if (!any) continue;
        printf("%s %.3f%s (%s, %d thread%s); target %s: %s\n", what[k], worst,
               k == T_CALL ? " ns" : "", wkey, wt, wt == 1 ? "" : "s",
               k == T_RATIO ? ">= 0.90" : k == T_NONDENSE ? "<= 2.0" : "<= 500 ns",
               all ? "MET" : "NOT MET");
    }
}

/* ------------------------------------------------------------------ main */
static void usage(FILE *f) {
    fprintf(
        f,
        "usage: bench_elementwise [--threads 1,2] [--reps N] [--warmup N] [--pre N]\n"
        "                         [--retries N] [--size 32x64x112x112]... [--tiny 1x4x4x4]\n"
        "                         [--calls N] [--no-calls] [--shuffle|--rotate] [--json]\n"
        "  Times mft's relu, mul_scalar, add and per-channel bias add (NCHW and NHWC, allocating,\n"
        "  in-place, _out, non-dense operands) and sums of an 8x64x56x56 f32 tensor (plus each\n"
        "  --size, rank 3-5) next to memcpy and STREAM copy/add/read loops, round-robin; prints\n"
        "  medians, GB/s (bytes an optimal kernel moves) and ratios to the matching STREAM loop;\n"
        "  then the per-call time of relu/add on a tiny tensor.\n"
        "  --threads LIST  thread counts (mft_set_num_threads + OpenMP), default 1,2\n"
        "  --reps N        timed samples per case, default 15\n"
        "  --warmup N      untimed calls per case before the first sample, default 2\n"
        "                  (x calls/10 in the per-call block)\n"
        "  --pre N         untimed calls right before each sample, default 1\n"
        "  --retries N     re-measure a block up to N times while other processes use\n"
        "                  > %.2f cores during it (default 3; 0 = never)\n"
        "  --tiny SIZE     tensor of the per-call block, default 1x4x4x4\n"
        "  --calls N       calls per sample in the per-call block, default %d\n"
        "  --no-calls      skip the per-call block\n"
        "  --shuffle       a fresh random case order in every repetition (default)\n"
        "  --rotate        rotate the order instead (bench_copy's driver order)\n"
        "  --json          one JSON object on stdout instead of the tables\n"
        "Exit status: 0 ok, 1 mft error or wrong result, 2 usage.\n",
        BENCH_BUSY_THRESHOLD, DEFAULT_CALLS);
}

/* Measures one block, re-measuring while disturbed; keeps the quietest
 * attempt in *r. 0 ok, 1 failure. */
static int measure_retrying(size_data *sd, block_id block, int size_idx, int threads,
                            const bench_opts *o, int calls, int retries, result *r) {
    for (int attempt = 1; attempt <= retries + 1; attempt++) {
        result cur;
        memset(&cur, 0, sizeof cur);
        cur.size_idx = size_idx;
        if (measure(sd, block, threads, o, calls, &cur)) return 1;
        if (attempt == 1 || cur.load.other_cores < r->load.other_cores) *r = cur;
        r->attempts = attempt;
        if (!bench_load_disturbed(&cur.load)) break;
        fprintf(stderr,
                "bench_elementwise: %s block, %d threads: other processes used %.2f cores "
                "(steal %.2f) during the timing%s\n",
                BLOCK_NAMES[block], threads, cur.load.other_cores, cur.load.steal_cores,
                attempt <= retries ? "; measuring again in 1 s" : "; giving up");
        if (attempt <= retries) bench_sleep(1.0);
    }
    if (r->mft_threads != threads)
        fprintf(stderr, "bench_elementwise: warning: asked mft for %d threads, it uses %d\n",
                threads, r->mft_threads);
    return 0;
}

/* Frees the tensors and buffers of a size but keeps what the output needs. */
static void shrink_size_data(size_data *sd) {
    size_data keep = *sd;
    free_size_data(sd);
    sd->ndim = keep.ndim;
    memcpy(sd->sizes, keep.sizes, sizeof keep.sizes);
    sd->numel = keep.numel;
    sd->channels = keep.channels;
    sd->tensor_bytes = keep.tensor_bytes;
}

int main(int argc, char **argv) {
    bench_opts o = bench_default_opts();
    o.shuffle = 1;
    int threads[MAX_THREADS] = {1, 2}, nthreads = 2;
    int64_t dims[MAX_SIZES][MFT_MAX_DIMS] = {{8, 64, 56, 56}};
    int ranks[MAX_SIZES] = {4}, nsizes = 1;
    int64_t tiny_dims[MFT_MAX_DIMS] = {1, 4, 4, 4};
    int tiny_rank = 4;
    bool json = false, do_calls = true;
    int retries = 3, calls = DEFAULT_CALLS;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = true;
            continue;
        } else if (!strcmp(a, "--no-calls")) {
            do_calls = false;
            continue;
        } else if (!strcmp(a, "--shuffle") || !strcmp(a, "--rotate")) {
            o.shuffle = !strcmp(a, "--shuffle");
            continue;
        } else if (!val) {
            bad = 1;
        } else if (!strcmp(a, "--threads")) {
            nthreads = bench_parse_int_list(val, threads, MAX_THREADS);
            bad = nthreads < 0;
        } else if (!strcmp(a, "--reps")) {
            bad = bench_parse_int(val, &o.reps);
        } else if (!strcmp(a, "--calls")) {
            bad = bench_parse_int(val, &calls);
        } else if (!strcmp(a, "--warmup") || !strcmp(a, "--pre") || !strcmp(a, "--retries")) {
            int *dst = !strcmp(a, "--warmup") ? &o.warmup : !strcmp(a, "--pre") ? &o.pre : &retries;
            bad = !strcmp(val, "0") ? (*dst = 0, 0) : bench_parse_int(val, dst);
        } else if (!strcmp(a, "--size") || !strcmp(a, "--tiny")) {
            bool tiny = !strcmp(a, "--tiny");
            if (!tiny && nsizes >= MAX_SIZES) {
                bad = 1;
            } else {
                int64_t *d = tiny ? tiny_dims : dims[nsizes];
                int rk = bench_parse_dims(val, d, MFT_MAX_DIMS);
                bad = rk < 3 || rk > 5;
                if (!bad && tiny) tiny_rank = rk;
                if (!bad && !tiny) ranks[nsizes++] = rk;
            }
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "bench_elementwise: bad argument %s%s%s\n", a, val ? " " : "",
                    val ? val : "");
            usage(stderr);
            return 2;
        }
        i++;
    }

    bench_env_warnings("bench_elementwise", threads, nthreads);

    static size_data sds[MAX_SIZES];
    static size_data tiny;
    static result res[(MAX_SIZES + 1) * MAX_THREADS];
    int nres = 0, rc = 0;
    for (int s = 0; s < nsizes && !rc; s++) {
        if (!make_size_data(&sds[s], ranks[s], dims[s], BW_VARIANTS, NBW)) {
            rc = 1;
            break;
        }
        for (int t = 0; t < nthreads && !rc; t++) {
            result *r = &res[nres];
            rc = measure_retrying(&sds[s], B_BANDWIDTH, s, threads[t], &o, calls, retries, r);
            if (rc) break;
            nres++;
            if (!json) print_table(&sds[s], r, &o);
        }
        shrink_size_data(&sds[s]);
    }
    if (!rc && do_calls) {
        if (!make_size_data(&tiny, tiny_rank, tiny_dims, CALL_VARIANTS, NCALL)) rc = 1;
        for (int t = 0; t < nthreads && !rc; t++) {
            result *r = &res[nres];
            rc = measure_retrying(&tiny, B_CALL, -1, threads[t], &o, calls, retries, r);
            if (rc) break;
            nres++;
            if (!json) print_table(&tiny, r, &o);
        }
        shrink_size_data(&tiny);
    }
    mft_set_num_threads(0);
    if (rc) {
        fprintf(stderr, "bench_elementwise: FAILED (no numbers reported)\n");
        return 1;
    }

    if (json)
        print_json(sds, &tiny, res, nres, &o, calls);
    else
        print_summary(res, nres);
    if (mft_live_tensors() != 0 || mft_live_storages() != 0)
        fprintf(stderr, "bench_elementwise: warning: %lld tensors / %lld storages still alive\n",
                (long long)mft_live_tensors(), (long long)mft_live_storages());
    return 0;
}
