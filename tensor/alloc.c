/* tensor/alloc.c — every allocation of the library goes through the
 * replaceable allocator hook here; live-object counters for leak checks. */
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include "internal.h"

atomic_llong mft__live_tensor_count = 0;
atomic_llong mft__live_storage_count = 0;

/* The default allocator over-allocates with malloc and aligns by hand,
 * keeping a small head (malloc's pointer and the usable capacity) in the
 * words before the block: glibc's aligned_alloc splits and re-merges chunks,
 * which doubled the cost of a small tensor (measured with callgrind on
 * 1x4x4x4 adds).
 *
 * Note [Block cache]
 * Large blocks (>= CACHE_MIN) are not returned to malloc when freed but kept
 * in a small table (CACHE_SLOTS entries, at most g_cache_limit bytes) and
 * handed out again for a request of a fitting size (capacity in [size,
 * size + size/8]) and alignment. Why: glibc serves such blocks with mmap or
 * from the top of the heap and gives them back to the OS on free (munmap,
 * trim), so every iteration of a training loop page-faulted its activations
 * in again: measured 1537 faults and 7.6 ms for a depthwise conv whose
 * kernel needs 1.3 ms. The threshold is 64 KiB, below glibc's 128 KiB mmap
 * threshold: kernels' mid-sized scratch buffers (a 230 KB padded input of a
 * first conv layer) page-faulted on every call with a 256 KiB one. Large
 * sizes are rounded up to 16 KiB so that slightly different sizes share
 * blocks. Eviction: the oldest entry. A spin lock guards the table (held for
 * a scan of 64 entries, never during malloc/free of a block that is not
 * evicted). */
#define CACHE_MIN ((size_t)64 << 10)
#define CACHE_ROUND ((size_t)16 << 10)
#define CACHE_SLOTS 64

typedef struct raw_head {
    void *raw;
    size_t cap; /* usable bytes from the aligned pointer on */
} raw_head;

typedef struct cache_entry {
    char *p; /* the aligned pointer (NULL: free slot) */
    size_t cap;
    uint64_t age;
} cache_entry;

static cache_entry g_cache[CACHE_SLOTS];
static size_t g_cache_bytes = 0;
static uint64_t g_cache_clock = 0;
static atomic_flag g_cache_lock = ATOMIC_FLAG_INIT;
static atomic_int g_cache_init = 0;
static size_t g_cache_limit = 0;

static void cache_lock(void) {
    while (atomic_flag_test_and_set_explicit(&g_cache_lock, memory_order_acquire)) {
    }
}
static void cache_unlock(void) { atomic_flag_clear_explicit(&g_cache_lock, memory_order_release); }

#if defined(__SANITIZE_ADDRESS__)
#define CACHE_DEFAULT_MB 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CACHE_DEFAULT_MB 0
#endif
#endif
#ifndef CACHE_DEFAULT_MB
#define CACHE_DEFAULT_MB 256
#endif

/* The limit from MFT_ALLOC_CACHE_MB on first use (call with the lock held). */
static void cache_init_locked(void) {
    if (atomic_load(&g_cache_init)) return;
    size_t mb = CACHE_DEFAULT_MB;
    const char *e = getenv("MFT_ALLOC_CACHE_MB");
    if (e && *e) {
        char *end;
        unsigned long long v = strtoull(e, &end, 10);
        if (*end == '\0' && v < ((unsigned long long)SIZE_MAX >> 20)) mb = (size_t)v;
    }
    g_cache_limit = mb << 20;
    atomic_store(&g_cache_init, 1);
}

static void raw_free(char *p) { free(((raw_head *)(void *)p)[-1].raw); }

/* Frees the oldest entries until `need` more bytes fit under the limit and a
 * slot is free; returns the blocks to free (outside the lock) in out. */
