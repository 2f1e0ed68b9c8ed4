/* tests/system/test_alloc_fail_train.c — allocation-failure injection over everything
 * a training program does, with tests/fail_alloc.h's counting allocator:
 *   1. one training step of a small CNN (conv2d, batch_norm2d in training
 *      mode, relu, max_pool2d, conv2d, relu, flatten, linear; cross_entropy;
 *      tape begin / forward / backward / tape end; SGD with momentum or Adam
 *      step; zero_grad; all inside a scope) on fixed seeded inputs: NHWC
 *      (fusion on: relu + max_pool run as one op) and NCHW (SGD with fusion
 *      off, so relu and max_pool2d run apart), a later step (state restored
 *      before each k) and the very first step (fresh model per k, optimiser
 *      built before model.to(channels_last), so the step re-lays its state);
 *   2. every layer constructor of mft/nn.h, mft_module_to_format, every
 *      optimiser constructor, and invalid arguments refused before any
 *      allocation;
 *   3. checkpoints of the model's parameters, buffers and optimiser state:
 *      mft_save_tensors (new file and overwrite), mft_load_tensors_into and
 *      mft_load_tensors.
 * Each scenario runs once cleanly to count its N allocations, then once per
 * k = 1..N with only allocation k failing, and once per k with every
 * allocation from k on failing ("sticky", printed k+). Asserted for every
 * injected failure: the call returns MFT_ERR_NOMEM (NULL or status; or, if
 * a fallback absorbed the failure, the clean run's results bit for bit);
 * mft_last_error_message() starts with the name of a function declared in
 * include/mft (read from the headers at run time); nothing leaks (allocator
 * blocks, live tensors, live storages back to the baseline); no tape or
 * scope is left open; nothing the failing call owns changed, byte for byte:
 * parameters, optimiser state, batch-norm buffers (after a failed forward;
 * when a later call failed, the forward legitimately updated them, as in
 * PyTorch, so they must equal the clean forward's), a file a failed save
 * would replace (byte-identical, or still absent, and no "<path>.tmp"), the
 * targets of a failed load. After each failed step or checkpoint call a
 * clean one must reproduce the clean run exactly.
 *
 * Sampling: none at today's sizes (N is 130-200 per step, under 100 for the
 * rest): every k, single and sticky, takes ~10 s under ASan. Only if a step
 * grows past STEP_ALL_K allocations do its k go in a deterministic stride
 * (spread over all phases of the step), to keep the file fast under ASan.
 *
 * Each distinct problem (scenario, message pattern) is reported once with
 * its k range at the end of its test function. "ctor", "ckpt" or "step" as
 * argv[1] runs one part. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, access */
#include <stdarg.h>
#include <stdbool.h>
#include <unistd.h>
#include "fail_alloc.h"
#include "test_util.h"

#define STEP_ALL_K  400 /* single failures: every k up to this N, else a stride */
#define STEP_STICKY 400 /* sticky failures: likewise */

static char g_tmpdir[256];

/* ------------------------------------------------------------------ public names
 * Function names declared with MFT_API in include/mft/ headers, read at run time
 * from the headers mft.h includes (recursively). */
#define MAX_PUBLIC 1024
static char g_pub[MAX_PUBLIC][64];
static int g_npub = 0;
static char g_seen_hdr[64][64];
static int g_nseen_hdr = 0;

static bool is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static void pub_scan(const char *dir, const char *file) {
    for (int i = 0; i < g_nseen_hdr; i++)
        if (!strcmp(g_seen_hdr[i], file)) return;
    if (g_nseen_hdr == 64) return;
    snprintf(g_seen_hdr[g_nseen_hdr++], 64, "%s", file);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t n = 0;
    char *s = (char *)tu_read_file(path, &n);
    if (!s) return;
    s[n] = '\0';
    for (const char *p = s; (p = strstr(p, "#include \"mft/")) != NULL;) {
        p += strlen("#include \"mft/");
        const char *q = strchr(p, '"');
        if (!q || q - p >= 60) continue;
        char inc[64];
        memcpy(inc, p, (size_t)(q - p));
        inc[q - p] = '\0';
        pub_scan(dir, inc);
    }
    for (const char *p = s; (p = strstr(p, "MFT_API")) != NULL;) {
        p += 7;
        /* the first "mft_name(" after MFT_API (return types like mft_tensor
         * are followed by '*' or a space and a name, not '(') */
        for (const char *q = p; *q && *q != ';'; q++) {
            if (strncmp(q, "mft_", 4) || (q > s && is_ident(q[-1]))) continue;
            const char *e = q;
            while (is_ident(*e)) e++;
            const char *f = e;
            while (*f == ' ') f++;
            if (*f != '(') continue;
            if (g_npub < MAX_PUBLIC && e - q < 63) {
                memcpy(g_pub[g_npub], q, (size_t)(e - q));
                g_pub[g_npub++][e - q] = '\0';
            }
            break;
        }
    }
    free(s);
}

/* the ops ops.h declares through its X-macro lists */
#define PUB_X_(name) "mft_" #name, "mft_" #name "_", "mft_" #name "_out",
static const char *const PUB_MACRO_NAMES[] = {MFT_UNARY_OPS(PUB_X_) MFT_SCALAR_OPS(PUB_X_)
                                                  MFT_BINARY_OPS(PUB_X_)};

static void pub_add_macro_names(void) {
    for (size_t i = 0; i < sizeof PUB_MACRO_NAMES / sizeof PUB_MACRO_NAMES[0]; i++)
        if (g_npub < MAX_PUBLIC)
            snprintf(g_pub[g_npub++], sizeof g_pub[0], "%s", PUB_MACRO_NAMES[i]);
}

static bool pub_has(const char *name, size_t len) {
    for (int i = 0; i < g_npub; i++)
        if (strlen(g_pub[i]) == len && !strncmp(g_pub[i], name, len)) return true;
    return false;
}

/* NULL when msg starts with a public function's name followed by ": " or
 * "(" ("mft_backward(relu): ..." names mft_backward), else why not. */
static const char *msg_problem(const char *msg) {
    size_t n = 0;
    while (is_ident(msg[n])) n++;
    if (strncmp(msg, "mft_", 4) != 0 || !(msg[n] == '(' || (msg[n] == ':' && msg[n + 1] == ' ')))
        return "does not start with \"mft_<function>: \"";
    if (!pub_has(msg, n)) return "names a function not declared in include/mft";
    return NULL;
}

/* ------------------------------------------------------------------ problems
 * A problem's key is the scenario, the sticky flag, a tag and its message up
 * to DETAIL with digits folded ("allocating 48 bytes" and "allocating 96
 * bytes" group); the text after DETAIL (names, values) only shows in the
 * example, the first run's. */
#define DETAIL "\x1f"

typedef struct problem {
    char key[360];
    char example[900];
    long long first_k, last_k, count;
    bool first_sticky;
    double worst; /* largest value passed with the problem (< 0: none) */
} problem;

#define MAX_PROBLEMS 160
static problem g_prob[MAX_PROBLEMS];
static int g_nprob = 0;
static long long g_prob_dropped = 0;

static void normalise(char *dst, size_t len, const char *src) {
    size_t j = 0;
    for (size_t i = 0; src[i] && src[i] != DETAIL[0] && j + 1 < len; i++) {
        if (src[i] >= '0' && src[i] <= '9') {
            if (j == 0 || dst[j - 1] != '#') dst[j++] = '#';
        } else {
            dst[j++] = src[i];
        }
    }
    dst[j] = '\0';
}

