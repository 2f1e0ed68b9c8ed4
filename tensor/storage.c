/* tensor/storage.c — mft_storage: a refcounted byte buffer, either allocated
 * by the library (64-byte aligned) or wrapped caller memory with a deleter,
 * plus the version counter shared by all views of it. */
#include <stdint.h>
#include <string.h>
#include "internal.h"

#define MFT__STORAGE_ALIGN 64

static mft_storage *storage_header(const char *fn) {
    mft_storage *s = mft__alloc_or_err(fn, sizeof *s, _Alignof(mft_storage));
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    return s;
}

/* Library-owned storage is one allocation: the header padded to 64 bytes,
 * then the data (64-byte aligned). */
#define MFT__STORAGE_HEAD ((sizeof(mft_storage) + MFT__STORAGE_ALIGN - 1) / MFT__STORAGE_ALIGN * MFT__STORAGE_ALIGN)

mft_storage *mft__storage_new(const char *fn, size_t nbytes) {
    if (nbytes > SIZE_MAX - MFT__STORAGE_HEAD) {
        mft__set_error(MFT_ERR_OVERFLOW, "%s: %zu bytes overflow size_t", fn, nbytes);
        return NULL;
    }
    char *block = mft__alloc(MFT__STORAGE_HEAD + nbytes, MFT__STORAGE_ALIGN);
    if (!block) {
        mft__set_error(MFT_ERR_NOMEM, "%s: out of memory allocating %zu bytes", fn, nbytes);
        return NULL;
    }
    mft_storage *s = (mft_storage *)(void *)block;
    memset(s, 0, sizeof *s);
    atomic_init(&s->refcount, 1);
    atomic_init(&s->version, 0);
    s->data = block + MFT__STORAGE_HEAD;
    s->nbytes = nbytes;
    s->owns_data = true;
    atomic_fetch_add(&mft__live_storage_count, 1);
    return s;
}

mft_storage *mft__storage_wrap(const char *fn, void *data, size_t nbytes,
                               void (*deleter)(void *, void *), void *ctx) {
    mft_storage *s = storage_header(fn);
    if (!s) return NULL;
    s->data = data;
    s->nbytes = nbytes;
    s->deleter = deleter;
    s->deleter_ctx = ctx;
    s->owns_data = false;
    atomic_fetch_add(&mft__live_storage_count, 1);
    return s;
}

void mft__storage_retain(mft_storage *s) { atomic_fetch_add(&s->refcount, 1); }

void mft__storage_release(mft_storage *s) {
    if (!s) return;
    if (atomic_fetch_sub(&s->refcount, 1) != 1) return;
    if (!s->owns_data && s->deleter) s->deleter(s->data, s->deleter_ctx);
    mft__free(s); /* owned data lives in the same block */
    atomic_fetch_sub(&mft__live_storage_count, 1);
}
