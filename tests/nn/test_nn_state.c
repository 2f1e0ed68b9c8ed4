/* tests/nn/test_nn_state.c — model checkpoints (mft/state.h, nn/state.c):
 *   - round trip of a small CNN (conv, batch_norm, relu, pool, flatten,
 *     linear) with SGD-momentum and with Adam state: the file holds exactly
 *     the entries the headers document (names written out here by hand,
 *     sizes, dtypes), a freshly built model and optimiser (another seed, so
 *     every value differs) loaded from it equal the saved ones bit for bit
 *     (values, learning rate, step counts), and one more training step after
 *     the reload gives bit-identical parameters and state to the model that
 *     never stopped; a file with the optimiser loads into a model alone;
 *   - layouts: an NCHW checkpoint loaded into a channels_last model leaves
 *     its weights channels_last (and the reverse), with the logical values of
 *     the file; the file records each weight in its saved layout; an
 *     NCHW16C model's blocked conv weights (Ohwi16o, OIhw16i16o) and their
 *     Adam state load back in their blocks, pads zero, values the saved ones;
 *   - refusals, each naming mft_module_load, the file and the tensor, and
 *     leaving every parameter, buffer, optimiser state and the learning rate
 *     bit-identical (values, strides, data pointer, version): wrong sizes,
 *     wrong dtype, a missing tensor (last in the file order too), an extra
 *     tensor, an optimiser of another kind, a file without the optimiser, a
 *     bad learning rate, a truncated file, a non-existent path; NULL
 *     arguments of both calls; an unwritable save path;
 *   - allocation failures (tests/fail_alloc.h) at every allocation of a load,
 *     single and sticky: MFT_ERR_NOMEM naming mft_module_load, nothing
 *     changed, nothing leaked; and of a save: no file left behind;
 *   - a load inside an open scope and a recording tape;
 *   - no leaks (TEST_MAIN_END). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <stdint.h>
#include <unistd.h>
#include "fail_alloc.h"
#include "harness.h"
#include "mft/io.h"
#include "mft/nn.h"
#include "mft/state.h"

#define MAXT 64
#define NB 4 /* batch */

static char g_dir[256];

static void tmp_path(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", g_dir, name);
}

/* ------------------------------------------------------------------ the model
 * conv2d(2 -> w, 3x3, padding 1) [0], batch_norm2d(w) [1], relu [2],
 * max_pool2d 2x2 [3], flatten [4], linear(4w -> 3) [5]; input (NB, 2, 4, 4). */
static mft_module *small_model(int64_t w, mft_format fmt, uint64_t seed) {
    mft_module *l[6] = {
        mft_nn_conv2d(2, w, (const int64_t[]){3, 3}, NULL, (const int64_t[]){1, 1}, NULL, 1, true,
                      seed),
        mft_nn_batch_norm2d(w, 1e-5, 0.1),
        mft_nn_relu(),
        mft_nn_max_pool2d((const int64_t[]){2, 2}, NULL),
        mft_nn_flatten(1, 3),
        mft_nn_linear(4 * w, 3, true, seed + 1)};
    for (int i = 0; i < 6; i++)
        if (!l[i]) {
            for (int j = 0; j < 6; j++) mft_module_free(l[j]);
            return NULL;
        }
    mft_module *m = mft_nn_sequential(6, l);
    if (m && fmt == MFT_CHANNELS_LAST && mft_module_to_format(m, fmt) != MFT_OK) {
        mft_module_free(m);
        return NULL;
    }
    return m;
}

typedef enum { OPT_NONE, OPT_SGD, OPT_ADAM } opt_kind;

typedef struct rig {
    mft_module *m;
    mft_optimizer *o;
    mft_format fmt;
} rig;

static bool rig_make(rig *r, int64_t w, mft_format fmt, opt_kind k, uint64_t seed) {
    r->fmt = fmt;
    r->o = NULL;
    r->m = small_model(w, fmt, seed);
    if (!r->m) return false;
    if (k == OPT_NONE) return true;
    mft_tensor *p[MAXT];
    int np = mft_module_parameters(r->m, p, NULL, MAXT);
    r->o = k == OPT_SGD ? mft_sgd_new(np, p, &(mft_sgd_opts){0.05, 0.9, 0.0, 1e-4, false})
                        : mft_adam_new(np, p, &(mft_adam_opts){1e-2, 0.9, 0.999, 1e-8, 0.0});
    return r->o != NULL;
}

static void rig_free(rig *r) {
    mft_optimizer_free(r->o);
    mft_module_free(r->m);
    r->o = NULL;
    r->m = NULL;
}

/* One training step on batch number k (the same k gives the same batch). */
static mft_status train_step(rig *r, int k) {
    mft_scope_begin();
    mft_tensor *x = mft_randn(4, (const int64_t[]){NB, 2, 4, 4}, MFT_F32, r->fmt, 100 + (uint64_t)k);
    mft_tensor *y = mft_zeros(1, (const int64_t[]){NB}, MFT_I64, MFT_CONTIGUOUS);
    for (int64_t i = 0; i < NB && y; i++) mft_tensor_set(y, &i, (double)((i + k) % 3));
    mft_tape_begin();
    mft_tensor *logits = mft_module_forward(r->m, x);
    mft_tensor *loss = mft_cross_entropy(logits, y, NULL, -100, 0.0, MFT_REDUCTION_MEAN);
    mft_status st = loss ? mft_backward(loss, NULL) : MFT_ERR_NULL;
    mft_tape_end();
    if (st == MFT_OK) st = mft_optimizer_step(r->o);
    mft_optimizer_zero_grad(r->o);
    mft_scope_end();
    return st;
}