static void note_v(const char *scen, long long k, bool sticky, const char *tag, double value,
                   const char *fmt, va_list ap) {
    char detail[700], norm[300], key[360];
    vsnprintf(detail, sizeof detail, fmt, ap);
    normalise(norm, sizeof norm, detail);
    snprintf(key, sizeof key, "%s%s|%s|%s", scen, sticky ? "+" : "", tag, norm);
    for (char *c = detail; *c; c++)
        if (*c == DETAIL[0]) *c = ' ';
    for (int i = 0; i < g_nprob; i++)
        if (!strcmp(g_prob[i].key, key)) {
            g_prob[i].count++;
            g_prob[i].last_k = k;
            if (value > g_prob[i].worst) g_prob[i].worst = value;
            return;
        }
    if (g_nprob == MAX_PROBLEMS) {
        g_prob_dropped++;
        return;
    }
    problem *p = &g_prob[g_nprob++];
    snprintf(p->key, sizeof p->key, "%s", key);
    snprintf(p->example, sizeof p->example, "%s", detail);
    p->first_k = p->last_k = k;
    p->count = 1;
    p->first_sticky = sticky;
    p->worst = value;
}

static void note(const char *scen, long long k, bool sticky, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
static void note(const char *scen, long long k, bool sticky, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    note_v(scen, k, sticky, "", -1, fmt, ap);
    va_end(ap);
}

/* A problem grouped by tag as well, keeping the largest value. */
static void note_tv(const char *scen, long long k, bool sticky, const char *tag, double value,
                    const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
static void note_tv(const char *scen, long long k, bool sticky, const char *tag, double value,
                    const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    note_v(scen, k, sticky, tag, value, fmt, ap);
    va_end(ap);
}

/* One failed check per distinct problem. */
static void flush_problems(void) {
    for (int i = 0; i < g_nprob; i++) {
        const problem *p = &g_prob[i];
        const char *bar = strchr(p->key, '|');
        harness_checks_failed_++;
        fprintf(stderr, "PROBLEM %.*s: %lld run(s), k = %lld%s..%lld: %s",
                (int)(bar ? bar - p->key : 0), p->key, p->count, p->first_k,
                p->first_sticky ? "+" : "", p->last_k, p->example);
        if (p->worst >= 0) fprintf(stderr, " [largest over these runs: %.1e]", p->worst);
        fprintf(stderr, "\n");
    }
    if (g_prob_dropped) {
        harness_checks_failed_++;
        fprintf(stderr, "PROBLEM: %lld more problems not listed\n", g_prob_dropped);
    }
    g_nprob = 0;
    g_prob_dropped = 0;
}

/* ------------------------------------------------------------------ tensor lists and snapshots */
#define MAXT 48
enum { T_PARAM, T_BUFFER, T_OPT };
static const char *const KIND_NAME[3] = {"parameter", "buffer", "optimiser state"};

typedef struct tlist {
    int n;
    mft_tensor *t[MAXT];
    char name[MAXT][80];
    int kind[MAXT];
} tlist;

typedef struct snap {
    int n;
    unsigned char *b[MAXT];
    size_t len[MAXT];
} snap;

static size_t t_bytes(const mft_tensor *t) {
    return (size_t)mft_tensor_numel(t) * mft_dtype_size(mft_tensor_dtype(t));
}

/* Copies t's elements in logical order to buf (or buf to t): no library
 * allocation, works whatever t's strides are now. */
static void t_walk(const mft_tensor *t, unsigned char *buf, bool write) {
    const int nd = mft_tensor_ndim(t);
    const int64_t *sz = mft_tensor_sizes(t), *st = mft_tensor_strides(t), n = mft_tensor_numel(t);
    const size_t es = mft_dtype_size(mft_tensor_dtype(t));
    unsigned char *base = mft_tensor_data(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0;
        for (int d = 0; d < nd; d++) off += idx[d] * st[d];
        if (write)
            memcpy(base + off * (int64_t)es, buf + (size_t)i * es, es);
        else
            memcpy(buf + (size_t)i * es, base + off * (int64_t)es, es);
        tu_next_index(nd, sz, idx);
    }
}

static void snap_take(snap *s, const tlist *l) {
    s->n = l->n;
    for (int i = 0; i < l->n; i++) {
        s->len[i] = t_bytes(l->t[i]);
        s->b[i] = malloc(s->len[i] ? s->len[i] : 1);
        t_walk(l->t[i], s->b[i], false);
    }
}

static void snap_free(snap *s) {
    for (int i = 0; i < s->n; i++) free(s->b[i]);
    s->n = 0;
}

static void snap_restore(const snap *s, const tlist *l) {
    for (int i = 0; i < l->n; i++) t_walk(l->t[i], s->b[i], true);
}

/* Names (into out) of the tensors of kinds in mask whose bytes differ from s;
 * returns how many. */
static int snap_diff(const snap *s, const tlist *l, unsigned mask, char *out, size_t len) {
    int nd = 0;
    size_t used = 0;
    if (len) out[0] = '\0';
    unsigned char *tmp = NULL;
    for (int i = 0; i < l->n; i++) {
        if (!(mask & (1u << l->kind[i]))) continue;
        tmp = realloc(tmp, s->len[i] ? s->len[i] : 1);
        t_walk(l->t[i], tmp, false);
        if (!memcmp(tmp, s->b[i], s->len[i])) continue;
        if (nd++ < 6 && used < len) {
            int w = snprintf(out + used, len - used, "%s%s '%s'", nd > 1 ? ", " : "",
                             KIND_NAME[l->kind[i]], l->name[i]);
            if (w > 0) used += (size_t)w;
        }
    }
    if (nd > 6 && used < len) snprintf(out + used, len - used, " and %d more", nd - 6);
    free(tmp);
    return nd;
}

/* Largest normwise relative difference, max|a - b| / max|b| per tensor,
 * between the floating tensors of kinds in mask and s (how far an absorbed
 * failure's results are off: rounding or a wrong result). */
static double snap_maxrel(const snap *s, const tlist *l, unsigned mask) {
    double worst = 0;
    unsigned char *tmp = NULL;
    for (int i = 0; i < l->n; i++) {
        const mft_dtype dt = mft_tensor_dtype(l->t[i]);
        if (!(mask & (1u << l->kind[i])) || (dt != MFT_F32 && dt != MFT_F64)) continue;
        tmp = realloc(tmp, s->len[i] ? s->len[i] : 1);
        t_walk(l->t[i], tmp, false);
        const size_t n = s->len[i] / mft_dtype_size(dt);
        double dmax = 0, bmax = 0;
        for (size_t e = 0; e < n; e++) {
            double a, b;
            if (dt == MFT_F32) {
                float fa, fb;
                memcpy(&fa, tmp + e * 4, 4);
                memcpy(&fb, s->b[i] + e * 4, 4);
                a = fa, b = fb;
            } else {
                memcpy(&a, tmp + e * 8, 8);
                memcpy(&b, s->b[i] + e * 8, 8);
            }
            if (!(fabs(a - b) <= dmax)) dmax = fabs(a - b);
            if (fabs(b) > bmax) bmax = fabs(b);
        }
        /* skip mathematically-zero tensors (the gradient of a conv bias
         * that a batch norm follows is rounding noise around 0) */
        const double d = bmax < 1e-6 ? 0 : dmax / bmax;
        if (!(d <= worst)) worst = d;
    }
    free(tmp);
    return worst;
}

#define M_PARAM (1u << T_PARAM)
#define M_BUF   (1u << T_BUFFER)
#define M_OPT   (1u << T_OPT)
#define M_ALL   (M_PARAM | M_BUF | M_OPT)

static void tlist_add(tlist *l, mft_tensor *t, const char *prefix, const char *name, int kind) {
    if (l->n == MAXT) {
        fprintf(stderr, "test_alloc_fail_train: raise MAXT\n");
        return;
    }
    l->t[l->n] = t;
    snprintf(l->name[l->n], sizeof l->name[0], "%s%s", prefix, name);
    l->kind[l->n++] = kind;
}

static void tlist_of(tlist *l, const mft_module *m, const mft_optimizer *o) {
    mft_tensor *ts[MAXT];
    const char *nm[MAXT];
    l->n = 0;
    int np = mft_module_parameters(m, ts, nm, MAXT);
    for (int i = 0; i < np && i < MAXT; i++) tlist_add(l, ts[i], "model.", nm[i], T_PARAM);
    int nb = mft_module_buffers(m, ts, nm, MAXT);
    for (int i = 0; i < nb && i < MAXT; i++) tlist_add(l, ts[i], "model.", nm[i], T_BUFFER);
    int ns = o ? mft_optimizer_state(o, ts, nm, MAXT) : 0;
    for (int i = 0; i < ns && i < MAXT; i++) tlist_add(l, ts[i], "opt.", nm[i], T_OPT);
}

/* ------------------------------------------------------------------ the model */
static const int64_t K3[2] = {3, 3}, P1[2] = {1, 1}, K2[2] = {2, 2};
#define IN_C  3
#define IN_HW 12
#define BATCH 4

/* The 8 layers of the model, to hand to mft_nn_sequential. */
static void small_cnn_layers(mft_module **l, uint64_t seed) {
    l[0] = mft_nn_conv2d(IN_C, 8, K3, NULL, P1, NULL, 1, true, seed);
    l[1] = mft_nn_batch_norm2d(8, 1e-5, 0.1);
    l[2] = mft_nn_relu();
    l[3] = mft_nn_max_pool2d(K2, NULL);
    l[4] = mft_nn_conv2d(8, 8, K3, NULL, P1, NULL, 1, true, seed + 1);
    l[5] = mft_nn_relu();
    l[6] = mft_nn_flatten(1, -1);
    l[7] = mft_nn_linear(8 * (IN_HW / 2) * (IN_HW / 2), 10, true, seed + 2);
}

static mft_module *small_cnn(uint64_t seed) {
    mft_module *l[8];
    small_cnn_layers(l, seed);
    return mft_nn_sequential(8, l);
}

typedef enum { OPT_SGD, OPT_ADAM } opt_kind;

static mft_optimizer *make_opt(opt_kind kind, const mft_module *m) {
    mft_tensor *ps[MAXT];
    int np = mft_module_parameters(m, ps, NULL, MAXT);
    if (kind == OPT_SGD) return mft_sgd_new(np, ps, &(mft_sgd_opts){0.01, 0.9, 0.0, 0.0, false});
    return mft_adam_new(np, ps, &(mft_adam_opts){1e-3, 0.9, 0.999, 1e-8, 0.0});
}

typedef struct rig {
    mft_module *model;
    mft_optimizer *opt;
    mft_tensor *x, *y;
    tlist all;
} rig;

/* opt_first: the optimiser is built before model.to(fmt), as many training
 * scripts do, so its first step re-lays its state out (opt_relayout). */
static bool rig_make(rig *r, mft_format fmt, opt_kind ok, bool fusion, bool opt_first) {
    memset(r, 0, sizeof *r);
    r->model = small_cnn(11);
    if (!r->model) return false;
    if (opt_first) r->opt = make_opt(ok, r->model);
    if (mft_module_to_format(r->model, fmt) != MFT_OK) return false;
    mft_module_set_fusion(r->model, fusion);
    if (!opt_first) r->opt = make_opt(ok, r->model);
    const int64_t xs[4] = {BATCH, IN_C, IN_HW, IN_HW}, ys[1] = {BATCH};
    r->x = mft_randn(4, xs, MFT_F32, fmt, 5);
    r->y = mft_empty(1, ys, MFT_I64, MFT_CONTIGUOUS);
    if (!r->opt || !r->x || !r->y) return false;
    static const int labels[BATCH] = {3, 1, 7, 0};
    for (int64_t i = 0; i < BATCH; i++) mft_tensor_set(r->y, &i, labels[i]);
    tlist_of(&r->all, r->model, r->opt);
    return true;
}

static void rig_free(rig *r) {
    mft_tensor_release(r->x);
    mft_tensor_release(r->y);
    mft_optimizer_free(r->opt);
    mft_module_free(r->model);
    memset(r, 0, sizeof *r);
}

/* ------------------------------------------------------------------ one training step */
typedef enum {
    PH_OK,
    PH_SCOPE_BEGIN,
    PH_TAPE_BEGIN,
    PH_FORWARD,
    PH_LOSS,
    PH_BACKWARD,
    PH_TAPE_END,
    PH_OPT_STEP,
    PH_SCOPE_END,
} phase;
static const char *const PH_NAME[] = {"ok",
                                      "mft_scope_begin",
                                      "mft_tape_begin",
                                      "mft_module_forward",
                                      "mft_cross_entropy",
                                      "mft_backward",
                                      "mft_tape_end",
                                      "mft_optimizer_step",
                                      "mft_scope_end"};

typedef struct step_res {
    phase ph;        /* the first call that failed */
    mft_status st;   /* what it returned (or mft_last_error for a NULL) */
    mft_status last; /* mft_last_error() right after it */
    char msg[512];   /* mft_last_error_message() right after it */
    double loss;
    int grads_after_failed_backward; /* parameters with a .grad then (must be 0) */
} step_res;

static void step_fail(step_res *s, phase ph, mft_status st) {
    if (s->ph != PH_OK) return;
    s->ph = ph;
    s->st = st;
    s->last = mft_last_error();
    snprintf(s->msg, sizeof s->msg, "%s", mft_last_error_message());
}

/* What a training loop does, cleaning up after any failure. */
static void train_step(rig *r, step_res *s) {
    memset(s, 0, sizeof *s);
    s->loss = NAN;
    mft_clear_error();
    mft_status st = mft_scope_begin();
    if (st != MFT_OK) {
        step_fail(s, PH_SCOPE_BEGIN, st);
        return;
    }
    st = mft_tape_begin();
    if (st != MFT_OK) {
        step_fail(s, PH_TAPE_BEGIN, st);
    } else {
        mft_tensor *logits = mft_module_forward(r->model, r->x);
        mft_tensor *loss = NULL;
        if (!logits)
            step_fail(s, PH_FORWARD, mft_last_error());
        else
            loss = mft_cross_entropy(logits, r->y, NULL, MFT_IGNORE_INDEX_DEFAULT, 0.0,
                                     MFT_REDUCTION_MEAN);
        if (logits && !loss) step_fail(s, PH_LOSS, mft_last_error());
        if (loss) {
            st = mft_backward(loss, NULL);
            if (st != MFT_OK) {
                step_fail(s, PH_BACKWARD, st);
                for (int i = 0; i < r->all.n; i++)
                    if (r->all.kind[i] == T_PARAM && mft_tensor_grad(r->all.t[i]))
                        s->grads_after_failed_backward++;
            } else {
                s->loss = mft_tensor_get(loss, NULL);
            }
        }
        st = mft_tape_end();
        if (st != MFT_OK) step_fail(s, PH_TAPE_END, st);
    }
    if (s->ph == PH_OK) {
        st = mft_optimizer_step(r->opt);
        if (st != MFT_OK) step_fail(s, PH_OPT_STEP, st);
    }
    mft_optimizer_zero_grad(r->opt);
    st = mft_scope_end();
    if (st != MFT_OK) step_fail(s, PH_SCOPE_END, st);
}

/* ------------------------------------------------------------------ common checks */
typedef struct baseline {
    long long blocks;
    int64_t tensors, storages;
} baseline;

static baseline base_now(void) {
    return (baseline){g_fa.live, mft_live_tensors(), mft_live_storages()};
}

static void check_leaks(const char *scen, long long k, bool sticky, baseline b) {
    if (g_fa.live != b.blocks)
        note(scen, k, sticky, "leak: %lld allocator blocks live (baseline %lld)", g_fa.live,
             b.blocks);
    if (mft_live_tensors() != b.tensors || mft_live_storages() != b.storages)
        note(scen, k, sticky, "leak: %lld live tensors / %lld storages (baseline %lld / %lld)",
             (long long)mft_live_tensors(), (long long)mft_live_storages(), (long long)b.tensors,
             (long long)b.storages);
}

/* status must be NOMEM and the message must name a public function */
static void check_error(const char *scen, long long k, bool sticky, const char *call, mft_status st,
                        mft_status last, const char *msg) {
    if (st != MFT_ERR_NOMEM || last != MFT_ERR_NOMEM)
        note(scen, k, sticky, "%s returned %s (last error %s), want out of memory: '%s'", call,
             mft_status_str(st), mft_status_str(last), msg);
    const char *why = msg_problem(msg);
    if (why) note(scen, k, sticky, "%s failed with message '%s': %s", call, msg, why);
}

/* No tape or scope left open on this thread. */
static void check_no_open_state(const char *scen, long long k, bool sticky) {
    if (mft_tape_recording() || mft_tape_size() != 0) {
        note(scen, k, sticky, "a tape was left open (%lld nodes)", (long long)mft_tape_size());
        mft_tape_end();
    }
    mft_clear_error();
    if (mft_scope_end() != MFT_ERR_SCOPE) note(scen, k, sticky, "a scope was left open");
    mft_clear_error();
}

/* the k to run out of 1..n: all, or a stride covering the range */
static long long k_stride(long long n, long long want) {
    return n <= want ? 1 : (n + want - 1) / want;
}

/* ------------------------------------------------------------------ 1. training steps */
typedef struct step_stats {
    long long n, single_runs, sticky_runs, failed, absorbed;
    long long by_phase[PH_SCOPE_END + 1];
} step_stats;

typedef struct step_ref {
    snap s0, s1;
    double loss1;
    long long n;
} step_ref;

static void run_step_k(const char *scen, rig *r, const step_ref *ref, baseline b, long long k,
                       bool sticky, step_stats *stats) {
    char names[400];
    snap_restore(&ref->s0, &r->all);
    fa_arm_mode(k, sticky);
    step_res s;
    train_step(r, &s);
    const long long injected = g_fa.injected;
    const size_t failed_size = g_fa.failed_size;
    fa_arm_mode(0, false);
    if (sticky)
        stats->sticky_runs++;
    else
        stats->single_runs++;
    check_no_open_state(scen, k, sticky);
    check_leaks(scen, k, sticky, b);
    if (injected == 0) {
        note(scen, k, sticky, "allocation %lld never happened (%lld calls)", k, g_fa.calls);
        return;
    }
    if (s.ph == PH_OK) {
        /* absorbed by a fallback: the clean run's results, bit for bit */
        stats->absorbed++;
        const bool loss_differs = memcmp(&s.loss, &ref->loss1, sizeof s.loss) != 0;
        if (snap_diff(&ref->s1, &r->all, M_ALL, names, sizeof names) || loss_differs) {
            /* how far off: measured on the buffers and the optimiser state
             * (linear in the gradients; Adam's parameter update amplifies
             * rounding noise of tiny gradients); up to 1e-5 is rounding,
             * more is a wrong result */
            const double rel = snap_maxrel(&ref->s1, &r->all, M_BUF | M_OPT);
            note_tv(scen, k, sticky, rel <= 1e-5 ? "rounding" : "wrong", rel,
                    "absorbed failure: the step's results differ from the clean run %s" DETAIL
                    "(first failed allocation %zu bytes; loss %s; max normwise rel diff "
                    "%.1e) in %s",
                    rel <= 1e-5 ? "by rounding (not bit-identical)"
                                : "by far more than rounding (wrong values)",
                    failed_size, loss_differs ? "differs" : "same", rel, names);
        }
        return;
    }
    stats->failed++;
    stats->by_phase[s.ph]++;
    check_error(scen, k, sticky, PH_NAME[s.ph], s.st, s.last, s.msg);
    if (s.grads_after_failed_backward)
        note(scen, k, sticky, "mft_backward failed but %d parameters got a .grad",
             s.grads_after_failed_backward);
    if (snap_diff(&ref->s0, &r->all, M_PARAM | M_OPT, names, sizeof names))
        note(scen, k, sticky, "%s failed but changed %s", PH_NAME[s.ph], names);
    /* buffers: untouched by a failed forward; after a successful forward
     * they hold its (clean) running statistics */
    if (s.ph <= PH_FORWARD) {
        if (snap_diff(&ref->s0, &r->all, M_BUF, names, sizeof names))
            note(scen, k, sticky, "%s failed but changed %s", PH_NAME[s.ph], names);
    } else if (snap_diff(&ref->s1, &r->all, M_BUF, names, sizeof names)) {
        note(scen, k, sticky,
             "%s failed after the forward; buffers differ from the clean "
             "forward's: " DETAIL "%s",
             PH_NAME[s.ph], names);
    }
    /* the library is usable: a clean step from the same state gives the
     * clean results */
    snap_restore(&ref->s0, &r->all);
    step_res c;
    train_step(r, &c);
    if (c.ph != PH_OK) {
        note(scen, k, sticky, "clean step after the failure failed in %s: %s", PH_NAME[c.ph],
             c.msg);
    } else {
        if (memcmp(&c.loss, &ref->loss1, sizeof c.loss) != 0)
            note(scen, k, sticky, "clean step after the failure: loss %.9g, clean run %.9g", c.loss,
                 ref->loss1);
        if (snap_diff(&ref->s1, &r->all, M_ALL, names, sizeof names))
            note(scen, k, sticky,
                 "clean step after the failure differs from the clean run in " DETAIL "%s", names);
    }
    check_no_open_state(scen, k, sticky);
    check_leaks(scen, k, sticky, b);
}

/* first: the failing step is the model's first (fresh model and optimiser
 * per k, optimiser built before model.to(fmt)); else a later one (one
 * clean step first, then state restored before each k). */
static void step_scenario(mft_format fmt, opt_kind okind, bool fusion, bool first) {
    char scen[96];
    snprintf(scen, sizeof scen, "step %s %s%s%s", fmt == MFT_CHANNELS_LAST ? "nhwc" : "nchw",
             okind == OPT_SGD ? "sgd-momentum" : "adam", fusion ? "" : " (fusion off)",
             first ? " (first step)" : "");
    const baseline b_outer = base_now();
    rig r;
    bool made = rig_make(&r, fmt, okind, fusion, first);
    CHECK_MSG(made, "%s: setup failed: %s", scen, mft_last_error_message());
    if (!made) {
        rig_free(&r);
        return;
    }
    step_res s;
    if (!first) { /* momentum / Adam state is non-zero from here on */
        train_step(&r, &s);
        CHECK_MSG(s.ph == PH_OK, "%s: first step: %s", scen, s.msg);
    }
    step_ref ref;
    snap_take(&ref.s0, &r.all);
    baseline b = base_now();
    fa_arm_mode(0, false);
    train_step(&r, &s);
    ref.n = g_fa.calls;
    ref.loss1 = s.loss;
    CHECK_MSG(s.ph == PH_OK && isfinite(s.loss), "%s: clean step: %s", scen, s.msg);
    snap_take(&ref.s1, &r.all);
    /* determinism: the same state gives the same allocations and bits */
    if (first) {
        rig_free(&r);
        rig_make(&r, fmt, okind, fusion, first);
    } else {
        snap_restore(&ref.s0, &r.all);
    }
    fa_arm_mode(0, false);
    train_step(&r, &s);
    char names[400] = "";
    CHECK_MSG(g_fa.calls == ref.n, "%s: clean steps made %lld and %lld allocations", scen, ref.n,
              g_fa.calls);
    CHECK_MSG(memcmp(&s.loss, &ref.loss1, sizeof s.loss) == 0 &&
                  snap_diff(&ref.s1, &r.all, M_ALL, names, sizeof names) == 0,
              "%s: two clean steps from one state differ: %s", scen, names);
    CHECK_EQ_I(g_fa.live, b.blocks);
    step_stats st;
    memset(&st, 0, sizeof st);
    st.n = ref.n;
    const long long stride = k_stride(ref.n, STEP_ALL_K);
    const long long sstride = k_stride(ref.n, STEP_STICKY);
    for (int sticky = 0; sticky < 2; sticky++)
        for (long long k = 1; k <= ref.n; k += sticky ? sstride : stride) {
            if (first) { /* a fresh model, the same state S0 */
                rig_free(&r);
                rig_make(&r, fmt, okind, fusion, first);
                b = base_now();
            }
            run_step_k(scen, &r, &ref, b, k, sticky, &st);
        }
    printf("%s: N = %lld allocations per step; %lld single (stride %lld) + %lld sticky (stride "
           "%lld) runs; %lld failed, %lld absorbed; failing call:",
           scen, st.n, st.single_runs, stride, st.sticky_runs, sstride, st.failed, st.absorbed);
    for (int p = 1; p <= PH_SCOPE_END; p++)
        if (st.by_phase[p]) printf(" %s %lld", PH_NAME[p], st.by_phase[p]);
    printf("\n");
    CHECK(st.failed > 0);
    snap_free(&ref.s0);
    snap_free(&ref.s1);
    rig_free(&r);
    CHECK_MSG(g_fa.live == b_outer.blocks && mft_live_tensors() == b_outer.tensors &&
                  mft_live_storages() == b_outer.storages,
              "%s: model freed but %lld blocks / %lld tensors remain", scen,
              g_fa.live - b_outer.blocks, (long long)(mft_live_tensors() - b_outer.tensors));
}

static void test_train_step(void) {
    mft_alloc_cache_set_limit(0);
    fa_install();
    step_scenario(MFT_CHANNELS_LAST, OPT_SGD, true, false);
    step_scenario(MFT_CHANNELS_LAST, OPT_ADAM, true, false);
    step_scenario(MFT_CONTIGUOUS, OPT_SGD, false, false);
    step_scenario(MFT_CONTIGUOUS, OPT_ADAM, true, false);
    step_scenario(MFT_CHANNELS_LAST, OPT_SGD, true, true);
    step_scenario(MFT_CHANNELS_LAST, OPT_ADAM, true, true);
    flush_problems();
    mft_set_allocator(NULL);
}

/* ------------------------------------------------------------------ 2. constructors */
/* Each maker builds what the constructor needs with injection off, then
 * arms the injector (arm_now) right before the call under test. */
static long long g_arm_k = 0;
static bool g_arm_sticky = false;
static mft_module *g_ctor_model = NULL; /* parameters for the optimisers */

static void arm_now(void) { fa_arm_mode(g_arm_k, g_arm_sticky); }

static void *mk_conv2d(void) {
    arm_now();
    return mft_nn_conv2d(4, 6, K3, NULL, P1, NULL, 2, true, 3);
}
static void *mk_conv2d_nobias(void) {
    arm_now();
    return mft_nn_conv2d(3, 5, K3, K2, NULL, NULL, 1, false, 4);
}
static void *mk_linear(void) {
    arm_now();
    return mft_nn_linear(12, 7, true, 5);
}
static void *mk_linear_nobias(void) {
    arm_now();
    return mft_nn_linear(12, 7, false, 6);
}
static void *mk_batch_norm(void) {
    arm_now();
    return mft_nn_batch_norm2d(6, 1e-5, 0.1);
}
static void *mk_group_norm(void) {
    arm_now();
    return mft_nn_group_norm(2, 6, 1e-5);
}
static void *mk_layer_norm(void) {
    static const int64_t shape[2] = {4, 5};
    arm_now();
    return mft_nn_layer_norm(2, shape, 1e-5);
}
static void *mk_relu(void) {
    arm_now();
    return mft_nn_relu();
}
static void *mk_max_pool(void) {
    arm_now();
    return mft_nn_max_pool2d(K2, NULL);
}
static void *mk_flatten(void) {
    arm_now();
    return mft_nn_flatten(1, -1);
}
static void *mk_dropout(void) {
    arm_now();
    return mft_nn_dropout(0.25, 9);
}
static void *mk_sequential(void) {
    mft_module *l[4] = {mft_nn_conv2d(3, 4, K3, NULL, P1, NULL, 1, true, 1),
                       mft_nn_batch_norm2d(4, 1e-5, 0.1), mft_nn_relu(),
                       mft_nn_linear(4, 2, true, 2)};
    arm_now();
    return mft_nn_sequential(4, l);
}
static void *mk_small_cnn(void) { /* the sequential of the training model */
    mft_module *l[8];
    small_cnn_layers(l, 11);
    arm_now();
    return mft_nn_sequential(8, l);
}
static void *mk_sgd(void) {
    mft_tensor *ps[MAXT];
    int np = mft_module_parameters(g_ctor_model, ps, NULL, MAXT);
    arm_now();
    return mft_sgd_new(np, ps, &(mft_sgd_opts){0.01, 0.9, 0.0, 1e-4, true});
}
static void *mk_sgd_plain(void) {
    mft_tensor *ps[MAXT];
    int np = mft_module_parameters(g_ctor_model, ps, NULL, MAXT);
    arm_now();
    return mft_sgd_new(np, ps, &(mft_sgd_opts){0.01, 0.0, 0.0, 0.0, false});
}
static void *mk_adam(void) {
    mft_tensor *ps[MAXT];
    int np = mft_module_parameters(g_ctor_model, ps, NULL, MAXT);
    arm_now();
    return mft_adam_new(np, ps, &(mft_adam_opts){1e-3, 0.9, 0.999, 1e-8, 0.0});
}
static void *mk_adamw(void) {
    mft_tensor *ps[MAXT];
    int np = mft_module_parameters(g_ctor_model, ps, NULL, MAXT);
    arm_now();
    return mft_adamw_new(np, ps, &(mft_adam_opts){1e-3, 0.9, 0.999, 1e-8, 1e-2});
}

typedef struct ctor_case {
    const char *fn; /* the constructor under test */
    bool opt;
    void *(*make)(void);
} ctor_case;

static const ctor_case CTORS[] = {
    {"mft_nn_conv2d", false, mk_conv2d},
    {"mft_nn_conv2d (no bias)", false, mk_conv2d_nobias},
    {"mft_nn_linear", false, mk_linear},
    {"mft_nn_linear (no bias)", false, mk_linear_nobias},
    {"mft_nn_batch_norm2d", false, mk_batch_norm},
    {"mft_nn_group_norm", false, mk_group_norm},
    {"mft_nn_layer_norm", false, mk_layer_norm},
    {"mft_nn_relu", false, mk_relu},
    {"mft_nn_max_pool2d", false, mk_max_pool},
    {"mft_nn_flatten", false, mk_flatten},
    {"mft_nn_dropout", false, mk_dropout},
    {"mft_nn_sequential", false, mk_sequential},
    {"mft_nn_sequential (small cnn)", false, mk_small_cnn},
    {"mft_sgd_new (nesterov)", true, mk_sgd},
    {"mft_sgd_new (no momentum)", true, mk_sgd_plain},
    {"mft_adam_new", true, mk_adam},
    {"mft_adamw_new", true, mk_adamw},
};

static void obj_free(const ctor_case *c, void *o) {
    if (c->opt)
        mft_optimizer_free(o);
    else
        mft_module_free(o);
}

/* Digest of an object's tensors (values, strides, names) and description. */
static uint64_t obj_digest(const ctor_case *c, void *o) {
    tlist l;
    l.n = 0;
    if (c->opt) {
        mft_tensor *ts[MAXT];
        const char *nm[MAXT];
        int ns = mft_optimizer_state(o, ts, nm, MAXT);
        for (int i = 0; i < ns && i < MAXT; i++) tlist_add(&l, ts[i], "", nm[i], T_OPT);
    } else {
        tlist_of(&l, o, NULL);
    }
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < l.n; i++) {
        const int nd = mft_tensor_ndim(l.t[i]);
        h = (h ^ mft_tensor_hash(l.t[i])) * 0x100000001B3ull;
        for (int d = 0; d < nd; d++)
            h = (h ^ (uint64_t)mft_tensor_strides(l.t[i])[d]) * 0x100000001B3ull;
        for (const char *p = l.name[i]; *p; p++)
            h = (h ^ (uint64_t)(unsigned char)*p) * 0x100000001B3ull;
    }
    if (!c->opt) {
        char text[2048];
        mft_module_describe(o, text, sizeof text);
        for (const char *p = text; *p; p++)
            h = (h ^ (uint64_t)(unsigned char)*p) * 0x100000001B3ull;
    }
    return h;
}

static void ctor_scenario(const ctor_case *c, long long *total_runs) {
    char scen[96];
    snprintf(scen, sizeof scen, "ctor %s", c->fn);
    char fname[64];
    snprintf(fname, sizeof fname, "%s", c->fn);
    char *sp = strchr(fname, ' ');
    if (sp) *sp = '\0';
    const baseline b = base_now();
    g_arm_k = 0;
    g_arm_sticky = false;
    mft_clear_error();
    void *o = c->make();
    const long long n = g_fa.calls;
    CHECK_MSG(o != NULL, "%s: clean construction failed: %s", scen, mft_last_error_message());
    if (!o) return;
    const uint64_t clean = obj_digest(c, o);
    obj_free(c, o);
    CHECK_MSG(g_fa.live == b.blocks, "%s: clean construction leaks", scen);
    CHECK_MSG(n >= 1, "%s: no allocation", scen);
    for (int sticky = 0; sticky < 2; sticky++)
        for (long long k = 1; k <= n; k++) {
            g_arm_k = k;
            g_arm_sticky = sticky;
            mft_clear_error();
            o = c->make();
            const long long injected = g_fa.injected;
            const mft_status last = mft_last_error();
            char msg[512];
            snprintf(msg, sizeof msg, "%s", mft_last_error_message());
            fa_arm_mode(0, false);
            (*total_runs)++;
            if (!injected) {
                note(scen, k, sticky, "allocation %lld never happened", k);
            } else if (o) {
                if (obj_digest(c, o) != clean)
                    note(scen, k, sticky, "absorbed failure built a different object");
            } else {
                check_error(scen, k, sticky, fname, last, last, msg);
            }
            obj_free(c, o);
            check_leaks(scen, k, sticky, b);
            check_no_open_state(scen, k, sticky);
        }
    g_arm_k = 0;
    g_arm_sticky = false;
    printf("%s: N = %lld, %lld single + %lld sticky runs\n", scen, n, n, n);
}

static const ctor_case LAYER_DIGEST = {"layer", false, NULL}; /* obj_digest of a layer */

/* mft_module_to_format: fails with no parameter changed (values and
 * strides), or succeeds exactly as the clean run. */
static void to_format_scenario(mft_format fmt, long long *total_runs) {
    const char *scen = fmt == MFT_CHANNELS_LAST ? "mft_module_to_format nchw->nhwc"
                                                : "mft_module_to_format nhwc->nchw";
    const baseline b = base_now();
    mft_module *m = small_cnn(21);
    if (fmt == MFT_CONTIGUOUS) mft_module_to_format(m, MFT_CHANNELS_LAST);
    tlist l;
    tlist_of(&l, m, NULL);
    snap s0;
    snap_take(&s0, &l);
    int64_t strides0[MAXT][MFT_MAX_DIMS];
    for (int i = 0; i < l.n; i++)
        memcpy(strides0[i], mft_tensor_strides(l.t[i]),
               (size_t)mft_tensor_ndim(l.t[i]) * sizeof(int64_t));
    fa_arm_mode(0, false);
    CHECK(mft_module_to_format(m, fmt) == MFT_OK);
    const long long n = g_fa.calls;
    const uint64_t clean = obj_digest(&LAYER_DIGEST, m);
    mft_module_free(m);
    CHECK(n >= 1);
    for (int sticky = 0; sticky < 2; sticky++)
        for (long long k = 1; k <= n; k++) {
            m = small_cnn(21);
            if (fmt == MFT_CONTIGUOUS) mft_module_to_format(m, MFT_CHANNELS_LAST);
            tlist_of(&l, m, NULL);
            mft_clear_error();
            fa_arm_mode(k, sticky);
            mft_status st = mft_module_to_format(m, fmt);
            const long long injected = g_fa.injected;
            fa_arm_mode(0, false);
            (*total_runs)++;
            if (!injected) {
                note(scen, k, sticky, "allocation %lld never happened", k);
            } else if (st == MFT_OK) {
                if (obj_digest(&LAYER_DIGEST, m) != clean)
                    note(scen, k, sticky, "absorbed failure gave a different model");
            } else {
                check_error(scen, k, sticky, "mft_module_to_format", st, mft_last_error(),
                            mft_last_error_message());
                char names[400];
                if (snap_diff(&s0, &l, M_ALL, names, sizeof names))
                    note(scen, k, sticky, "failed but changed the values of " DETAIL "%s", names);
                for (int i = 0; i < l.n; i++)
                    if (memcmp(strides0[i], mft_tensor_strides(l.t[i]),
                               (size_t)mft_tensor_ndim(l.t[i]) * sizeof(int64_t)))
                        note(scen, k, sticky, "failed but changed the strides of '%s'", l.name[i]);
            }
            mft_module_free(m);
            check_leaks(scen, k, sticky, b);
        }
    snap_free(&s0);
    printf("%s: N = %lld, %lld single + %lld sticky runs\n", scen, n, n, n);
}

/* Invalid arguments are refused before anything is allocated: with every
 * allocation failing, the validation error (not NOMEM) comes back. */
static void invalid_args_scenario(void) {
    mft_tensor *ps[MAXT];
    int np = mft_module_parameters(g_ctor_model, ps, NULL, MAXT);
    mft_tensor *ints = mft_zeros(1, (const int64_t[]){3}, MFT_I64, MFT_CONTIGUOUS);
    mft_tensor *mixed[2] = {ps[0], ints};
    static const int64_t bad_shape[2] = {4, 0};
    const baseline b = base_now();
    for (int i = 0; i < 12; i++) {
        fa_arm_mode(1, true);
        mft_clear_error();
        const char *what = "";
        mft_status want = MFT_ERR_INVALID;
        void *o = NULL;
        bool opt = false;
        switch (i) {
        case 0:
            what = "mft_nn_conv2d";
            o = mft_nn_conv2d(4, 6, K3, NULL, NULL, NULL, 4, true, 1);
            break;
        case 1:
            what = "mft_nn_conv2d";
            o = mft_nn_conv2d(4, 6, K3, (const int64_t[]){0, 1}, NULL, NULL, 1, true, 1);
            break;
        case 2:
            what = "mft_nn_linear";
            o = mft_nn_linear(5, 0, true, 1);
            break;
        case 3:
            what = "mft_nn_batch_norm2d";
            o = mft_nn_batch_norm2d(4, 1e-5, 1.5);
            break;
        case 4:
            what = "mft_nn_group_norm";
            o = mft_nn_group_norm(4, 6, 1e-5);
            break;
        case 5:
            what = "mft_nn_layer_norm";
            o = mft_nn_layer_norm(2, bad_shape, 1e-5);
            break;
        case 6:
            what = "mft_nn_max_pool2d";
            o = mft_nn_max_pool2d((const int64_t[]){0, 2}, NULL);
            break;
        case 7:
            what = "mft_nn_dropout";
            o = mft_nn_dropout(1.5, 1);
            break;
        case 8:
            what = "mft_sgd_new";
            opt = true;
            o = mft_sgd_new(np, ps, &(mft_sgd_opts){-1, 0, 0, 0, false});
            break;
        case 9:
            what = "mft_adam_new";
            opt = true;
            o = mft_adam_new(np, ps, &(mft_adam_opts){1e-3, 1.0, 0.999, 1e-8, 0});
            break;
        case 10:
            what = "mft_adamw_new";
            opt = true;
            want = MFT_ERR_DTYPE;
            o = mft_adamw_new(2, mixed, &(mft_adam_opts){1e-3, 0.9, 0.999, 1e-8, 0});
            break;
        case 11:
            what = "mft_sgd_new";
            opt = true;
            o = mft_sgd_new(0, ps, &(mft_sgd_opts){0.1, 0, 0, 0, false});
            break;
        }
        const long long calls = g_fa.calls;
        fa_arm_mode(0, false);
        if (o || mft_last_error() != want || calls != 0 ||
            strncmp(mft_last_error_message(), what, strlen(what)) != 0)
            note("invalid arguments", i + 1, true,
                 "case %d (%s): %s, status %s (want %s) after %lld allocations: '%s'", i, what,
                 o ? "built an object" : "NULL", mft_status_str(mft_last_error()),
                 mft_status_str(want), calls, mft_last_error_message());
        if (opt)
            mft_optimizer_free(o);
        else
            mft_module_free(o);
        check_leaks("invalid arguments", i + 1, true, b);
    }
    mft_clear_error();
    mft_tensor_release(ints);
}

static void test_constructors(void) {
    mft_alloc_cache_set_limit(0);
    fa_install();
    g_ctor_model = small_cnn(31);
    CHECK(g_ctor_model != NULL);
    long long runs = 0;
    for (size_t i = 0; i < sizeof CTORS / sizeof CTORS[0]; i++) ctor_scenario(&CTORS[i], &runs);
    to_format_scenario(MFT_CHANNELS_LAST, &runs);
    to_format_scenario(MFT_CONTIGUOUS, &runs);
    invalid_args_scenario();
    printf("constructors: %lld injected runs\n", runs);
    mft_module_free(g_ctor_model);
    g_ctor_model = NULL;
    flush_problems();
    mft_set_allocator(NULL);
}

/* ------------------------------------------------------------------ 3. checkpoints */
static bool write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

static bool exists(const char *p) { return access(p, F_OK) == 0; }

/* path holds exactly want[0..n) (want NULL: path is absent) */
static bool file_is(const char *path, const unsigned char *want, size_t n) {
    if (!want) return !exists(path);
    size_t got = 0;
    unsigned char *b = tu_read_file(path, &got);
    bool same = b && got == n && memcmp(b, want, n) == 0;
    free(b);
    return same;
}

static void ckpt_scenario(mft_format fmt, long long *total_runs) {
    char scen[64];
    const char *fmtname = fmt == MFT_CHANNELS_LAST ? "nhwc" : "nchw";
    char path[400], tmp[420];
    snprintf(path, sizeof path, "%s/model_%s.ckpt", g_tmpdir, fmtname);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    const baseline b_outer = base_now();
    rig r;
    bool made = rig_make(&r, fmt, OPT_SGD, true, false);
    step_res s;
    train_step(&r, &s);
    CHECK_MSG(made && s.ph == PH_OK, "checkpoint %s: setup failed: %s", fmtname, s.msg);
    const char *names[MAXT];
    for (int i = 0; i < r.all.n; i++) names[i] = r.all.name[i];
    const int n = r.all.n;
    const mft_tensor *const *cts = (const mft_tensor *const *)r.all.t;
    /* S0: the state now (file "old"); S1: one step later (file "ref") */
    snap s0, s1;
    snap_take(&s0, &r.all);
    remove(path);
    CHECK(mft_save_tensors(path, n, names, cts) == MFT_OK);
    size_t old_n = 0, ref_n = 0;
    unsigned char *old = tu_read_file(path, &old_n);
    train_step(&r, &s);
    CHECK(s.ph == PH_OK);
    snap_take(&s1, &r.all);
    const baseline b = base_now();
    remove(path);
    fa_arm_mode(0, false);
    CHECK(mft_save_tensors(path, n, names, cts) == MFT_OK);
    const long long n_save = g_fa.calls;
    unsigned char *ref = tu_read_file(path, &ref_n);
    CHECK(old && ref && (old_n != ref_n || memcmp(old, ref, ref_n) != 0));
    CHECK_EQ_I(g_fa.live, b.blocks);

    /* save: to a new file, and over the old checkpoint */
    for (int over = 0; over < 2; over++) {
        snprintf(scen, sizeof scen, "save %s (%s)", fmtname, over ? "overwrite" : "new file");
        for (int sticky = 0; sticky < 2; sticky++)
            for (long long k = 1; k <= n_save; k++) {
                remove(tmp);
                if (over)
                    write_bytes(path, old, old_n);
                else
                    remove(path);
                mft_clear_error();
                fa_arm_mode(k, sticky);
                mft_status st = mft_save_tensors(path, n, names, cts);
                const long long injected = g_fa.injected;
                fa_arm_mode(0, false);
                (*total_runs)++;
                if (!injected) {
                    note(scen, k, sticky, "allocation %lld never happened", k);
                } else if (st == MFT_OK) {
                    if (!file_is(path, ref, ref_n))
                        note(scen, k, sticky, "absorbed failure wrote a different file");
                } else {
                    check_error(scen, k, sticky, "mft_save_tensors", st, mft_last_error(),
                                mft_last_error_message());
                    if (!file_is(path, over ? old : NULL, old_n))
                        note(scen, k, sticky, "failed save %s",
                             over ? "changed the old file" : "left a file behind");
                    /* the library still saves the same file */
                    if (mft_save_tensors(path, n, names, cts) != MFT_OK ||
                        !file_is(path, ref, ref_n))
                        note(scen, k, sticky, "clean save after the failure: %s",
                             mft_last_error_message());
                }
                if (exists(tmp)) note(scen, k, sticky, "'<path>.tmp' left behind");
                if (snap_diff(&s1, &r.all, M_ALL, NULL, 0))
                    note(scen, k, sticky, "mft_save_tensors changed a tensor");
                check_leaks(scen, k, sticky, b);
            }
        printf("%s: N = %lld, %lld single + %lld sticky runs\n", scen, n_save, n_save, n_save);
    }
    remove(tmp);
    write_bytes(path, ref, ref_n);

    /* load_into: targets at S0, the file holds S1 */
    snprintf(scen, sizeof scen, "load_into %s", fmtname);
    snap_restore(&s0, &r.all);
    fa_arm_mode(0, false);
    CHECK(mft_load_tensors_into(path, n, names, r.all.t) == MFT_OK);
    const long long n_into = g_fa.calls;
    CHECK(snap_diff(&s1, &r.all, M_ALL, NULL, 0) == 0);
    CHECK_EQ_I(g_fa.live, b.blocks);
    for (int sticky = 0; sticky < 2; sticky++)
        for (long long k = 1; k <= n_into; k++) {
            char chg[400];
            snap_restore(&s0, &r.all);
            mft_clear_error();
            fa_arm_mode(k, sticky);
            mft_status st = mft_load_tensors_into(path, n, names, r.all.t);
            const long long injected = g_fa.injected;
            fa_arm_mode(0, false);
            (*total_runs)++;
            if (!injected) {
                note(scen, k, sticky, "allocation %lld never happened", k);
            } else if (st == MFT_OK) {
                if (snap_diff(&s1, &r.all, M_ALL, chg, sizeof chg))
                    note(scen, k, sticky, "absorbed failure loaded different values: " DETAIL "%s",
                         chg);
            } else {
                check_error(scen, k, sticky, "mft_load_tensors_into", st, mft_last_error(),
                            mft_last_error_message());
                if (snap_diff(&s0, &r.all, M_ALL, chg, sizeof chg))
                    note(scen, k, sticky, "failed load changed " DETAIL "%s", chg);
                if (mft_load_tensors_into(path, n, names, r.all.t) != MFT_OK ||
                    snap_diff(&s1, &r.all, M_ALL, NULL, 0))
                    note(scen, k, sticky, "clean load after the failure: %s",
                         mft_last_error_message());
            }
            if (!file_is(path, ref, ref_n)) note(scen, k, sticky, "load changed the file");
            check_leaks(scen, k, sticky, b);
        }
    printf("%s: N = %lld, %lld single + %lld sticky runs\n", scen, n_into, n_into, n_into);

    /* load: a list of new tensors equal to S1 */
    snprintf(scen, sizeof scen, "load %s", fmtname);
    int ln = -1;
    char **lnames = NULL;
    mft_tensor **lts = NULL;
    fa_arm_mode(0, false);
    CHECK(mft_load_tensors(path, &ln, &lnames, &lts) == MFT_OK);
    const long long n_load = g_fa.calls;
    CHECK_EQ_I(ln, n);
    mft_checkpoint_free_list(ln, lnames, lts);
    CHECK_EQ_I(g_fa.live, b.blocks);
    for (int sticky = 0; sticky < 2; sticky++)
        for (long long k = 1; k <= n_load; k++) {
            mft_clear_error();
            ln = -1;
            lnames = (char **)1;
            lts = (mft_tensor **)1;
            fa_arm_mode(k, sticky);
            mft_status st = mft_load_tensors(path, &ln, &lnames, &lts);
            const long long injected = g_fa.injected;
            fa_arm_mode(0, false);
            (*total_runs)++;
            if (!injected) {
                note(scen, k, sticky, "allocation %lld never happened", k);
            } else if (st == MFT_OK) {
                /* every entry, in file (= save) order, equals S1 */
                bool same = ln == n;
                for (int i = 0; same && i < n; i++) {
                    same = !strcmp(lnames[i], names[i]) && t_bytes(lts[i]) == s1.len[i];
                    unsigned char *v = same ? malloc(s1.len[i] + 1) : NULL;
                    if (v) t_walk(lts[i], v, false);
                    same = same && v && !memcmp(v, s1.b[i], s1.len[i]);
                    free(v);
                }
                if (!same) note(scen, k, sticky, "absorbed failure loaded different tensors");
                mft_checkpoint_free_list(ln, lnames, lts);
            } else {
                check_error(scen, k, sticky, "mft_load_tensors", st, mft_last_error(),
                            mft_last_error_message());
                if (ln != 0 || lnames || lts)
                    note(scen, k, sticky, "failed load left n = %d, names %s, tensors %s", ln,
                         lnames ? "set" : "NULL", lts ? "set" : "NULL");
            }
            check_leaks(scen, k, sticky, b);
        }
    printf("%s: N = %lld, %lld single + %lld sticky runs\n", scen, n_load, n_load, n_load);

    remove(path);
    free(old);
    free(ref);
    snap_free(&s0);
    snap_free(&s1);
    rig_free(&r);
    CHECK_MSG(g_fa.live == b_outer.blocks && mft_live_tensors() == b_outer.tensors,
              "checkpoint %s: model freed but %lld blocks remain", fmtname,
              g_fa.live - b_outer.blocks);
}

static void test_checkpoints(void) {
    mft_alloc_cache_set_limit(0);
    fa_install();
    long long runs = 0;
    ckpt_scenario(MFT_CHANNELS_LAST, &runs);
    ckpt_scenario(MFT_CONTIGUOUS, &runs);
    printf("checkpoints: %lld injected runs\n", runs);
    flush_problems();
    mft_set_allocator(NULL);
}

/* argv[1] (optional) runs one part: "ctor", "ckpt" or "step". */
int main(int argc, char **argv) {
    const char *only = argc > 1 ? argv[1] : "";
    snprintf(g_tmpdir, sizeof g_tmpdir, "%s/mft_test_afail.XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    pub_scan(MFT_TEST_DATA_DIR "/../../include/mft", "mft.h");
    pub_add_macro_names();
    CHECK_MSG(g_npub > 300 && pub_has("mft_module_forward", 18) && pub_has("mft_backward", 12) &&
                  pub_has("mft_relu", 8) && pub_has("mft_add_out", 11),
              "public function list from include/mft: %d names", g_npub);
    if (!*only || !strcmp(only, "ctor")) RUN(test_constructors);
    if (!*only || !strcmp(only, "ckpt")) RUN(test_checkpoints);
    if (!*only || !strcmp(only, "step")) RUN(test_train_step);
    rmdir(g_tmpdir);
    TEST_MAIN_END();
}
