/* nn/state.c — model checkpoints (mft/state.h): a module's parameters and
 * buffers and an optimiser's state gathered under their own names
 * (mft_module_parameters, mft_module_buffers, mft_optimizer_state, the
 * optimiser's under "optimizer.") and written or read through io's
 * checkpoint files (mft/io.h; docs/checkpoint-format.md §Model checkpoints);
 * and a model's state_dict exchanged with PyTorch as a safetensors file
 * (mft/safetensors.h; docs/spec.md §8.4), through the same all-or-nothing
 * matching.
 * nn sits above io for this (Note [Layers] in cmake/MftLibrary.cmake,
 * docs/architecture.md §1).
 *
 * Invariant: a load reads, verifies and matches the whole file (names,
 * sizes, dtypes, writability, the learning rate) before the first tensor is
 * written (Note [All-or-nothing load]); nothing the caller owns is retained
 * or left half-modified. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "mft/io.h"
#include "mft/nn.h"
#include "mft/safetensors.h"
#include "mft/state.h"

#define ST_PREFIX MFT_CHECKPOINT_OPTIMIZER_PREFIX
#define ST_LR_NAME ST_PREFIX "lr"

/* The named tensors of one (module, optimiser) pair, in checkpoint order:
 * parameters, buffers, then the optimiser's state. The tensors are borrowed;
 * names[i] points at the module's or optimiser's own name (model entries) or
 * into text (optimiser entries, prefixed). The learning rate is not in this
 * list: it is a value, not a tensor of the optimiser (see st_save / st_load). */
typedef struct st_list {
    int n, nmodel;        /* entries; the first nmodel are the module's */
    mft_tensor **t;
    const char **names;
    char *text;           /* "optimizer.<name>\0..." */
} st_list;

static void st_list_free(st_list *l) {
    mft__free(l->t);
    mft__free((void *)l->names);
    mft__free(l->text);
    memset(l, 0, sizeof *l);
}

/* Gathers m's and opt's (may be NULL) named tensors. MFT_ERR_NOMEM (error
 * set, naming fn) or MFT_OK; l is empty on failure. */
static mft_status st_gather(const char *fn, const mft_module *m, const mft_optimizer *opt,
                            st_list *l) {
    memset(l, 0, sizeof *l);
    const int np = mft_module_parameters(m, NULL, NULL, 0);
    const int nb = mft_module_buffers(m, NULL, NULL, 0);
    const int no = opt ? mft_optimizer_state(opt, NULL, NULL, 0) : 0;
    const int n = np + nb + no;
    const size_t cap = (size_t)(n > 0 ? n : 1);
    l->t = mft__alloc_or_err(fn, sizeof(mft_tensor *) * cap, 16);
    l->names = l->t ? mft__alloc_or_err(fn, sizeof(const char *) * cap, 16) : NULL;
    if (!l->names) {
        st_list_free(l);
        return MFT_ERR_NOMEM;
    }
    mft_module_parameters(m, l->t, l->names, np);
    mft_module_buffers(m, l->t + np, l->names + np, nb);
    l->nmodel = np + nb;
    l->n = n;
    if (no == 0) return MFT_OK;
    mft_optimizer_state(opt, l->t + l->nmodel, l->names + l->nmodel, no);
    size_t bytes = 0;
    for (int i = l->nmodel; i < n; i++) bytes += strlen(ST_PREFIX) + strlen(l->names[i]) + 1;
    l->text = mft__alloc_or_err(fn, bytes, 1);
    if (!l->text) {
        st_list_free(l);
        return MFT_ERR_NOMEM;
    }
    char *p = l->text;
    for (int i = l->nmodel; i < n; i++) {
        size_t k = strlen(ST_PREFIX), len = strlen(l->names[i]);
        memcpy(p, ST_PREFIX, k);
        memcpy(p + k, l->names[i], len + 1);
        l->names[i] = p;
        p += k + len + 1;
    }
    return MFT_OK;
}