/* ------------------------------------------------------------------ snapshots
 * Everything a load could change, read through the public accessors: per
 * tensor (parameters, buffers, optimiser state, in listing order) the object,
 * its data pointer, version, sizes, strides, dtype, format tag and every
 * value in logical order (as the bits of a double), plus the learning rate. */
typedef struct snap_t {
    const mft_tensor *obj;
    void *data;
    int64_t version;
    int ndim;
    int64_t sizes[8], strides[8];
    mft_dtype dtype;
    mft_format tag;
    int64_t n;
    double *v;
} snap_t;

typedef struct snap {
    int n;
    snap_t t[MAXT];
    double lr;
} snap;

static int rig_tensors(const rig *r, mft_tensor **t, const char **names) {
    int n = mft_module_parameters(r->m, t, names, MAXT);
    n += mft_module_buffers(r->m, t + n, names ? names + n : NULL, MAXT - n);
    if (r->o) n += mft_optimizer_state(r->o, t + n, names ? names + n : NULL, MAXT - n);
    return n;
}

/* Logical values of t as doubles (the caller frees). */
static double *values(const mft_tensor *t, int64_t *count) {
    const int nd = mft_tensor_ndim(t);
    const int64_t n = mft_tensor_numel(t), *sz = mft_tensor_sizes(t);
    double *v = malloc(sizeof *v * (size_t)(n > 0 ? n : 1));
    int64_t idx[8] = {0};
    for (int64_t i = 0; i < n; i++) {
        v[i] = mft_tensor_get(t, idx);
        for (int d = nd - 1; d >= 0; d--) {
            if (++idx[d] < sz[d]) break;
            idx[d] = 0;
        }
    }
    *count = n;
    return v;
}

static void snap_take(snap *s, const rig *r) {
    mft_tensor *t[MAXT];
    s->n = rig_tensors(r, t, NULL);
    for (int i = 0; i < s->n; i++) {
        snap_t *e = &s->t[i];
        e->obj = t[i];
        e->data = mft_tensor_data(t[i]);
        e->version = mft_tensor_version(t[i]);
        e->ndim = mft_tensor_ndim(t[i]);
        memcpy(e->sizes, mft_tensor_sizes(t[i]), sizeof(int64_t) * (size_t)e->ndim);
        memcpy(e->strides, mft_tensor_strides(t[i]), sizeof(int64_t) * (size_t)e->ndim);
        e->dtype = mft_tensor_dtype(t[i]);
        e->tag = mft_tensor_format(t[i]);
        e->v = values(t[i], &e->n);
    }
    s->lr = r->o ? mft_optimizer_lr(r->o) : 0.0;
}

static void snap_free(snap *s) {
    for (int i = 0; i < s->n; i++) free(s->t[i].v);
    s->n = 0;
}

/* Are the values (bit patterns) of a and b the same, tensor by tensor? With
 * whole: also the same objects, data, version, strides and tag. Writes the
 * first difference into why. */
static bool snap_same(const snap *a, const snap *b, bool whole, char *why, size_t len) {
    snprintf(why, len, "%s", "");
    if (a->n != b->n) return snprintf(why, len, "%d vs %d tensors", a->n, b->n), false;
    if (memcmp(&a->lr, &b->lr, sizeof a->lr) != 0)
        return snprintf(why, len, "lr %g vs %g", a->lr, b->lr), false;
    for (int i = 0; i < a->n; i++) {
        const snap_t *x = &a->t[i], *y = &b->t[i];
        if (x->ndim != y->ndim || x->dtype != y->dtype || x->n != y->n ||
            memcmp(x->sizes, y->sizes, sizeof(int64_t) * (size_t)x->ndim) != 0)
            return snprintf(why, len, "tensor %d: sizes or dtype", i), false;
        if (memcmp(x->v, y->v, sizeof(double) * (size_t)x->n) != 0)
            return snprintf(why, len, "tensor %d: values", i), false;
        if (whole && (x->obj != y->obj || x->data != y->data || x->version != y->version ||
                      x->tag != y->tag ||
                      memcmp(x->strides, y->strides, sizeof(int64_t) * (size_t)x->ndim) != 0))
            return snprintf(why, len, "tensor %d: object, data, version, strides or tag", i),
                   false;
    }
    return true;
}

#define CHECK_SNAP(a, b, whole)                                         \
    do {                                                                \
        char why_[128];                                                 \
        CHECK_MSG(snap_same((a), (b), (whole), why_, sizeof why_), "%s", why_); \
    } while (0)

/* ------------------------------------------------------------------ helpers */
/* The file's entries, sizes and dtypes, through mft_load_tensors. */
typedef struct listing {
    int n;
    char **names;
    mft_tensor **t;
} listing;

