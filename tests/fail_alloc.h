/* tests/fail_alloc.h — the allocation-failure injector the tests share: an
 * mft_allocator that counts calls and live blocks and fails call number
 * fail_at (1-based; 0 never; with sticky, every call from fail_at on).
 * Counters are atomic: kernels allocate scratch inside parallel regions.
 *   fa_install();               counting allocator on, counters zero
 *   fa_arm(k);                  the next run fails its k-th allocation
 *   fa_arm_mode(k, sticky);     the same, and sets sticky (fa_arm keeps it)
 *   ... run ...; g_fa.calls, g_fa.live
 *   g_fa.injected               failures injected since the last arm, and
 *   g_fa.failed_size            the size asked for by the first of them
 *   mft_set_allocator(NULL);    back to the default */
#ifndef MFT_TEST_FAIL_ALLOC_H
#define MFT_TEST_FAIL_ALLOC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include "mft/mft.h"

typedef struct fail_alloc {
    _Atomic long long calls, fail_at, live;
    bool sticky;
    _Atomic long long injected; /* NULLs returned since the last fa_arm */
    _Atomic size_t failed_size; /* size of the first of them */
} fail_alloc;
static fail_alloc g_fa;

static inline void *fa_alloc(size_t size, size_t align, void *ctx) {
    fail_alloc *c = ctx;
    const long long n = ++c->calls, k = c->fail_at;
    if (k > 0 && (n == k || (c->sticky && n > k))) {
        if (c->injected++ == 0) c->failed_size = size;
        return NULL;
    }
    if (align < sizeof(void *)) align = sizeof(void *);
    size_t rounded = (size + align - 1) / align * align;
    void *p = aligned_alloc(align, rounded ? rounded : align);
    if (p) c->live++;
    return p;
}

static inline void fa_free(void *p, void *ctx) {
    fail_alloc *c = ctx;
    if (!p) return;
    c->live--;
    free(p);
}

static inline void fa_install(void) {
    g_fa.calls = 0;
    g_fa.fail_at = 0;
    g_fa.live = 0;
    g_fa.sticky = false;
    g_fa.injected = 0;
    g_fa.failed_size = 0;
    mft_allocator a = {fa_alloc, fa_free, &g_fa};
    mft_set_allocator(&a);
}

static inline void fa_arm(long long k) {
    g_fa.calls = 0;
    g_fa.injected = 0;
    g_fa.failed_size = 0;
    g_fa.fail_at = k;
}

static inline void fa_arm_mode(long long k, bool sticky) {
    g_fa.sticky = sticky;
    fa_arm(k);
}

#endif