/* ------------------------------------------------------------------ save */
mft_status mft_module_save(const char *path, const mft_module *m, const mft_optimizer *opt) {
    static const char fn[] = "mft_module_save";
    if (!path || !m) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn, !path ? "path" : "m");
        return MFT_ERR_NULL;
    }
    st_list l;
    mft_status st = st_gather(fn, m, opt, &l);
    if (st != MFT_OK) return st;
    /* the optimiser's learning rate as one more entry, appended */
    const int n = l.n + (opt ? 1 : 0);
    const mft_tensor **tv = NULL;
    const char **nv = NULL;
    mft_tensor *lr = NULL;
    tv = mft__alloc_or_err(fn, sizeof *tv * (size_t)(n > 0 ? n : 1), 16);
    nv = tv ? mft__alloc_or_err(fn, sizeof *nv * (size_t)(n > 0 ? n : 1), 16) : NULL;
    if (nv && opt) {
        mft__scope_suspend();
        lr = mft__tensor_alloc(fn, 1, (const int64_t[]){1}, MFT_F64, MFT_CONTIGUOUS);
        mft__scope_resume();
    }
    if (!nv || (opt && !lr)) {
        st = MFT_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < l.n; i++) {
        tv[i] = l.t[i];
        nv[i] = l.names[i];
    }
    if (opt) {
        const double v = mft_optimizer_lr(opt);
        memcpy(mft__tensor_ptr(lr), &v, sizeof v);
        tv[l.n] = lr;
        nv[l.n] = ST_LR_NAME;
    }
    st = mft_save_tensors(path, n, nv, tv);
    if (st != MFT_OK) st = mft__relabel_error(fn);
done:
    mft_tensor_release(lr);
    mft__free((void *)nv);
    mft__free((void *)tv);
    st_list_free(&l);
    return st;
}

/* ------------------------------------------------------------------ load
 * Note [All-or-nothing load]
 * mft_load_tensors reads and verifies the whole file into temporaries (the
 * file's own tensors); then every wanted name is looked up and its sizes,
 * dtype and the target's writability checked, every file entry is accounted
 * for, and the learning rate validated. Only then are values copied, with
 * mft__copy_into, which cannot fail once those checks passed (no allocation,
 * no autograd check: a load is not an op on the tape). So a refused load, an
 * allocation failure included, leaves the module and optimiser untouched. */

typedef struct st_entry {
    const char *name;
    int index;
} st_entry;