static int list_find(const listing *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], name)) return i;
    return -1;
}

/* Writes the file's entries with one dropped (drop, may be NULL), one
 * replaced (replace_name by replace_t) and one added (add_name, add_t). */
static mft_status rewrite(const char *from, const char *to, const char *drop,
                          const char *replace_name, mft_tensor *replace_t, const char *add_name,
                          mft_tensor *add_t) {
    listing l;
    mft_status st = mft_load_tensors(from, &l.n, &l.names, &l.t);
    if (st != MFT_OK) return st;
    const char *nv[MAXT];
    const mft_tensor *tv[MAXT];
    int n = 0;
    for (int i = 0; i < l.n && n < MAXT - 1; i++) {
        if (drop && !strcmp(l.names[i], drop)) continue;
        nv[n] = l.names[i];
        tv[n++] = replace_name && !strcmp(l.names[i], replace_name) ? replace_t : l.t[i];
    }
    if (add_name) {
        nv[n] = add_name;
        tv[n++] = add_t;
    }
    st = mft_save_tensors(to, n, nv, tv);
    mft_checkpoint_free_list(l.n, l.names, l.t);
    return st;
}

static bool file_exists(const char *p) { return access(p, F_OK) == 0; }

/* ------------------------------------------------------------------ round trip */
/* The entry names mft/state.h documents for small_model, written out. */
static const char *const k_model_names[] = {
    "0.weight", "0.bias", "1.weight", "1.bias", "5.weight", "5.bias",
    "1.running_mean", "1.running_var", "1.num_batches_tracked"};
enum { N_MODEL = 9, N_PARAM = 6 };

static void check_file_entries(const char *path, opt_kind k, int64_t w) {
    listing l;
    CHECK(mft_load_tensors(path, &l.n, &l.names, &l.t) == MFT_OK);
    /* model: 9, SGD: step + 6 x (i.step, i.momentum_buffer) + lr = 14, Adam: 1 + 6 x 3 + 1 = 20 */
    const int want = N_MODEL + (k == OPT_SGD ? 14 : k == OPT_ADAM ? 20 : 0);
    CHECK_EQ_I(l.n, want);
    for (int i = 0; i < N_MODEL; i++) {
        int j = list_find(&l, k_model_names[i]);
        CHECK_MSG(j >= 0, "'%s' not in the file", k_model_names[i]);
        if (j < 0) continue;
        const bool i64 = !strcmp(k_model_names[i], "1.num_batches_tracked");
        CHECK(mft_tensor_dtype(l.t[j]) == (i64 ? MFT_I64 : MFT_F32));
    }
    int j = list_find(&l, "0.weight");
    if (j >= 0) {
        CHECK_EQ_I(mft_tensor_ndim(l.t[j]), 4);
        CHECK(mft_tensor_sizes(l.t[j])[0] == w && mft_tensor_sizes(l.t[j])[1] == 2);
    }
    if (k != OPT_NONE) {
        CHECK(list_find(&l, "optimizer.step") >= 0);
        j = list_find(&l, "optimizer.lr");
        CHECK(j >= 0 && mft_tensor_dtype(l.t[j]) == MFT_F64 && mft_tensor_numel(l.t[j]) == 1);
        for (int p = 0; p < N_PARAM; p++) {
            char nm[64];
            snprintf(nm, sizeof nm, "optimizer.%d.step", p);
            CHECK_MSG(list_find(&l, nm) >= 0, "'%s' not in the file", nm);
            snprintf(nm, sizeof nm, "optimizer.%d.%s", p,
                     k == OPT_SGD ? "momentum_buffer" : "exp_avg_sq");
            CHECK_MSG(list_find(&l, nm) >= 0, "'%s' not in the file", nm);
        }
    }
    mft_checkpoint_free_list(l.n, l.names, l.t);
}

