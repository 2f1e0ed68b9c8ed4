/* tests/tensor/test_dlpack.c — DLPack export and import in C, against the
 * real DLPack 0.6 header (Debian libdlpack-dev) and the 1.x versioned layout
 * of tests/tensor/dlpack_v1.h: the private mirror structs match both
 * (offsets and sizes, at compile time), exports share memory and carry the
 * logical shape with real strides, imports wrap memory with the deleter
 * called exactly once (from any thread, in any release order), the tag read
 * from strides and the hint, and every refusal names the function and the
 * value and leaves the caller's struct alone. Values are checked against a
 * formula of the logical index read straight from the DLTensor's memory, not
 * through mft's accessors. Live interop with PyTorch and NumPy is
 * test_interop_dlpack.c. */
#define _POSIX_C_SOURCE 200809L /* pthread */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include "test_util.h"

#if defined(__has_include)
#if __has_include(<dlpack/dlpack.h>)
#define HAVE_DLPACK_H 1
#endif
#endif

#ifndef HAVE_DLPACK_H
static void test_no_header(void) { SKIP("dlpack/dlpack.h not installed (libdlpack-dev)"); }
int main(void) {
    RUN(test_no_header);
    TEST_MAIN_END();
}
#else
#include "dlpack_abi.h"
#include "dlpack_v1.h"
#include "fail_alloc.h"

/* ------------------------------------------------------------------ ABI
 * The library's field lists laid out under test tags, next to the real
 * structs: every offset and size must agree. */