static int st_entry_cmp(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int st_find(const st_entry *sorted, int n, const char *name) {
    st_entry key = {name, 0};
    const st_entry *hit = n > 0 ? bsearch(&key, sorted, (size_t)n, sizeof key, st_entry_cmp) : NULL;
    return hit ? hit->index : -1;
}

static bool st_is_optimizer_name(const char *name) {
    return strncmp(name, ST_PREFIX, strlen(ST_PREFIX)) == 0;
}

/* Checks target t (called name, of "the model" / "the optimizer") against
 * the file's entry f; sets the error and returns its status on a mismatch. */
static mft_status st_match(const char *fn, const char *path, const char *name, const char *owner,
                           const mft_tensor *t, const mft_tensor *f) {
    char a[MFT__DIMS_BUF], b[MFT__DIMS_BUF];
    const int fd = mft_tensor_ndim(f), td = mft_tensor_ndim(t);
    const int64_t *fs = mft_tensor_sizes(f), *ts = mft_tensor_sizes(t);
    bool same = fd == td;
    for (int d = 0; same && d < td; d++) same = fs[d] == ts[d];
    if (!same) {
        mft__set_error(MFT_ERR_SHAPE, "%s: %s: tensor '%s' has sizes %s in the file, %s in %s", fn,
                       path, name, mft__fmt_dims(a, sizeof a, fd, fs),
                       mft__fmt_dims(b, sizeof b, td, ts), owner);
        return MFT_ERR_SHAPE;
    }
    if (mft_tensor_dtype(f) != mft_tensor_dtype(t)) {
        mft__set_error(MFT_ERR_DTYPE, "%s: %s: tensor '%s' is %s in the file, %s in %s", fn, path,
                       name, mft_dtype_name(mft_tensor_dtype(f)),
                       mft_dtype_name(mft_tensor_dtype(t)), owner);
        return MFT_ERR_DTYPE;
    }
    mft_status st = mft__check_writable(fn, t);
    if (st != MFT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", mft_last_error_message());
        const char *rest = strncmp(msg, fn, strlen(fn)) == 0 ? msg + strlen(fn) + 2 : msg;
        mft__set_error(st, "%s: %s: tensor '%s' of %s cannot be written: %s", fn, path, name,
                       owner, rest);
    }
    return st;
}

/* Where a load reads from: an mft checkpoint (mft_module_load) or a
 * safetensors state_dict (mft_module_load_safetensors, docs/spec.md §8.4). */
typedef enum { ST_CHECKPOINT, ST_SAFETENSORS } st_source;

/* Is buffer name a batch norm's num_batches_tracked ("bn1.num_batches_tracked")? */
static bool st_is_nbt(const char *name) {
    static const char base[] = "num_batches_tracked";
    const size_t n = strlen(name), k = sizeof base - 1;
    return n >= k && !strcmp(name + n - k, base) && (n == k || name[n - k - 1] == '.');
}

/* The body of both loads (Note [All-or-nothing load]). A safetensors file
 * holds PyTorch's state_dict, so two of its differences are accepted there
 * (docs/spec.md §8.4): a num_batches_tracked of shape [] (PyTorch's) for
 * mft's [1], and a missing one (the counter is then set to 0, as PyTorch's
 * load_state_dict does); and "optimizer." entries are not skipped (a
 * state_dict holds none). *nloaded (may be NULL): tensors read from the file. */
static mft_status st_load(const char *fn, st_source source, const char *path, unsigned flags,
                          mft_module *m, mft_optimizer *opt, int *nloaded) {
    if (nloaded) *nloaded = 0;
    if (!path || !m) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn, !path ? "path" : "m");
        return MFT_ERR_NULL;
    }
    const bool st_file = source == ST_SAFETENSORS;
    st_list l;
    mft_status st = st_gather(fn, m, opt, &l);
    if (st != MFT_OK) return st;
    int nf = 0;
    char **fnames = NULL;
    mft_tensor **ftensors = NULL;
    st_entry *sorted = NULL;
    int *src = NULL;
    bool *used = NULL;
    mft_tensor **alias = NULL; /* per model entry: a view of its file tensor, or NULL */
    mft_tensor *zero = NULL;   /* a counter of 0 for an absent num_batches_tracked */
    double lr = 0.0;
    int loaded = 0;
    st = st_file ? mft_safetensors_load(path, flags, &nf, &fnames, &ftensors)
                 : mft_load_tensors(path, &nf, &fnames, &ftensors);
    if (st != MFT_OK) {
        st = mft__relabel_error(fn);
        goto done;
    }
    const size_t capf = (size_t)(nf > 0 ? nf : 1), capl = (size_t)(l.n > 0 ? l.n : 1);
    sorted = mft__alloc_or_err(fn, sizeof *sorted * capf, 16);
    used = sorted ? mft__alloc_or_err(fn, sizeof *used * capf, 16) : NULL;
    src = used ? mft__alloc_or_err(fn, sizeof *src * capl, 16) : NULL;
    alias = src ? mft__alloc_or_err(fn, sizeof *alias * capl, 16) : NULL;
    if (!alias) {
        st = MFT_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < l.n; i++) alias[i] = NULL;
    for (int j = 0; j < nf; j++) {
        sorted[j] = (st_entry){fnames[j], j};
        used[j] = false;
    }
    if (nf > 1) qsort(sorted, (size_t)nf, sizeof *sorted, st_entry_cmp);

    /* 1. every tensor of the model (then the optimiser), in checkpoint order */
    for (int i = 0; i < l.n && st == MFT_OK; i++) {
        const char *owner = i < l.nmodel ? "the model" : "the optimizer";
        const bool nbt = st_file && st_is_nbt(l.names[i]) && mft_tensor_numel(l.t[i]) == 1;
        const int j = src[i] = st_find(sorted, nf, l.names[i]);
        if (j < 0 && nbt) {
            mft__scope_suspend();
            if (!zero) zero = mft_zeros(1, (const int64_t[]){1}, MFT_I64, MFT_CONTIGUOUS);
            mft__scope_resume();
            if (!zero) st = mft__relabel_error(fn);
        } else if (j < 0) {
            mft__set_error(MFT_ERR_INVALID,
                           "%s: %s: tensor '%s' of %s is missing from the file (%d entries%s)", fn,
                           path, l.names[i], owner, nf,
                           i >= l.nmodel && st_find(sorted, nf, ST_LR_NAME) < 0
                               ? ", no optimizer state: saved without an optimizer?"
                               : "");
            st = MFT_ERR_INVALID;
        } else {
            used[j] = true;
            const mft_tensor *f = ftensors[j];
            if (nbt && mft_tensor_ndim(f) == 0 && mft_tensor_dtype(f) == MFT_I64) {
                /* PyTorch's 0-dim counter, seen as mft's [1] */
                mft__scope_suspend();
                f = alias[i] = mft_view(f, mft_tensor_ndim(l.t[i]), mft_tensor_sizes(l.t[i]));
                mft__scope_resume();
                if (!f) {
                    st = mft__relabel_error(fn);
                    break;
                }
            }
            st = st_match(fn, path, l.names[i], owner, l.t[i], f);
        }
    }
    /* 2. the learning rate */
    if (st == MFT_OK && opt) {
        const int j = st_find(sorted, nf, ST_LR_NAME);
        const mft_tensor *f = j >= 0 ? ftensors[j] : NULL;
        if (!f) {
            mft__set_error(MFT_ERR_INVALID,
                           "%s: %s: tensor '%s' of the optimizer is missing from the file (%d "
                           "entries)",
                           fn, path, ST_LR_NAME, nf);
            st = MFT_ERR_INVALID;
        } else if (mft_tensor_dtype(f) != MFT_F64 || mft_tensor_numel(f) != 1) {
            char a[MFT__DIMS_BUF];
            mft__set_error(mft_tensor_dtype(f) != MFT_F64 ? MFT_ERR_DTYPE : MFT_ERR_SHAPE,
                           "%s: %s: tensor '%s' is %s with sizes %s in the file, f64 with sizes "
                           "[1] in the optimizer",
                           fn, path, ST_LR_NAME, mft_dtype_name(mft_tensor_dtype(f)),
                           mft__fmt_dims(a, sizeof a, mft_tensor_ndim(f), mft_tensor_sizes(f)));
            st = mft_tensor_dtype(f) != MFT_F64 ? MFT_ERR_DTYPE : MFT_ERR_SHAPE;
        } else {
            used[j] = true;
            memcpy(&lr, mft_tensor_data(f), sizeof lr);
            if (!isfinite(lr) || lr < 0) {
                mft__set_error(MFT_ERR_INVALID,
                               "%s: %s: tensor '%s' holds the learning rate %g: not a finite "
                               "value >= 0",
                               fn, path, ST_LR_NAME, lr);
                st = MFT_ERR_INVALID;
            }
        }
    }
    /* 3. nothing in the file left over (a checkpoint's optimiser entries are
     * skipped when no optimiser is given) */
    for (int j = 0; j < nf && st == MFT_OK; j++) {
        if (used[j] || (!st_file && !opt && st_is_optimizer_name(fnames[j]))) continue;
        char a[MFT__DIMS_BUF];
        const bool for_opt = !st_file && st_is_optimizer_name(fnames[j]);
        mft__set_error(MFT_ERR_INVALID,
                       "%s: %s: the file has tensor '%s' (%s %s) that %s does not have", fn,
                       path, fnames[j], mft_dtype_name(mft_tensor_dtype(ftensors[j])),
                       mft__fmt_dims(a, sizeof a, mft_tensor_ndim(ftensors[j]),
                                     mft_tensor_sizes(ftensors[j])),
                       for_opt ? "the optimizer" : "the model");
        st = MFT_ERR_INVALID;
    }
    if (st != MFT_OK) goto done;
    /* 4. every check passed: copy (cannot fail, Note [All-or-nothing load]) */
    for (int i = 0; i < l.n; i++) {
        const mft_tensor *f = src[i] < 0 ? zero : alias[i] ? alias[i] : ftensors[src[i]];
        mft_status cst = mft__copy_into(fn, l.t[i], f);
        if (cst != MFT_OK && st == MFT_OK) st = cst; /* cannot happen */
        loaded += src[i] >= 0;
    }
    if (opt && st == MFT_OK) st = mft_optimizer_set_lr(opt, lr);
    if (nloaded && st == MFT_OK) *nloaded = loaded;