static void roundtrip(opt_kind k, mft_format fmt) {
    char path[300];
    tmp_path(path, sizeof path, "roundtrip.mft");
    rig a, b;
    CHECK(rig_make(&a, 4, fmt, k, 7));
    CHECK(rig_make(&b, 4, fmt, k, 99)); /* another initialisation */
    if (!a.o || !b.o) {
        rig_free(&a), rig_free(&b);
        return;
    }
    for (int s = 0; s < 3; s++) CHECK(train_step(&a, s) == MFT_OK);
    CHECK(mft_optimizer_set_lr(a.o, k == OPT_SGD ? 0.03125 : 0.004) == MFT_OK);
    snap sa, sb0, sb;
    snap_take(&sa, &a);
    snap_take(&sb0, &b);
    char why[128];
    CHECK(!snap_same(&sa, &sb0, false, why, sizeof why)); /* the load has work to do */

    CHECK(mft_module_save(path, a.m, a.o) == MFT_OK);
    snap sa2;
    snap_take(&sa2, &a);
    CHECK_SNAP(&sa, &sa2, true); /* saving changes nothing */
    snap_free(&sa2);
    check_file_entries(path, k, 4);

    CHECK(mft_module_load(path, b.m, b.o) == MFT_OK);
    snap_take(&sb, &b);
    CHECK_SNAP(&sa, &sb, false); /* the same values, learning rate, step counts */
    for (int i = 0; i < sb.n; i++) { /* same objects, layouts, storage; versions bumped */
        CHECK(sb.t[i].obj == sb0.t[i].obj && sb.t[i].data == sb0.t[i].data);
        CHECK(sb.t[i].tag == sb0.t[i].tag);
        CHECK(!memcmp(sb.t[i].strides, sb0.t[i].strides, sizeof(int64_t) * (size_t)sb.t[i].ndim));
        CHECK(sb.t[i].version > sb0.t[i].version);
    }
    CHECK(mft_optimizer_lr(b.o) == (k == OPT_SGD ? 0.03125 : 0.004));

    /* training on: the reloaded model follows the one that never stopped */
    for (int s = 3; s < 5; s++) {
        CHECK(train_step(&a, s) == MFT_OK);
        CHECK(train_step(&b, s) == MFT_OK);
    }
    snap sa5, sb5;
    snap_take(&sa5, &a);
    snap_take(&sb5, &b);
    CHECK_SNAP(&sa5, &sb5, false);
    CHECK(!snap_same(&sa, &sa5, false, why, sizeof why)); /* the steps did change something */

    /* the same file into a model alone: the optimiser's entries are skipped */
    mft_module *c = small_model(4, fmt, 5);
    CHECK(c && mft_module_load(path, c, NULL) == MFT_OK);
    rig rc = {c, NULL, fmt};
    snap sc;
    snap_take(&sc, &rc);
    CHECK_EQ_I(sc.n, N_MODEL);
    for (int i = 0; i < sc.n && i < sa.n; i++)
        CHECK(!memcmp(sc.t[i].v, sa.t[i].v, sizeof(double) * (size_t)sc.t[i].n));
    snap_free(&sc);
    mft_module_free(c);

    snap_free(&sa), snap_free(&sb0), snap_free(&sb), snap_free(&sa5), snap_free(&sb5);
    rig_free(&a), rig_free(&b);
    remove(path);
}

static void test_roundtrip_sgd(void) {
    roundtrip(OPT_SGD, MFT_CONTIGUOUS);
    roundtrip(OPT_SGD, MFT_CHANNELS_LAST);
}

static void test_roundtrip_adam(void) {
    roundtrip(OPT_ADAM, MFT_CONTIGUOUS);
    roundtrip(OPT_ADAM, MFT_CHANNELS_LAST);
}

/* A model saved without an optimiser, and the strict rule both ways. */
static void test_model_only(void) {
    char path[300];
    tmp_path(path, sizeof path, "model_only.mft");
    rig a, b;
    CHECK(rig_make(&a, 4, MFT_CONTIGUOUS, OPT_SGD, 3));
    CHECK(rig_make(&b, 4, MFT_CONTIGUOUS, OPT_SGD, 4));
    CHECK(train_step(&a, 0) == MFT_OK);
    CHECK(mft_module_save(path, a.m, NULL) == MFT_OK);
    check_file_entries(path, OPT_NONE, 4);
    snap s0, s1;
    snap_take(&s0, &b);
    /* with an optimiser: its state is missing from the file */
    CHECK(mft_module_load(path, b.m, b.o) == MFT_ERR_INVALID);
    CHECK_ERR(MFT_ERR_INVALID, "mft_module_load: ");
    snap_take(&s1, &b);
    CHECK_SNAP(&s0, &s1, true);
    snap_free(&s1);
    CHECK(mft_module_load(path, b.m, b.o) == MFT_ERR_INVALID);
    const char *msg = mft_last_error_message();
    CHECK_MSG(strstr(msg, path) && strstr(msg, "tensor 'optimizer.step' of the optimizer is missing"),
              "%s", msg);
    CHECK(strstr(msg, "saved without an optimizer") != NULL);
    mft_clear_error();
    /* without: fine */
    CHECK(mft_module_load(path, b.m, NULL) == MFT_OK);
    snap sa, sb;
    rig am = {a.m, NULL, a.fmt}, bm = {b.m, NULL, b.fmt};
    snap_take(&sa, &am);
    snap_take(&sb, &bm);
    CHECK_SNAP(&sa, &sb, false);
    snap_free(&sa), snap_free(&sb), snap_free(&s0);
    rig_free(&a), rig_free(&b);
    remove(path);
}