static int cache_evict_locked(size_t need, char **out) {
    int n = 0;
    for (;;) {
        int used = 0, oldest = -1;
        for (int i = 0; i < CACHE_SLOTS; i++)
            if (g_cache[i].p) {
                used++;
                if (oldest < 0 || g_cache[i].age < g_cache[oldest].age) oldest = i;
            }
        if (oldest < 0 || (used < CACHE_SLOTS && g_cache_bytes + need <= g_cache_limit)) return n;
        out[n++] = g_cache[oldest].p;
        g_cache_bytes -= g_cache[oldest].cap;
        g_cache[oldest].p = NULL;
    }
}

static void *default_alloc(size_t size, size_t align, void *ctx) {
    (void)ctx;
    if (align < _Alignof(raw_head)) align = _Alignof(raw_head);
    if (size >= CACHE_MIN && size <= SIZE_MAX - CACHE_ROUND) {
        size = (size + CACHE_ROUND - 1) / CACHE_ROUND * CACHE_ROUND;
        cache_lock();
        cache_init_locked();
        int best = -1;
        for (int i = 0; i < CACHE_SLOTS; i++) {
            const cache_entry *c = &g_cache[i];
            if (c->p && c->cap >= size && c->cap - size <= size / 8 &&
                ((uintptr_t)c->p & (align - 1)) == 0 && (best < 0 || c->cap < g_cache[best].cap))
                best = i;
        }
        if (best >= 0) {
            char *p = g_cache[best].p;
            g_cache[best].p = NULL;
            g_cache_bytes -= g_cache[best].cap;
            cache_unlock();
            return p;
        }
        cache_unlock();
    }
    if (size > SIZE_MAX - align - sizeof(raw_head)) return NULL;
    char *raw = malloc(size + align + sizeof(raw_head));
    if (!raw) return NULL;
    uintptr_t p = ((uintptr_t)raw + sizeof(raw_head) + align - 1) & ~(uintptr_t)(align - 1);
    ((raw_head *)p)[-1] = (raw_head){raw, size};
    return (void *)p;
}

static void default_free(void *p, void *ctx) {
    (void)ctx;
    const size_t cap = ((raw_head *)p)[-1].cap;
    if (cap >= CACHE_MIN) {
        char *evicted[CACHE_SLOTS + 1];
        int nev = 0;
        bool kept = false;
        cache_lock();
        cache_init_locked();
        if (cap <= g_cache_limit) {
            nev = cache_evict_locked(cap, evicted);
            for (int i = 0; i < CACHE_SLOTS; i++)
                if (!g_cache[i].p) {
                    g_cache[i] = (cache_entry){p, cap, ++g_cache_clock};
                    g_cache_bytes += cap;
                    kept = true;
                    break;
                }
        }
        cache_unlock();
        for (int i = 0; i < nev; i++) raw_free(evicted[i]);
        if (kept) return;
    }
    raw_free(p);
}

static void cache_shrink(size_t limit) {
    char *evicted[CACHE_SLOTS + 1];
    cache_lock();
    cache_init_locked();
    g_cache_limit = limit;
    int n = 0;
    while (g_cache_bytes > limit) { /* oldest first; bytes > 0 means an entry exists */
        int oldest = -1;
        for (int k = 0; k < CACHE_SLOTS; k++)
            if (g_cache[k].p && (oldest < 0 || g_cache[k].age < g_cache[oldest].age)) oldest = k;
        evicted[n++] = g_cache[oldest].p;
        g_cache_bytes -= g_cache[oldest].cap;
        g_cache[oldest].p = NULL;
    }
    cache_unlock();
    for (int i = 0; i < n; i++) raw_free(evicted[i]);
}

void mft_alloc_cache_set_limit(size_t bytes) { cache_shrink(bytes); }

void mft_alloc_cache_clear(void) {
    cache_lock();
    cache_init_locked();
    size_t limit = g_cache_limit;
    cache_unlock();
    cache_shrink(0);
    cache_lock();
    g_cache_limit = limit;
    cache_unlock();
}

size_t mft_alloc_cache_bytes(void) {
    cache_lock();
    size_t b = g_cache_bytes;
    cache_unlock();
    return b;
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
