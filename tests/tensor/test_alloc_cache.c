/* tests/tensor/test_alloc_cache.c — the default allocator's block cache
 * (mft_alloc_cache_*, Note [Block cache] in tensor/alloc.c): a freed large
 * block is handed out again for a fitting request, not for a too-small or
 * much smaller one, the byte limit and eviction of the oldest block, clear
 * and a zero limit, small blocks never cached, and reused blocks are fully
 * usable (values written through a tensor read back). */
#include "harness.h"

static const void *data_of(const mft_tensor *t) { return mft_tensor_data(t); }

static mft_tensor *vec(int64_t n) {
    int64_t sz[1] = {n};
    return mft_empty(1, sz, MFT_F32, MFT_CONTIGUOUS);
}

static void test_reuse_and_fit(void) {
    mft_alloc_cache_set_limit((size_t)64 << 20);
    mft_alloc_cache_clear();
    CHECK(mft_alloc_cache_bytes() == 0);
    mft_tensor *a = vec(1 << 20); /* 4 MiB */
    const void *pa = data_of(a);
    mft_tensor_release(a);
    CHECK(mft_alloc_cache_bytes() >= ((size_t)4 << 20));
    mft_tensor *b = vec(1 << 20);
    CHECK_MSG(data_of(b) == pa, "same size: the cached block is reused");
    CHECK(mft_alloc_cache_bytes() == 0);
    /* the reused block is writable over its whole size */
    CHECK(mft_fill_(b, 3.0) == MFT_OK);
    int64_t last[1] = {(1 << 20) - 1};
    CHECK(mft_tensor_get(b, last) == 3.0);
    mft_tensor_release(b);
    /* a request far smaller than the cached block does not take it */
    mft_tensor *c = vec(1 << 18); /* 1 MiB */
    CHECK(data_of(c) != pa);
    CHECK(mft_alloc_cache_bytes() >= ((size_t)4 << 20));
    /* a slightly larger one can't either (capacity too small) */
    mft_tensor *d = vec((1 << 20) + (1 << 18));
    CHECK(data_of(d) != pa);
    mft_tensor_release(c);
    mft_tensor_release(d);
    mft_alloc_cache_clear();
    CHECK(mft_alloc_cache_bytes() == 0);
}

static void test_small_blocks_not_cached(void) {
    mft_alloc_cache_set_limit((size_t)64 << 20);
    mft_alloc_cache_clear();
    mft_tensor *a = vec(1000);
    mft_tensor_release(a);
    CHECK(mft_alloc_cache_bytes() == 0);
}

static void test_limit_and_eviction(void) {
    mft_alloc_cache_set_limit((size_t)10 << 20); /* 10 MiB */
    mft_alloc_cache_clear();
    mft_tensor *a = vec(1 << 20), *b = vec(1 << 20), *c = vec(1 << 20); /* 4 MiB each */
    const void *pa = data_of(a), *pc = data_of(c);
    mft_tensor_release(a); /* oldest */
    mft_tensor_release(b);
    CHECK(mft_alloc_cache_bytes() <= ((size_t)10 << 20));
    mft_tensor_release(c); /* needs room: a (the oldest) is evicted */
    CHECK(mft_alloc_cache_bytes() <= ((size_t)10 << 20));
    mft_tensor *x = vec(1 << 20), *y = vec(1 << 20);
    CHECK(data_of(x) != pa && data_of(y) != pa);
    CHECK(data_of(x) == pc || data_of(y) == pc);
    mft_tensor_release(x);
    mft_tensor_release(y);
    /* a block larger than the limit is never kept */
    mft_alloc_cache_clear();
    mft_tensor *big = vec(3 << 20); /* 12 MiB */
    mft_tensor_release(big);
    CHECK(mft_alloc_cache_bytes() == 0);
    /* limit 0 empties and disables the cache */
    mft_tensor *e = vec(1 << 20);
    mft_tensor_release(e);
    CHECK(mft_alloc_cache_bytes() > 0);
    mft_alloc_cache_set_limit(0);
    CHECK(mft_alloc_cache_bytes() == 0);
    mft_tensor *f = vec(1 << 20);
    mft_tensor_release(f);
    CHECK(mft_alloc_cache_bytes() == 0);
}

int main(void) {
    RUN(test_reuse_and_fit);
    RUN(test_small_blocks_not_cached);
    RUN(test_limit_and_eviction);
    TEST_MAIN_END();
}