/* ------------------------------------------------------------------ layouts */
static void layouts(mft_format saved, mft_format target) {
    char path[300];
    tmp_path(path, sizeof path, "layout.mft");
    rig a, b;
    CHECK(rig_make(&a, 4, saved, OPT_SGD, 11));
    CHECK(rig_make(&b, 4, target, OPT_SGD, 12));
    CHECK(train_step(&a, 0) == MFT_OK && train_step(&b, 0) == MFT_OK);
    CHECK(mft_module_save(path, a.m, a.o) == MFT_OK);
    /* the file records the conv weight (and its momentum buffer) in the saved layout */
    listing l;
    CHECK(mft_load_tensors(path, &l.n, &l.names, &l.t) == MFT_OK);
    const char *conv[2] = {"0.weight", "optimizer.0.momentum_buffer"};
    for (int c = 0; c < 2; c++) {
        int j = list_find(&l, conv[c]);
        CHECK(j >= 0 && mft_tensor_is_contiguous(l.t[j], saved));
        CHECK(j >= 0 && !mft_tensor_is_contiguous(l.t[j], saved == MFT_CONTIGUOUS
                                                                ? MFT_CHANNELS_LAST
                                                                : MFT_CONTIGUOUS));
    }
    mft_checkpoint_free_list(l.n, l.names, l.t);

    CHECK(mft_module_load(path, b.m, b.o) == MFT_OK);
    mft_tensor *t[MAXT];
    const char *nm[MAXT];
    int n = rig_tensors(&b, t, nm);
    for (int i = 0; i < n; i++)
        if (!strcmp(nm[i], "0.weight") || !strcmp(nm[i], "0.momentum_buffer")) {
            CHECK_MSG(mft_tensor_is_contiguous(t[i], target) &&
                          mft_tensor_format(t[i]) == target,
                      "%s lost its layout", nm[i]);
        }
    snap sa, sb;
    snap_take(&sa, &a);
    snap_take(&sb, &b);
    CHECK_SNAP(&sa, &sb, false); /* logical values equal */
    snap_free(&sa), snap_free(&sb);
    rig_free(&a), rig_free(&b);
    remove(path);
}

static void test_layout_kept(void) {
    layouts(MFT_CONTIGUOUS, MFT_CHANNELS_LAST);
    layouts(MFT_CHANNELS_LAST, MFT_CONTIGUOUS);
}

/* An NCHW16C model (conv weights Ohwi16o and OIhw16i16o) trained a step with
 * Adam, saved and loaded into another: the weights and their Adam state keep
 * their blocked layouts and zero pads and take the saved values. */
static mft_module *blocked_model(uint64_t seed) {
    return mft_nn_fashion_cnn(&(mft_fashion_cnn_config){
        .in_channels = 3, .image_size = 8, .width = 16, .format = MFT_NCHW16C, .seed = seed});
}

static void test_blocked_weights_kept(void) {
    char path[300];
    tmp_path(path, sizeof path, "blocked.mft");
    const mft_adam_opts ao = {0.01, 0.9, 0.999, 1e-8, 0.0};
    mft_module *a = blocked_model(1), *b = blocked_model(2);
    mft_tensor *pa[16], *pb[16];
    const int na = a ? mft_module_parameters(a, pa, NULL, 16) : 0;
    const int nb = b ? mft_module_parameters(b, pb, NULL, 16) : 0;
    mft_optimizer *oa = na ? mft_adam_new(na, pa, &ao) : NULL;
    mft_optimizer *ob = nb ? mft_adam_new(nb, pb, &ao) : NULL;
    CHECK(oa && ob && na == nb);
    if (oa && ob && na == nb) {
        mft_scope_begin();
        mft_tensor *x = mft_randn(4, (const int64_t[]){2, 3, 8, 8}, MFT_F32, MFT_CONTIGUOUS, 9);
        mft_tensor *y = mft_zeros(1, (const int64_t[]){2}, MFT_I64, MFT_CONTIGUOUS);
        mft_tape_begin();
        mft_tensor *loss = mft_cross_entropy(mft_module_forward(a, x), y, NULL, -100, 0.0,
                                             MFT_REDUCTION_MEAN);
        CHECK(loss && mft_backward(loss, NULL) == MFT_OK);
        mft_tape_end();
        CHECK(mft_optimizer_step(oa) == MFT_OK);
        mft_scope_end();
        CHECK(mft_module_save(path, a, oa) == MFT_OK);
        CHECK(mft_module_load(path, b, ob) == MFT_OK);
        mft_tensor *sa[64], *sb[64];
        const int ka = mft_optimizer_state(oa, sa, NULL, 64), kb = mft_optimizer_state(ob, sb, NULL, 64);
        CHECK(ka == kb && ka <= 64);
        for (int i = 0; i < na + (ka == kb && ka <= 64 ? ka : 0); i++) {
            const mft_tensor *u = i < na ? pa[i] : sa[i - na], *v = i < na ? pb[i] : sb[i - na];
            mft_layout lu, lv;
            CHECK_MSG(mft_tensor_layout(u, &lu) == MFT_OK && mft_tensor_layout(v, &lv) == MFT_OK &&
                          mft_layout_equal(&lu, &lv) &&
                          mft_tensor_is_blocked(v) == (mft_tensor_ndim(v) == 4) &&
                          mft_tensor_check_padding(v) == MFT_OK &&
                          mft_tensor_hash(u) == mft_tensor_hash(v),
                      "tensor %d: layout or values not restored", i);
        }
    }
    mft_optimizer_free(oa);
    mft_optimizer_free(ob);
    mft_module_free(a);
    mft_module_free(b);
    remove(path);
}

/* ------------------------------------------------------------------ refusals */
/* mft_module_load(path, b) must fail with status and a message holding
 * needle, path, and change nothing of b. */