struct mirror_managed {
    MFT__DLP_MANAGED_FIELDS(mirror_managed)
};
struct mirror_managed_v {
    MFT__DLP_MANAGED_V_FIELDS(mirror_managed_v)
};
#define SAME_FIELD(A, B, f)                                                                        \
    _Static_assert(offsetof(A, f) == offsetof(B, f) && sizeof(((A *)0)->f) == sizeof(((B *)0)->f), \
                   #A "." #f " differs from " #B)
SAME_FIELD(mft__dlp_tensor, DLTensor, data);
SAME_FIELD(mft__dlp_tensor, DLTensor, device);
SAME_FIELD(mft__dlp_tensor, DLTensor, ndim);
SAME_FIELD(mft__dlp_tensor, DLTensor, dtype);
SAME_FIELD(mft__dlp_tensor, DLTensor, shape);
SAME_FIELD(mft__dlp_tensor, DLTensor, strides);
SAME_FIELD(mft__dlp_tensor, DLTensor, byte_offset);
_Static_assert(sizeof(mft__dlp_tensor) == sizeof(DLTensor), "DLTensor size");
SAME_FIELD(mft__dlp_device, DLDevice, device_type);
SAME_FIELD(mft__dlp_device, DLDevice, device_id);
SAME_FIELD(mft__dlp_dtype, DLDataType, code);
SAME_FIELD(mft__dlp_dtype, DLDataType, bits);
SAME_FIELD(mft__dlp_dtype, DLDataType, lanes);
SAME_FIELD(struct mirror_managed, DLManagedTensor, dl_tensor);
SAME_FIELD(struct mirror_managed, DLManagedTensor, manager_ctx);
SAME_FIELD(struct mirror_managed, DLManagedTensor, deleter);
_Static_assert(sizeof(struct mirror_managed) == sizeof(DLManagedTensor), "DLManagedTensor size");
SAME_FIELD(struct mirror_managed_v, DLManagedTensorVersioned, version);
SAME_FIELD(struct mirror_managed_v, DLManagedTensorVersioned, manager_ctx);
SAME_FIELD(struct mirror_managed_v, DLManagedTensorVersioned, deleter);
SAME_FIELD(struct mirror_managed_v, DLManagedTensorVersioned, flags);
SAME_FIELD(struct mirror_managed_v, DLManagedTensorVersioned, dl_tensor);
_Static_assert(sizeof(struct mirror_managed_v) == sizeof(DLManagedTensorVersioned),
               "DLManagedTensorVersioned size");
_Static_assert((int)MFT__DLP_CPU == (int)kDLCPU && (int)MFT__DLP_CUDA_HOST == (int)kDLCUDAHost &&
                   (int)MFT__DLP_CUDA_MANAGED == (int)kDLCUDAManaged,
               "device codes");
_Static_assert((int)MFT__DLP_INT == (int)kDLInt && (int)MFT__DLP_UINT == (int)kDLUInt &&
                   (int)MFT__DLP_FLOAT == (int)kDLFloat,
               "type codes");
_Static_assert(MFT__DLP_FLAG_READ_ONLY == DLPACK_FLAG_BITMASK_READ_ONLY &&
                   MFT__DLP_FLAG_IS_COPIED == DLPACK_FLAG_BITMASK_IS_COPIED,
               "flag bits");

/* ------------------------------------------------------------------ helpers */
/* (code, bits) each mft dtype must carry, from dlpack.h's own constants. */
static void expected_code(mft_dtype dt, int *code, int *bits) {
    switch (dt) {
    case MFT_F32: *code = kDLFloat, *bits = 32; break;
    case MFT_F64: *code = kDLFloat, *bits = 64; break;
    case MFT_I32: *code = kDLInt, *bits = 32; break;
    case MFT_I64: *code = kDLInt, *bits = 64; break;
    default: *code = kDLUInt, *bits = 8; break;
    }
}
static const mft_dtype DTYPES[] = {MFT_F32, MFT_F64, MFT_I32, MFT_I64, MFT_U8};

/* The value the tests store at logical linear index i: exact in every dtype
 * (u8 included), different at neighbouring indices. */
static double value_at(int64_t i) { return (double)((i * 37 + 11) % 200); }

static int64_t linear(int nd, const int64_t *sizes, const int64_t *idx) {
    int64_t k = 0;
    for (int d = 0; d < nd; d++) k = k * sizes[d] + idx[d];
    return k;
}

/* Element idx of a DLTensor read from its memory with its own strides (NULL:
 * row-major) and byte_offset, decoded by (code, bits). */
static double dl_read(const DLTensor *dl, const int64_t *idx) {
    int64_t off = 0, row = 1;
    for (int d = dl->ndim - 1; d >= 0; d--) {
        off += idx[d] * (dl->strides ? dl->strides[d] : row);
        row *= dl->shape[d];
    }
    const char *p = (const char *)dl->data + dl->byte_offset + off * (dl->dtype.bits / 8);
    if (dl->dtype.code == kDLFloat && dl->dtype.bits == 32) return *(const float *)(const void *)p;
    if (dl->dtype.code == kDLFloat && dl->dtype.bits == 64) return *(const double *)(const void *)p;
    if (dl->dtype.code == kDLInt && dl->dtype.bits == 32) return *(const int32_t *)(const void *)p;
    if (dl->dtype.code == kDLInt && dl->dtype.bits == 64)
        return (double)*(const int64_t *)(const void *)p;
    return *(const uint8_t *)p;
}

/* A packed tensor in fmt holding value_at(logical linear index). */
static mft_tensor *filled(int nd, const int64_t *sizes, mft_dtype dt, mft_format fmt) {
    mft_tensor *t = mft_empty(nd, sizes, dt, fmt);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (t && mft_tensor_numel(t) > 0) {
        do {
            mft_tensor_set(t, idx, value_at(linear(nd, sizes, idx)));
        } while (tu_next_index(nd, sizes, idx));
    }
    return t;
}

/* How a view's index maps to its base's: base[d] = start[d] + idx[d] * step[d]
 * (step 0: a broadcast dim). */
typedef struct view_map {
    int nd;
    int64_t base_sizes[MFT_MAX_DIMS], start[MFT_MAX_DIMS], step[MFT_MAX_DIMS];
} view_map;

static view_map identity_map(int nd, const int64_t *sizes) {
    view_map m = {.nd = nd};
    for (int d = 0; d < nd; d++) m.base_sizes[d] = sizes[d], m.start[d] = 0, m.step[d] = 1;
    return m;
}

/* Mismatches between dl's elements and value_at of the base index of each. */
static int dl_mismatches(const DLTensor *dl, const view_map *m) {
    int64_t idx[MFT_MAX_DIMS] = {0}, b[MFT_MAX_DIMS], n = 1;
    for (int d = 0; d < dl->ndim; d++) n *= dl->shape[d];
    if (n == 0) return 0;
    int bad = 0;
    do {
        for (int d = 0; d < m->nd; d++) b[d] = m->start[d] + idx[d] * m->step[d];
        if (dl_read(dl, idx) != value_at(linear(m->nd, m->base_sizes, b))) bad++;
    } while (tu_next_index(dl->ndim, dl->shape, idx));
    return bad;
}

/* The DLTensor of an export describes t: same data address, logical sizes,
 * t's strides, byte_offset 0, CPU, t's dtype code. */
static void check_describes(const DLTensor *dl, const mft_tensor *t) {
    int code, bits;
    expected_code(mft_tensor_dtype(t), &code, &bits);
    CHECK(dl->data == mft_tensor_data(t));
    CHECK(dl->byte_offset == 0);
    CHECK(dl->device.device_type == kDLCPU && dl->device.device_id == 0);
    CHECK(dl->dtype.code == code && dl->dtype.bits == bits && dl->dtype.lanes == 1);
    CHECK_EQ_I(dl->ndim, mft_tensor_ndim(t));
    CHECK(dl->shape != NULL && dl->strides != NULL);
    for (int d = 0; d < dl->ndim; d++) {
        CHECK_EQ_I(dl->shape[d], mft_tensor_sizes(t)[d]);
        CHECK_EQ_I(dl->strides[d], mft_tensor_strides(t)[d]);
    }
}

/* ------------------------------------------------------------------ export */
/* Every dtype, both formats, ranks 0-5: zero copy, real strides, values
 * readable through the DLTensor after the tensor itself was released. */
static void test_export_formats(void) {
    static const int64_t shapes[6][5] = {{0}, {7}, {3, 5}, {2, 3, 5}, {2, 3, 4, 5}, {2, 3, 2, 4, 5}};
    for (size_t k = 0; k < sizeof DTYPES / sizeof *DTYPES; k++) {
        for (int nd = 0; nd <= 5; nd++) {
            for (int f = 0; f < 2; f++) {
                mft_format fmt = f ? MFT_CHANNELS_LAST : MFT_CONTIGUOUS;
                if (fmt == MFT_CHANNELS_LAST && nd < 3) continue;
                mft_tensor *t = filled(nd, shapes[nd], DTYPES[k], fmt);
                DLManagedTensor *m = NULL;
                CHECK(mft_to_dlpack(t, 0, &m) == MFT_OK && m);
                if (!m) {
                    mft_tensor_release(t);
                    continue;
                }
                check_describes(&m->dl_tensor, t);
                int64_t expect_st[5];
                CHECK(mft_strides_for_format(nd, shapes[nd], fmt, expect_st) == MFT_OK);
                for (int d = 0; d < nd; d++) CHECK_EQ_I(m->dl_tensor.strides[d], expect_st[d]);
                int64_t live = mft_live_storages();
                mft_tensor_release(t); /* the export keeps the storage alive */
                CHECK_EQ_I(mft_live_storages(), live);
                view_map vm = identity_map(nd, shapes[nd]);
                CHECK_EQ_I(dl_mismatches(&m->dl_tensor, &vm), 0);
                m->deleter(m);
                CHECK_EQ_I(mft_live_storages(), live - 1);
            }
        }
    }
}

/* Views: the storage offset folded into data, gaps and broadcasts as strides. */
static void test_export_views(void) {
    const int64_t s[4] = {2, 6, 4, 5};
    mft_tensor *base = filled(4, s, MFT_F32, MFT_CHANNELS_LAST);
    view_map vm = identity_map(4, s);
    /* narrow C from 1: offset 1 element */
    mft_tensor *nar = mft_narrow(base, 1, 1, 4);
    /* stepped slice of W (gaps) */
    mft_tensor *sl = mft_slice(base, 3, 1, 5, 2);
    DLManagedTensor *a = NULL, *b = NULL;
    CHECK(mft_to_dlpack(nar, 0, &a) == MFT_OK);
    CHECK(mft_to_dlpack(sl, 0, &b) == MFT_OK);
    if (a && b) {
        check_describes(&a->dl_tensor, nar);
        check_describes(&b->dl_tensor, sl);
        CHECK((char *)a->dl_tensor.data == (char *)mft_tensor_data(base) + 1 * sizeof(float));
        CHECK(b->dl_tensor.strides[3] == 2 * 6); /* NHWC: W stride C, doubled */
        view_map va = vm, vb = vm;
        va.start[1] = 1;
        vb.start[3] = 1, vb.step[3] = 2;
        CHECK_EQ_I(dl_mismatches(&a->dl_tensor, &va), 0);
        CHECK_EQ_I(dl_mismatches(&b->dl_tensor, &vb), 0);
    }
    mft_tensor_release(nar);
    mft_tensor_release(sl);
    mft_tensor_release(base);
    if (a) a->deleter(a);
    if (b) b->deleter(b);
    /* broadcast: (1, 3, 1, 1) expanded to (2, 3, 4, 5): stride 0 exported */
    const int64_t s1[4] = {1, 3, 1, 1}, big[4] = {2, 3, 4, 5};
    mft_tensor *bias = filled(4, s1, MFT_I64, MFT_CONTIGUOUS);
    mft_tensor *ex = mft_expand(bias, 4, big);
    DLManagedTensor *c = NULL;
    CHECK(mft_to_dlpack(ex, 0, &c) == MFT_OK);
    if (c) {
        check_describes(&c->dl_tensor, ex);
        CHECK(c->dl_tensor.strides[0] == 0 && c->dl_tensor.strides[2] == 0 &&
              c->dl_tensor.strides[3] == 0);
        view_map vc = identity_map(4, s1);
        vc.step[0] = vc.step[2] = vc.step[3] = 0;
        CHECK_EQ_I(dl_mismatches(&c->dl_tensor, &vc), 0);
        c->deleter(c);
    }
    mft_tensor_release(ex);
    mft_tensor_release(bias);
}

/* Blocked layouts are refused, or exported as an NCHW copy on request. */
static void test_export_blocked(void) {
    const int64_t s[4] = {2, 17, 3, 3};
    mft_tensor *x = filled(4, s, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *xb = mft_to_format(x, MFT_NCHW16C);
    CHECK(xb && mft_tensor_format(xb) == MFT_NCHW16C);
    DLManagedTensor *m = NULL;
    CHECK(mft_to_dlpack(xb, 0, &m) == MFT_ERR_FORMAT && m == NULL);
    CHECK_ERR(MFT_ERR_FORMAT, "mft_to_dlpack: a NCHW16C tensor");
    DLManagedTensorVersioned *mv = NULL;
    CHECK(mft_to_dlpack_versioned(xb, 0, &mv) == MFT_ERR_FORMAT && mv == NULL);
    CHECK_ERR(MFT_ERR_FORMAT, "mft_to_dlpack_versioned: a NCHW16C");
    int64_t live = mft_live_storages();
    CHECK(mft_to_dlpack(xb, MFT_DLPACK_COPY, &m) == MFT_OK && m);
    CHECK(mft_to_dlpack_versioned(xb, MFT_DLPACK_COPY, &mv) == MFT_OK && mv);
    CHECK_EQ_I(mft_live_storages(), live + 2); /* two copies, owned by the exports */
    view_map vm = identity_map(4, s);
    int64_t nchw[4];
    mft_strides_for_format(4, s, MFT_CONTIGUOUS, nchw);
    if (m && mv) {
        CHECK(m->dl_tensor.data != mft_tensor_data(xb) && m->dl_tensor.data != mft_tensor_data(x));
        for (int d = 0; d < 4; d++) {
            CHECK_EQ_I(m->dl_tensor.strides[d], nchw[d]);
            CHECK_EQ_I(mv->dl_tensor.strides[d], nchw[d]);
        }
        CHECK_EQ_I(dl_mismatches(&m->dl_tensor, &vm), 0);
        CHECK_EQ_I(dl_mismatches(&mv->dl_tensor, &vm), 0);
        CHECK(mv->flags == DLPACK_FLAG_BITMASK_IS_COPIED);
        m->deleter(m);
        mv->deleter(mv);
    }
    CHECK_EQ_I(mft_live_storages(), live);
    mft_tensor_release(xb);
    mft_tensor_release(x);
}

static void test_export_errors(void) {
    const int64_t s[2] = {2, 3};
    mft_tensor *t = mft_zeros(2, s, MFT_F32, MFT_CONTIGUOUS);
    DLManagedTensor *m = (DLManagedTensor *)(uintptr_t)0x1; /* must stay untouched */
    CHECK(mft_to_dlpack(NULL, 0, &m) == MFT_ERR_NULL && m == (DLManagedTensor *)(uintptr_t)0x1);
    CHECK_ERR(MFT_ERR_NULL, "mft_to_dlpack");
    CHECK(mft_to_dlpack(t, 0, NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_to_dlpack: out is NULL");
    CHECK(mft_to_dlpack(t, 6u, &m) == MFT_ERR_INVALID && m == (DLManagedTensor *)(uintptr_t)0x1);
    CHECK_ERR(MFT_ERR_INVALID, "flags 0x6");
    DLManagedTensorVersioned *mv = NULL;
    CHECK(mft_to_dlpack_versioned(t, 0, NULL) == MFT_ERR_NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_to_dlpack_versioned: out is NULL");
    CHECK(mft_to_dlpack_versioned(NULL, 0, &mv) == MFT_ERR_NULL && mv == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_to_dlpack_versioned");
    mft_tensor_release(t);
}

/* ------------------------------------------------------------------ import */
/* A producer: a malloc'd DLManagedTensor over a caller buffer, with a
 * deleter that counts its calls. */
typedef struct producer {
    DLManagedTensor m;
    DLManagedTensorVersioned mv;
    int64_t shape[MFT_MAX_DIMS], strides[MFT_MAX_DIMS];
    atomic_int deleted;
} producer;

static void producer_deleter(DLManagedTensor *self) {
    producer *p = self->manager_ctx;
    atomic_fetch_add(&p->deleted, 1);
}
static void producer_deleter_v(DLManagedTensorVersioned *self) {
    producer *p = self->manager_ctx;
    atomic_fetch_add(&p->deleted, 1);
}

/* p describes buf as (nd, shape, strides or NULL) of (code, bits). */
static void producer_init(producer *p, void *buf, int nd, const int64_t *shape,
                          const int64_t *strides, int code, int bits) {
    memset(p, 0, sizeof *p);
    atomic_init(&p->deleted, 0);
    if (nd > 0) memcpy(p->shape, shape, (size_t)nd * sizeof *shape);
    if (strides && nd > 0) memcpy(p->strides, strides, (size_t)nd * sizeof *strides);
    DLTensor dl = {buf,
                   {kDLCPU, 0},
                   nd,
                   {(uint8_t)code, (uint8_t)bits, 1},
                   p->shape,
                   strides ? p->strides : NULL,
                   0};
    p->m.dl_tensor = dl;
    p->m.manager_ctx = p;
    p->m.deleter = producer_deleter;
    p->mv.version = (DLPackVersion){1, 0};
    p->mv.dl_tensor = dl;
    p->mv.manager_ctx = p;
    p->mv.deleter = producer_deleter_v;
}

/* Logical (n, c, h, w) values value_at(linear) stored NHWC into buf (floats). */
static void fill_nhwc(float *buf, const int64_t *s) {
    for (int64_t n = 0; n < s[0]; n++)
        for (int64_t c = 0; c < s[1]; c++)
            for (int64_t h = 0; h < s[2]; h++)
                for (int64_t w = 0; w < s[3]; w++) {
                    int64_t idx[4] = {n, c, h, w};
                    buf[((n * s[2] + h) * s[3] + w) * s[1] + c] = (float)value_at(linear(4, s, idx));
                }
}

/* mft reads value_at(logical index) at every index of t (base = t). */
static int t_mismatches(const mft_tensor *t) {
    int nd = mft_tensor_ndim(t);
    const int64_t *s = mft_tensor_sizes(t);
    int64_t idx[MFT_MAX_DIMS] = {0};
    if (mft_tensor_numel(t) == 0) return 0;
    int bad = 0;
    do {
        if (mft_tensor_get(t, idx) != value_at(linear(nd, s, idx))) bad++;
    } while (tu_next_index(nd, s, idx));
    return bad;
}

static void test_import_nhwc(void) {
    const int64_t s[4] = {2, 3, 4, 5}, cl[4] = {60, 1, 15, 3};
    float buf[120];
    fill_nhwc(buf, s);
    producer p;
    producer_init(&p, buf, 4, s, cl, kDLFloat, 32);
    mft_tensor *t = mft_from_dlpack(&p.m, MFT_PRESERVE);
    CHECK(t && mft_tensor_data(t) == (void *)buf);
    CHECK(mft_tensor_format(t) == MFT_CHANNELS_LAST && mft_tensor_format_origin(t) == MFT_INFERRED);
    CHECK(mft_tensor_is_contiguous(t, MFT_CHANNELS_LAST));
    CHECK_EQ_I(t_mismatches(t), 0);
    /* the deleter waits for the last view */
    mft_tensor *v = mft_narrow(t, 2, 1, 2);
    mft_tensor_release(t);
    CHECK_EQ_I(atomic_load(&p.deleted), 0);
    CHECK(mft_tensor_get(v, (int64_t[]){1, 2, 0, 4}) == buf[((1 * 4 + 1) * 5 + 4) * 3 + 2]);
    mft_tensor_release(v);
    CHECK_EQ_I(atomic_load(&p.deleted), 1);
}

/* NULL strides = row-major; byte_offset honoured; every dtype. */
static void test_import_rowmajor_offset(void) {
    for (size_t k = 0; k < sizeof DTYPES / sizeof *DTYPES; k++) {
        int code, bits;
        expected_code(DTYPES[k], &code, &bits);
        _Alignas(16) unsigned char buf[8 * 40];
        const int64_t s[3] = {2, 3, 4};
        /* write value_at(i) at element i + 2 of buf in the dtype, via a DLTensor
         * of 26 elements read back by dl_read's decoder */
        mft_tensor *src = filled(1, (int64_t[]){26}, DTYPES[k], MFT_CONTIGUOUS);
        size_t es = (size_t)bits / 8;
        memcpy(buf, mft_tensor_data(src), 26 * es);
        mft_tensor_release(src);
        producer p;
        producer_init(&p, buf, 3, s, NULL, code, bits);
        p.m.dl_tensor.byte_offset = 2 * es;
        mft_tensor *t = mft_from_dlpack(&p.m, MFT_PRESERVE);
        CHECK(t && mft_tensor_dtype(t) == DTYPES[k]);
        CHECK(t && mft_tensor_data(t) == (void *)(buf + 2 * es));
        CHECK(t && mft_tensor_is_contiguous(t, MFT_CONTIGUOUS));
        if (t) {
            int64_t idx[3] = {0}, bad = 0;
            do {
                if (mft_tensor_get(t, idx) != value_at(linear(3, s, idx) + 2)) bad++;
            } while (tu_next_index(3, s, idx));
            CHECK_EQ_I(bad, 0);
        }
        mft_tensor_release(t);
        CHECK_EQ_I(atomic_load(&p.deleted), 1);
    }
}

/* Size-1 dims' strides do not move the tag; the hint decides ambiguous
 * strides only. */
static void test_import_tags(void) {
    float buf[120] = {0};
    struct {
        int64_t shape[4], strides[4];
        mft_format hint, tag;
        mft_origin origin;
    } cases[] = {
        /* PyTorch's N = 1 channels_last export normalises the N stride to 1 */
        {{1, 3, 4, 5}, {1, 1, 15, 3}, MFT_PRESERVE, MFT_CHANNELS_LAST, MFT_INFERRED},
        {{1, 3, 4, 5}, {60, 1, 15, 3}, MFT_PRESERVE, MFT_CHANNELS_LAST, MFT_INFERRED},
        {{1, 3, 4, 5}, {1, 20, 5, 1}, MFT_CHANNELS_LAST, MFT_CONTIGUOUS, MFT_INFERRED},
        /* C = 1: both fit */
        {{2, 1, 4, 5}, {20, 1, 5, 1}, MFT_PRESERVE, MFT_CONTIGUOUS, MFT_INFERRED},
        {{2, 1, 4, 5}, {20, 20, 5, 1}, MFT_CHANNELS_LAST, MFT_CHANNELS_LAST, MFT_INHERITED},
        {{2, 1, 4, 5}, {20, 1, 5, 1}, MFT_CHANNELS_LAST, MFT_CHANNELS_LAST, MFT_INHERITED},
        {{2, 1, 4, 5}, {20, 1, 5, 1}, MFT_CONTIGUOUS, MFT_CONTIGUOUS, MFT_INHERITED},
        /* H = W = 1 */
        {{2, 3, 1, 1}, {3, 1, 3, 3}, MFT_PRESERVE, MFT_CONTIGUOUS, MFT_INFERRED},
        {{2, 3, 1, 1}, {3, 1, 1, 1}, MFT_CHANNELS_LAST, MFT_CHANNELS_LAST, MFT_INHERITED},
        /* all ones; numel 0 (no element: every order fits) */
        {{1, 1, 1, 1}, {1, 1, 1, 1}, MFT_CHANNELS_LAST, MFT_CHANNELS_LAST, MFT_INHERITED},
        {{1, 1, 1, 1}, {1, 1, 1, 1}, MFT_PRESERVE, MFT_CONTIGUOUS, MFT_INFERRED},
        {{0, 3, 4, 5}, {60, 1, 15, 3}, MFT_CHANNELS_LAST, MFT_CHANNELS_LAST, MFT_INHERITED},
        {{0, 3, 4, 5}, {60, 1, 15, 3}, MFT_PRESERVE, MFT_CONTIGUOUS, MFT_INFERRED},
        {{2, 0, 4, 5}, {0, 1, 0, 0}, MFT_CHANNELS_LAST, MFT_CHANNELS_LAST, MFT_INHERITED},
        {{2, 0, 4, 5}, {0, 1, 0, 0}, MFT_PRESERVE, MFT_CONTIGUOUS, MFT_INFERRED},
        /* unambiguous strides win over the hint */
        {{2, 3, 4, 5}, {60, 20, 5, 1}, MFT_CHANNELS_LAST, MFT_CONTIGUOUS, MFT_INFERRED},
        {{2, 3, 4, 5}, {60, 1, 15, 3}, MFT_CONTIGUOUS, MFT_CHANNELS_LAST, MFT_INFERRED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        producer p;
        producer_init(&p, buf, 4, cases[i].shape, cases[i].strides, kDLFloat, 32);
        mft_tensor *t = mft_from_dlpack(&p.m, cases[i].hint);
        CHECK_MSG(t && mft_tensor_format(t) == cases[i].tag &&
                      mft_tensor_format_origin(t) == cases[i].origin,
                  "case %zu: %s (%s)", i, mft_format_name(mft_tensor_format(t)),
                  mft_origin_name(mft_tensor_format_origin(t)));
        for (int d = 0; t && d < 4; d++) CHECK_EQ_I(mft_tensor_strides(t)[d], cases[i].strides[d]);
        mft_tensor_release(t);
        CHECK_EQ_I(atomic_load(&p.deleted), 1);
    }
    /* rank 2 with a CHANNELS_LAST hint: no such format there */
    producer p;
    producer_init(&p, buf, 2, (int64_t[]){1, 1}, (int64_t[]){1, 1}, kDLFloat, 32);
    mft_tensor *t = mft_from_dlpack(&p.m, MFT_CHANNELS_LAST);
    CHECK(t && mft_tensor_format(t) == MFT_CONTIGUOUS);
    mft_tensor_release(t);
    CHECK_EQ_I(atomic_load(&p.deleted), 1);
}

/* Rank 0, a size-0 tensor with data NULL, a NULL deleter. */
static void test_import_edges(void) {
    double one = 42;
    producer p;
    producer_init(&p, &one, 0, NULL, NULL, kDLFloat, 64);
    p.m.dl_tensor.shape = NULL;
    mft_tensor *t = mft_from_dlpack(&p.m, MFT_PRESERVE);
    CHECK(t && mft_tensor_ndim(t) == 0 && mft_tensor_get(t, NULL) == 42);
    mft_tensor_release(t);
    CHECK_EQ_I(atomic_load(&p.deleted), 1);
    producer_init(&p, NULL, 2, (int64_t[]){0, 3}, NULL, kDLInt, 64);
    t = mft_from_dlpack(&p.m, MFT_PRESERVE);
    CHECK(t && mft_tensor_numel(t) == 0);
    mft_tensor_release(t);
    CHECK_EQ_I(atomic_load(&p.deleted), 1);
    producer_init(&p, &one, 1, (int64_t[]){1}, NULL, kDLFloat, 64);
    p.m.deleter = NULL; /* the producer keeps the memory alive itself */
    t = mft_from_dlpack(&p.m, MFT_PRESERVE);
    CHECK(t && mft_tensor_get(t, (int64_t[]){0}) == 42);
    mft_tensor_release(t);
    CHECK_EQ_I(atomic_load(&p.deleted), 0);
}

/* Every refusal: the status, a message naming the function and the value,
 * and the deleter never called (the caller still owns m). */
static void test_import_errors(void) {
    float buf[64] = {0};
    const int64_t s[4] = {2, 2, 2, 2};
    producer p;
#define REFUSED(setup, hint, st, needle)                                                           \
    do {                                                                                           \
        producer_init(&p, buf, 4, s, NULL, kDLFloat, 32);                                          \
        setup;                                                                                     \
        int64_t live_ = mft_live_storages();                                                       \
        CHECK(mft_from_dlpack(&p.m, hint) == NULL);                                                \
        CHECK_ERR(st, needle);                                                                     \
        CHECK(mft_from_dlpack_versioned(&p.mv, hint) == NULL);                                     \
        CHECK_ERR(st, needle);                                                                     \
        CHECK_EQ_I(atomic_load(&p.deleted), 0);                                                    \
        CHECK_EQ_I(mft_live_storages(), live_);                                                    \
    } while (0)
#define BOTH(stmt) (p.m.dl_tensor.stmt, p.mv.dl_tensor.stmt)
    CHECK(mft_from_dlpack(NULL, MFT_PRESERVE) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_from_dlpack: m is NULL");
    CHECK(mft_from_dlpack_versioned(NULL, MFT_PRESERVE) == NULL);
    CHECK_ERR(MFT_ERR_NULL, "mft_from_dlpack_versioned: m is NULL");
    REFUSED((void)0, MFT_NCHW16C, MFT_ERR_FORMAT, "hint NCHW16C");
    REFUSED((void)0, (mft_format)99, MFT_ERR_FORMAT, "(99)");
    REFUSED(BOTH(device.device_type = kDLCUDA), MFT_PRESERVE, MFT_ERR_UNSUPPORTED,
            "device type 2 (id 0)");
    REFUSED(BOTH(device.device_type = kDLROCM), MFT_PRESERVE, MFT_ERR_UNSUPPORTED, "type 10");
    REFUSED(BOTH(dtype.lanes = 4), MFT_PRESERVE, MFT_ERR_DTYPE, "lanes 4");
    REFUSED((BOTH(dtype.code = kDLBfloat), BOTH(dtype.bits = 16)), MFT_PRESERVE, MFT_ERR_DTYPE,
            "code 4 bits 16");
    REFUSED((BOTH(dtype.code = kDLInt), BOTH(dtype.bits = 8)), MFT_PRESERVE, MFT_ERR_DTYPE,
            "code 0 bits 8");
    REFUSED((BOTH(dtype.code = kDLComplex), BOTH(dtype.bits = 64)), MFT_PRESERVE, MFT_ERR_DTYPE,
            "code 5 bits 64");
    REFUSED(BOTH(dtype.code = 6), MFT_PRESERVE, MFT_ERR_DTYPE, "code 6 bits 32"); /* kDLBool (1.x) */
    REFUSED(BOTH(ndim = MFT_MAX_DIMS + 1), MFT_PRESERVE, MFT_ERR_RANK, "ndim 9 is outside 0..8");
    REFUSED(BOTH(ndim = -1), MFT_PRESERVE, MFT_ERR_RANK, "ndim -1");
    REFUSED(BOTH(shape = NULL), MFT_PRESERVE, MFT_ERR_NULL, "shape is NULL with ndim 4");
    REFUSED(BOTH(data = NULL), MFT_PRESERVE, MFT_ERR_NULL, "data is NULL for a tensor of 16");
    REFUSED((p.shape[2] = -2), MFT_PRESERVE, MFT_ERR_INVALID, "-2");
    REFUSED((p.strides[0] = 8, p.strides[1] = -4, p.strides[2] = 2, p.strides[3] = 1,
             BOTH(strides = p.strides)),
            MFT_PRESERVE, MFT_ERR_UNSUPPORTED, "negative stride -4 at dim 1");
    REFUSED((p.strides[0] = INT64_C(1) << 62, p.strides[1] = 1, p.strides[2] = 1,
             p.strides[3] = 1, BOTH(strides = p.strides)),
            MFT_PRESERVE, MFT_ERR_OVERFLOW, "mft_from_dlpack");
    REFUSED((p.shape[0] = INT64_C(1) << 40, p.shape[1] = INT64_C(1) << 40), MFT_PRESERVE,
            MFT_ERR_OVERFLOW, "mft_from_dlpack");
    REFUSED(BOTH(byte_offset = 2), MFT_PRESERVE, MFT_ERR_INVALID, "byte_offset 2 is not aligned to 4");
    REFUSED(BOTH(byte_offset = UINT64_MAX), MFT_PRESERVE, MFT_ERR_OVERFLOW, "byte_offset");
#undef BOTH
#undef REFUSED
}

/* Versioned: the fields of an export; import of 1.x; refusals that read only
 * the version (a 2.x struct's other fields may mean anything). */
static void test_versioned(void) {
    const int64_t s[4] = {2, 3, 4, 5};
    mft_tensor *t = filled(4, s, MFT_F64, MFT_CHANNELS_LAST);
    DLManagedTensorVersioned *mv = NULL;
    CHECK(mft_to_dlpack_versioned(t, 0, &mv) == MFT_OK && mv);
    if (mv) {
        CHECK(mv->version.major == 1 && mv->version.minor == MFT_DLPACK_MINOR);
        CHECK(mv->flags == 0);
        check_describes(&mv->dl_tensor, t);
        mft_tensor *back = mft_from_dlpack_versioned(mv, MFT_PRESERVE);
        CHECK(back && mft_tensor_data(back) == mft_tensor_data(t));
        CHECK(back && mft_tensor_format(back) == MFT_CHANNELS_LAST);
        CHECK(back && mft_tensor_hash(back) == mft_tensor_hash(t));
        mft_tensor_release(t); /* the imported view keeps the memory */
        t = NULL;
        CHECK_EQ_I(back ? t_mismatches(back) : -1, 0);
        mft_tensor_release(back); /* calls mft's own deleter: storage freed */
    }
    mft_tensor_release(t);

    float buf[16];
    for (int i = 0; i < 16; i++) buf[i] = (float)value_at(i);
    producer p;
    producer_init(&p, buf, 4, (int64_t[]){2, 2, 2, 2}, NULL, kDLFloat, 32);
    p.mv.flags = DLPACK_FLAG_BITMASK_IS_COPIED;
    p.mv.version.minor = 3; /* a later minor version is still 1.x */
    mft_tensor *x = mft_from_dlpack_versioned(&p.mv, MFT_PRESERVE);
    CHECK(x && mft_tensor_data(x) == (void *)buf && t_mismatches(x) == 0);
    mft_tensor_release(x);
    CHECK_EQ_I(atomic_load(&p.deleted), 1);

    producer_init(&p, buf, 4, (int64_t[]){2, 2, 2, 2}, NULL, kDLFloat, 32);
    p.mv.version.major = 2;
    p.mv.dl_tensor.ndim = -7; /* not to be read: the version is checked first */
    CHECK(mft_from_dlpack_versioned(&p.mv, MFT_PRESERVE) == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "mft_from_dlpack_versioned: DLPack major version 2 is not 1");
    p.mv.version.major = 0;
    CHECK(mft_from_dlpack_versioned(&p.mv, MFT_PRESERVE) == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "major version 0");
    CHECK_EQ_I(atomic_load(&p.deleted), 0);
    p.mv.deleter(&p.mv); /* the caller's duty after a refusal */
    CHECK_EQ_I(atomic_load(&p.deleted), 1);

    producer_init(&p, buf, 4, (int64_t[]){2, 2, 2, 2}, NULL, kDLFloat, 32);
    p.mv.flags = DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_COPIED;
    CHECK(mft_from_dlpack_versioned(&p.mv, MFT_PRESERVE) == NULL);
    CHECK_ERR(MFT_ERR_UNSUPPORTED, "flags 0x3 mark the tensor READ_ONLY");
    CHECK_EQ_I(atomic_load(&p.deleted), 0);
}

/* mft -> DLPack -> mft: one memory, both release orders, the deleter of the
 * export run by the import's storage. */
static void test_round_trip(void) {
    const int64_t s[5] = {2, 3, 2, 4, 5};
    for (int order = 0; order < 2; order++) {
        int64_t live = mft_live_storages();
        mft_tensor *t = filled(5, s, MFT_I32, MFT_CHANNELS_LAST);
        DLManagedTensor *m = NULL;
        CHECK(mft_to_dlpack(t, 0, &m) == MFT_OK);
        mft_tensor *back = m ? mft_from_dlpack(m, MFT_PRESERVE) : NULL;
        CHECK(back && mft_tensor_data(back) == mft_tensor_data(t));
        CHECK(back && mft_tensor_format(back) == MFT_CHANNELS_LAST);
        for (int d = 0; back && d < 5; d++)
            CHECK_EQ_I(mft_tensor_strides(back)[d], mft_tensor_strides(t)[d]);
        /* writes are shared */
        CHECK(mft_tensor_set(back, (int64_t[]){1, 2, 1, 3, 4}, -5) == MFT_OK);
        CHECK(mft_tensor_get(t, (int64_t[]){1, 2, 1, 3, 4}) == -5);
        const int64_t at[5] = {1, 2, 1, 3, 4};
        CHECK(mft_tensor_set(back, at, value_at(linear(5, s, at))) == MFT_OK);
        if (order == 0) {
            mft_tensor_release(t);
            CHECK_EQ_I(back ? t_mismatches(back) : -1, 0);
            mft_tensor_release(back);
        } else {
            mft_tensor_release(back);
            CHECK_EQ_I(t_mismatches(t), 0);
            mft_tensor_release(t);
        }
        CHECK_EQ_I(mft_live_storages(), live);
    }
}

/* The export's deleter from another thread, after the tensor is gone. */
static void *call_deleter(void *arg) {
    DLManagedTensor *m = arg;
    m->deleter(m);
    return NULL;
}

static void test_deleter_other_thread(void) {
    int64_t live = mft_live_storages();
    DLManagedTensor *m[4] = {NULL};
    const int64_t s[4] = {1, 8, 8, 8};
    mft_tensor *t = filled(4, s, MFT_F32, MFT_CHANNELS_LAST);
    for (int i = 0; i < 4; i++) CHECK(mft_to_dlpack(t, 0, &m[i]) == MFT_OK);
    mft_tensor_release(t);
    pthread_t th[4];
    bool started[4] = {false};
    for (int i = 0; i < 4; i++)
        started[i] = m[i] && pthread_create(&th[i], NULL, call_deleter, m[i]) == 0;
    for (int i = 0; i < 4; i++) {
        CHECK(started[i]);
        if (started[i]) pthread_join(th[i], NULL);
        else if (m[i]) m[i]->deleter(m[i]);
    }
    CHECK_EQ_I(mft_live_storages(), live);
}

/* Inside a scope the imported tensor is the scope's, like any result; the
 * deleter runs at scope end. */
static void test_scope(void) {
    float buf[4] = {1, 2, 3, 4};
    producer p;
    producer_init(&p, buf, 1, (int64_t[]){4}, NULL, kDLFloat, 32);
    CHECK(mft_scope_begin() == MFT_OK);
    mft_tensor *t = mft_from_dlpack(&p.m, MFT_PRESERVE);
    CHECK(t && mft_tensor_get(t, (int64_t[]){3}) == 4);
    CHECK_EQ_I(atomic_load(&p.deleted), 0);
    CHECK(mft_scope_end() == MFT_OK);
    CHECK_EQ_I(atomic_load(&p.deleted), 1);
}

/* Every allocation of an export (plain, and the copy of a blocked tensor) and
 * of an import failing in turn: MFT_ERR_NOMEM naming the function, *out
 * untouched, the producer's deleter not called, nothing left allocated. */
static void test_alloc_failure(void) {
    fa_install();
    const int64_t s[4] = {2, 17, 3, 3};
    mft_tensor *t = filled(4, s, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *tb = mft_to_format(t, MFT_NCHW16C);
    CHECK(t && tb);
    const long long live = g_fa.live;
    int failures = 0;
    for (int which = 0; which < 2; which++) {
        for (int k = 1; k < 64; k++) {
            fa_arm(k);
            DLManagedTensor *m = (DLManagedTensor *)(uintptr_t)0x1;
            mft_status st = mft_to_dlpack(which ? tb : t, which ? MFT_DLPACK_COPY : 0, &m);
            const long long injected = g_fa.injected;
            fa_arm(0);
            if (injected == 0) {
                CHECK(st == MFT_OK && m != (DLManagedTensor *)(uintptr_t)0x1);
                if (st == MFT_OK) m->deleter(m);
                break;
            }
            failures++;
            CHECK(st == MFT_ERR_NOMEM && m == (DLManagedTensor *)(uintptr_t)0x1);
            CHECK_ERR(MFT_ERR_NOMEM, "mft_to_dlpack");
            CHECK_EQ_I(g_fa.live, live);
        }
    }
    float buf[8] = {0};
    for (int k = 1; k < 64; k++) {
        producer p;
        producer_init(&p, buf, 2, (int64_t[]){2, 4}, NULL, kDLFloat, 32);
        fa_arm(k);
        mft_tensor *x = mft_from_dlpack(&p.m, MFT_PRESERVE);
        const long long injected = g_fa.injected;
        fa_arm(0);
        if (injected == 0) {
            CHECK(x != NULL);
            mft_tensor_release(x);
            CHECK_EQ_I(atomic_load(&p.deleted), 1);
            break;
        }
        failures++;
        CHECK(x == NULL);
        CHECK_ERR(MFT_ERR_NOMEM, "mft_from_dlpack");
        CHECK_EQ_I(atomic_load(&p.deleted), 0);
        CHECK_EQ_I(g_fa.live, live);
    }
    CHECK(failures >= 3); /* export block, the copy, the import's headers */
    mft_tensor_release(tb);
    mft_tensor_release(t);
    CHECK_EQ_I(g_fa.live, 0);
    mft_set_allocator(NULL);
}

int main(void) {
    RUN(test_export_formats);
    RUN(test_export_views);
    RUN(test_export_blocked);
    RUN(test_export_errors);
    RUN(test_import_nhwc);
    RUN(test_import_rowmajor_offset);
    RUN(test_import_tags);
    RUN(test_import_edges);
    RUN(test_import_errors);
    RUN(test_versioned);
    RUN(test_round_trip);
    RUN(test_deleter_other_thread);
    RUN(test_scope);
    RUN(test_alloc_failure);
    TEST_MAIN_END();
}
#endif
