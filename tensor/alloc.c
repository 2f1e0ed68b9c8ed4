/* tensor/alloc.c — every allocation of the library goes through the
 * replaceable allocator hook here; live-object counters for leak checks. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "internal.h"

atomic_llong mft__live_tensor_count = 0;
atomic_llong mft__live_storage_count = 0;

/* The default allocator over-allocates with malloc and aligns by hand,
 * keeping malloc's pointer in the word before the block: glibc's
 * aligned_alloc splits and re-merges chunks, which doubled the cost of a
 * small tensor (measured with callgrind on 1x4x4x4 adds). */
static void *default_alloc(size_t size, size_t align, void *ctx) {
    (void)ctx;
    if (align < sizeof(void *)) align = sizeof(void *);
    if (size > SIZE_MAX - align - sizeof(void *)) return NULL;
    char *raw = malloc(size + align + sizeof(void *));
    if (!raw) return NULL;
    uintptr_t p = ((uintptr_t)raw + sizeof(void *) + align - 1) & ~(uintptr_t)(align - 1);
    ((void **)p)[-1] = raw;
    return (void *)p;
}
static void default_free(void *p, void *ctx) {
    (void)ctx;
    free(((void **)p)[-1]);
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

/* Every block remembers the allocator that made it (a small head just before
 * the returned pointer), so objects made before mft_set_allocator switched
 * hooks are still freed by their own allocator. */
typedef struct alloc_head {
    void (*free)(void *ptr, void *ctx);
    void *ctx;
    void *raw;
} alloc_head;

void *mft__alloc(size_t size, size_t align) {
    if (align < _Alignof(alloc_head)) align = _Alignof(alloc_head);
    size_t pad = (sizeof(alloc_head) + align - 1) / align * align;
    if (size > SIZE_MAX - pad) return NULL;
    char *raw = g_alloc.alloc(size + pad, align, g_alloc.ctx);
    if (!raw) return NULL;
    alloc_head *h = (alloc_head *)(void *)(raw + pad) - 1;
    h->free = g_alloc.free;
    h->ctx = g_alloc.ctx;
    h->raw = raw;
    return raw + pad;
}

void mft__free(void *p) {
    if (!p) return;
    const alloc_head *h = (const alloc_head *)p - 1;
    h->free(h->raw, h->ctx);
}

void *mft__alloc_or_err(const char *fn, size_t size, size_t align) {
    void *p = mft__alloc(size, align);
    if (!p) mft__set_error(MFT_ERR_NOMEM, "%s: out of memory allocating %zu bytes", fn, size);
    return p;
}

int64_t mft_live_tensors(void) { return (int64_t)atomic_load(&mft__live_tensor_count); }
int64_t mft_live_storages(void) { return (int64_t)atomic_load(&mft__live_storage_count); }

const char *mft_version(void) { return MFT_VERSION_STRING; }