static void expect_refused(const char *path, rig *b, bool with_opt, mft_status status,
                           const char *needle) {
    snap s0, s1;
    snap_take(&s0, b);
    mft_clear_error();
    mft_status st = mft_module_load(path, b->m, with_opt ? b->o : NULL);
    CHECK_MSG(st == status, "status %s, want %s (%s)", mft_status_str(st), mft_status_str(status),
              mft_last_error_message());
    const char *msg = mft_last_error_message();
    CHECK_MSG(strncmp(msg, "mft_module_load: ", 17) == 0, "message '%s'", msg);
    CHECK_MSG(strstr(msg, path) != NULL, "message '%s' lacks the path", msg);
    CHECK_MSG(strstr(msg, needle) != NULL, "message '%s' lacks '%s'", msg, needle);
    mft_clear_error();
    snap_take(&s1, b);
    CHECK_SNAP(&s0, &s1, true);
    snap_free(&s0), snap_free(&s1);
}

static void test_refusals(void) {
    char good[300], bad[300], msg[512];
    tmp_path(good, sizeof good, "good.mft");
    tmp_path(bad, sizeof bad, "bad.mft");
    rig a, b, wide, adam;
    CHECK(rig_make(&a, 4, MFT_CONTIGUOUS, OPT_SGD, 21));
    CHECK(rig_make(&b, 4, MFT_CHANNELS_LAST, OPT_SGD, 22));
    CHECK(rig_make(&wide, 8, MFT_CONTIGUOUS, OPT_SGD, 23));
    CHECK(rig_make(&adam, 4, MFT_CONTIGUOUS, OPT_ADAM, 24));
    if (!a.o || !b.o || !wide.o || !adam.o) goto out;
    for (int s = 0; s < 2; s++) CHECK(train_step(&a, s) == MFT_OK && train_step(&b, s + 5) == MFT_OK);
    CHECK(mft_module_save(good, a.m, a.o) == MFT_OK);

    /* wrong sizes: a model of width 8 from a file of width 4, and back */
    snprintf(msg, sizeof msg, "%s: tensor '0.weight' has sizes [4,2,3,3] in the file, [8,2,3,3] in "
             "the model", good);
    expect_refused(good, &wide, true, MFT_ERR_SHAPE, msg);
    CHECK(mft_module_save(bad, wide.m, wide.o) == MFT_OK);
    expect_refused(bad, &b, true, MFT_ERR_SHAPE,
                   "tensor '0.weight' has sizes [8,2,3,3] in the file, [4,2,3,3] in the model");

    /* wrong dtype */
    mft_tensor *p[MAXT];
    const char *pn[MAXT];
    mft_module_parameters(a.m, p, pn, MAXT);
    mft_tensor *f64 = mft_to_dtype(p[1], MFT_F64); /* "0.bias" */
    CHECK(rewrite(good, bad, NULL, "0.bias", f64, NULL, NULL) == MFT_OK);
    mft_tensor_release(f64);
    expect_refused(bad, &b, true, MFT_ERR_DTYPE, "tensor '0.bias' is f64 in the file, f32 in the model");
    expect_refused(bad, &b, false, MFT_ERR_DTYPE, "tensor '0.bias' is f64 in the file");

    /* a missing tensor: first, a buffer; then the very last entry of the optimiser */
    CHECK(rewrite(good, bad, "1.running_var", NULL, NULL, NULL, NULL) == MFT_OK);
    expect_refused(bad, &b, true, MFT_ERR_INVALID,
                   "tensor '1.running_var' of the model is missing from the file");
    CHECK(rewrite(good, bad, "optimizer.5.momentum_buffer", NULL, NULL, NULL, NULL) == MFT_OK);
    expect_refused(bad, &b, true, MFT_ERR_INVALID,
                   "tensor 'optimizer.5.momentum_buffer' of the optimizer is missing from the file");
    CHECK(mft_module_load(bad, b.m, NULL) == MFT_OK); /* without the optimiser: fine */
    CHECK(rewrite(good, bad, "optimizer.lr", NULL, NULL, NULL, NULL) == MFT_OK);
    expect_refused(bad, &b, true, MFT_ERR_INVALID,
                   "tensor 'optimizer.lr' of the optimizer is missing from the file");

    /* an extra tensor, of the model and of the optimiser */
    mft_tensor *extra = mft_zeros(1, (const int64_t[]){3}, MFT_F32, MFT_CONTIGUOUS);
    CHECK(rewrite(good, bad, NULL, NULL, NULL, "2.weight", extra) == MFT_OK);
    expect_refused(bad, &b, true, MFT_ERR_INVALID,
                   "the file has tensor '2.weight' (f32 [3]) that the model does not have");
    expect_refused(bad, &b, false, MFT_ERR_INVALID, "the file has tensor '2.weight'");
    CHECK(rewrite(good, bad, NULL, NULL, NULL, "optimizer.6.step", extra) == MFT_OK);
    expect_refused(bad, &b, true, MFT_ERR_INVALID,
                   "the file has tensor 'optimizer.6.step' (f32 [3]) that the optimizer does not have");
    mft_tensor_release(extra);

    /* an optimiser of another kind: Adam's state is not SGD's */
    expect_refused(good, &adam, true, MFT_ERR_INVALID,
                   "tensor 'optimizer.0.exp_avg' of the optimizer is missing from the file");

    /* a learning rate that is not one */
    const double bad_lrs[3] = {-0.5, NAN, INFINITY};
    for (int i = 0; i < 3; i++) {
        mft_tensor *lr = mft_full(1, (const int64_t[]){1}, MFT_F64, MFT_CONTIGUOUS, bad_lrs[i]);
        CHECK(rewrite(good, bad, NULL, "optimizer.lr", lr, NULL, NULL) == MFT_OK);
        mft_tensor_release(lr);
        expect_refused(bad, &b, true, MFT_ERR_INVALID, "holds the learning rate");
    }
    mft_tensor *lr32 = mft_full(1, (const int64_t[]){1}, MFT_F32, MFT_CONTIGUOUS, 0.1);
    CHECK(rewrite(good, bad, NULL, "optimizer.lr", lr32, NULL, NULL) == MFT_OK);
    mft_tensor_release(lr32);
    expect_refused(bad, &b, true, MFT_ERR_DTYPE, "tensor 'optimizer.lr' is f32 with sizes [1]");

    /* a truncated file, an empty one, garbage, a non-existent path */
    size_t n = 0;
    FILE *f = fopen(good, "rb");
    unsigned char *bytes = malloc(1 << 20);
    if (f && bytes) n = fread(bytes, 1, 1 << 20, f);
    if (f) fclose(f);
    CHECK(n > 1000);
    const size_t cut[3] = {n / 2, n - 1, 10};
    for (int i = 0; i < 3 && bytes; i++) {
        FILE *w = fopen(bad, "wb");
        CHECK(w && fwrite(bytes, 1, cut[i], w) == cut[i]);
        if (w) fclose(w);
        expect_refused(bad, &b, true, MFT_ERR_CORRUPT, "truncated");
    }
    free(bytes);
    char nowhere[300];
    tmp_path(nowhere, sizeof nowhere, "no/such/file.mft");
    expect_refused(nowhere, &b, true, MFT_ERR_IO, "cannot open");

    /* the good file still loads into b after all that */
    CHECK(mft_module_load(good, b.m, b.o) == MFT_OK);
    snap sa, sb;
    snap_take(&sa, &a);
    snap_take(&sb, &b);
    CHECK_SNAP(&sa, &sb, false);
    snap_free(&sa), snap_free(&sb);
out:
    rig_free(&a), rig_free(&b), rig_free(&wide), rig_free(&adam);
    remove(good), remove(bad);
}