done:
    for (int i = 0; alias && i < l.n; i++) mft_tensor_release(alias[i]);
    mft_tensor_release(zero);
    mft__free(alias);
    mft__free(src);
    mft__free(used);
    mft__free(sorted);
    if (st_file)
        mft_safetensors_free_list(nf, fnames, ftensors);
    else
        mft_checkpoint_free_list(nf, fnames, ftensors);
    st_list_free(&l);
    return st;
}

mft_status mft_module_load(const char *path, mft_module *m, mft_optimizer *opt) {
    return st_load("mft_module_load", ST_CHECKPOINT, path, 0, m, opt, NULL);
}

mft_status mft_module_load_safetensors(const char *path, mft_module *m, unsigned flags,
                                       int *nloaded) {
    return st_load("mft_module_load_safetensors", ST_SAFETENSORS, path, flags, m, NULL, nloaded);
}

/* ------------------------------------------------------------------ safetensors save
 * PyTorch's state_dict: the parameters and buffers under their names, a
 * num_batches_tracked as PyTorch's 0-dim I64 (a view of mft's [1]). */
mft_status mft_module_save_safetensors(const char *path, const mft_module *m, unsigned flags) {
    static const char fn[] = "mft_module_save_safetensors";
    if (!path || !m) {
        mft__set_error(MFT_ERR_NULL, "%s: argument '%s' is NULL", fn, !path ? "path" : "m");
        return MFT_ERR_NULL;
    }
    st_list l;
    mft_status st = st_gather(fn, m, NULL, &l);
    if (st != MFT_OK) return st;
    const size_t cap = (size_t)(l.n > 0 ? l.n : 1);
    const mft_tensor **tv = mft__alloc_or_err(fn, sizeof *tv * cap, 16);
    mft_tensor **alias = tv ? mft__alloc_or_err(fn, sizeof *alias * cap, 16) : NULL;
    if (!alias) {
        st = MFT_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < l.n; i++) alias[i] = NULL;
    const int np = mft_module_parameters(m, NULL, NULL, 0);
    for (int i = 0; i < l.n && st == MFT_OK; i++) {
        tv[i] = l.t[i];
        if (i < np || !st_is_nbt(l.names[i]) ||
            mft_tensor_numel(l.t[i]) != 1)
            continue;
        mft__scope_suspend();
        tv[i] = alias[i] = mft_view(l.t[i], 0, NULL);
        mft__scope_resume();
        if (!alias[i]) st = mft__relabel_error(fn);
    }
    if (st == MFT_OK) st = mft_safetensors_save(path, l.n, l.names, tv, flags);
    if (st != MFT_OK) st = mft__relabel_error(fn);
done:
    for (int i = 0; alias && i < l.n; i++) mft_tensor_release(alias[i]);
    mft__free(alias);
    mft__free((void *)tv);
    st_list_free(&l);
    return st;
}
