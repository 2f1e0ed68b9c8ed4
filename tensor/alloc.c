/* tensor/alloc.c — every allocation of the library goes through the
 * replaceable allocator hook here; live-object counters for leak checks. */
#include <stdlib.h>
#include "internal.h"

atomic_llong mft__live_tensor_count = 0;
atomic_llong mft__live_storage_count = 0;

static void *default_alloc(size_t size, size_t align, void *ctx) {
    (void)ctx;
    if (size == 0) size = 1;
    size_t rounded = (size + align - 1) / align * align; /* aligned_alloc needs a multiple */
    if (rounded < size) return NULL;
    return aligned_alloc(align, rounded);
}
static void default_free(void *p, void *ctx) {
    (void)ctx;
    free(p);
}

static mft_allocator g_alloc = {default_alloc, default_free, NULL};

void mft_set_allocator(const mft_allocator *a) {
    if (a && a->alloc && a->free) {
        g_alloc = *a;
    } else {
        g_alloc.alloc = default_alloc;
        g_alloc.free = default_free;
        g_alloc.ctx = NULL;
    }
}

void *mft__alloc(size_t size, size_t align) { return g_alloc.alloc(size, align, g_alloc.ctx); }

void mft__free(void *p) {
    if (p) g_alloc.free(p, g_alloc.ctx);
}

void *mft__alloc_or_err(const char *fn, size_t size, size_t align) {
    void *p = mft__alloc(size, align);
    if (!p) mft__set_error(MFT_ERR_NOMEM, "%s: out of memory allocating %zu bytes", fn, size);
    return p;
}

int64_t mft_live_tensors(void) { return (int64_t)atomic_load(&mft__live_tensor_count); }
int64_t mft_live_storages(void) { return (int64_t)atomic_load(&mft__live_storage_count); }

const char *mft_version(void) { return MFT_VERSION_STRING; }