static void test_null_args(void) {
    char path[300];
    tmp_path(path, sizeof path, "null.mft");
    rig a;
    CHECK(rig_make(&a, 4, MFT_CONTIGUOUS, OPT_SGD, 31));
    CHECK(mft_module_save(NULL, a.m, a.o) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_save: argument 'path' is NULL");
    CHECK(mft_module_save(path, NULL, a.o) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_save: argument 'm' is NULL");
    CHECK(!file_exists(path));
    CHECK(mft_module_save(path, a.m, NULL) == MFT_OK);
    snap s0, s1;
    snap_take(&s0, &a);
    CHECK(mft_module_load(NULL, a.m, a.o) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_load: argument 'path' is NULL");
    CHECK(mft_module_load(path, NULL, a.o) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_module_load: argument 'm' is NULL");
    snap_take(&s1, &a);
    CHECK_SNAP(&s0, &s1, true);
    /* a save that cannot be written */
    char nowhere[300];
    tmp_path(nowhere, sizeof nowhere, "no/such/dir.mft");
    CHECK(mft_module_save(nowhere, a.m, a.o) == MFT_ERR_IO);
    CHECK_ERR(MFT_ERR_IO, "mft_module_save: cannot create");
    snap_free(&s0), snap_free(&s1);
    rig_free(&a);
    remove(path);
}

/* A load inside an open scope, with the tape recording and grad mode on:
 * the copies are not ops on the tape, and no parameter lands in the scope. */
static void test_scope_and_tape(void) {
    char path[300];
    tmp_path(path, sizeof path, "scope.mft");
    rig a, b;
    CHECK(rig_make(&a, 4, MFT_CHANNELS_LAST, OPT_ADAM, 41));
    CHECK(rig_make(&b, 4, MFT_CHANNELS_LAST, OPT_ADAM, 42));
    CHECK(train_step(&a, 0) == MFT_OK);
    CHECK(mft_module_save(path, a.m, a.o) == MFT_OK);
    const int64_t live = mft_live_tensors();
    mft_scope_begin();
    mft_tape_begin();
    CHECK(mft_grad_enabled());
    CHECK(mft_module_load(path, b.m, b.o) == MFT_OK);
    CHECK_EQ_I(mft_tape_size(), 0);
    mft_tape_end();
    mft_scope_end();
    CHECK_EQ_I(mft_live_tensors(), live);
    snap sa, sb;
    snap_take(&sa, &a);
    snap_take(&sb, &b);
    CHECK_SNAP(&sa, &sb, false);
    CHECK(train_step(&b, 1) == MFT_OK && train_step(&a, 1) == MFT_OK);
    snap_free(&sa), snap_free(&sb);
    snap_take(&sa, &a);
    snap_take(&sb, &b);
    CHECK_SNAP(&sa, &sb, false);
    snap_free(&sa), snap_free(&sb);
    rig_free(&a), rig_free(&b);
    remove(path);
}

/* ------------------------------------------------------------------ allocation failures */
static void test_alloc_fail(void) {
    char path[300], tmp[310];
    tmp_path(path, sizeof path, "alloc.mft");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    mft_alloc_cache_set_limit(0);
    fa_install();
    rig a, b;
    CHECK(rig_make(&a, 4, MFT_CHANNELS_LAST, OPT_SGD, 51));
    CHECK(rig_make(&b, 4, MFT_CHANNELS_LAST, OPT_SGD, 52));
    CHECK(train_step(&a, 0) == MFT_OK && train_step(&a, 1) == MFT_OK);
    CHECK(train_step(&b, 0) == MFT_OK);
    snap sa, s0, s1;
    snap_take(&sa, &a);
    snap_take(&s0, &b);
    const long long live_blocks = g_fa.live;
    const int64_t live_tensors = mft_live_tensors();

    /* save: every allocation failing in turn, single and sticky */
    fa_arm_mode(0, false);
    remove(path);
    CHECK(mft_module_save(path, a.m, a.o) == MFT_OK);
    const long long n_save = g_fa.calls;
    CHECK(n_save > 0);
    int failures = 0;
    for (int sticky = 0; sticky < 2; sticky++)
        for (long long k = 1; k <= n_save; k++) {
            remove(path);
            mft_clear_error();
            fa_arm_mode(k, sticky);
            mft_status st = mft_module_save(path, a.m, a.o);
            fa_arm_mode(0, false);
            CHECK_MSG(st == MFT_ERR_NOMEM, "save k=%lld%s: %s", k, sticky ? "+" : "",
                      mft_status_str(st));
            CHECK_MSG(!strncmp(mft_last_error_message(), "mft_module_save: ", 17), "save k=%lld: %s",
                      k, mft_last_error_message());
            CHECK(!file_exists(path) && !file_exists(tmp));
            CHECK_EQ_I(g_fa.live, live_blocks);
            CHECK_EQ_I(mft_live_tensors(), live_tensors);
            failures++;
        }
    CHECK(mft_module_save(path, a.m, a.o) == MFT_OK);

    /* load: count, then fail each allocation */
    fa_arm_mode(0, false);
    CHECK(mft_module_load(path, b.m, b.o) == MFT_OK);
    const long long n_load = g_fa.calls;
    CHECK(n_load > 0);
    snap_take(&s1, &b);
    CHECK_SNAP(&sa, &s1, false);
    snap_free(&s1);
    rig_free(&b); /* a fresh b at the old state: rebuild it the same way */
    CHECK(rig_make(&b, 4, MFT_CHANNELS_LAST, OPT_SGD, 52));
    CHECK(train_step(&b, 0) == MFT_OK);
    snap_free(&s0);
    snap_take(&s0, &b);
    const long long live_blocks_b = g_fa.live;
    for (int sticky = 0; sticky < 2; sticky++)
        for (long long k = 1; k <= n_load; k++) {
            mft_clear_error();
            fa_arm_mode(k, sticky);
            mft_status st = mft_module_load(path, b.m, b.o);
            fa_arm_mode(0, false);
            CHECK_MSG(st == MFT_ERR_NOMEM, "load k=%lld%s: %s", k, sticky ? "+" : "",
                      mft_status_str(st));
            CHECK_MSG(!strncmp(mft_last_error_message(), "mft_module_load: ", 17), "load k=%lld: %s",
                      k, mft_last_error_message());
            snap_take(&s1, &b);
            char why[128];
            CHECK_MSG(snap_same(&s0, &s1, true, why, sizeof why), "load k=%lld%s changed %s", k,
                      sticky ? "+" : "", why);
            snap_free(&s1);
            CHECK_EQ_I(g_fa.live, live_blocks_b);
            CHECK_EQ_I(mft_live_tensors(), live_tensors);
            failures++;
        }
    printf("allocation failures: save N = %lld, load N = %lld, %d injected runs\n", n_save, n_load,
           failures);
    /* and a clean load still works */
    CHECK(mft_module_load(path, b.m, b.o) == MFT_OK);
    snap_take(&s1, &b);
    CHECK_SNAP(&sa, &s1, false);
    snap_free(&s1), snap_free(&s0), snap_free(&sa);
    rig_free(&a), rig_free(&b);
    CHECK_EQ_I(g_fa.live, 0);
    mft_set_allocator(NULL);
    remove(path);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", "/tmp/mft_test_nn_state_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_roundtrip_sgd);
    RUN(test_roundtrip_adam);
    RUN(test_model_only);
    RUN(test_layout_kept);
    RUN(test_blocked_weights_kept);
    RUN(test_refusals);
    RUN(test_null_args);
    RUN(test_scope_and_tape);
    RUN(test_alloc_fail);
    rmdir(g_dir);
    TEST_MAIN_END();
}
