/* bench/bench_safetensors.c — loading safetensors files (mft/safetensors.h)
 * against a plain read() of the same bytes into memory, from the page cache
 * (each file is read once before timing). Cases:
 *   - the Fashion-MNIST model's parameters (mft_nn_fashion_cnn, channels_last,
 *     saved in logical and in physical mode);
 *   - one ~100 MB channels_last F32 tensor (16,64,160,160): physical mode
 *     loaded through the mapping (zero copy) and with MFT_SAFETENSORS_READ,
 *     and logical mode (C order on disk: the load reorders it into NHWC).
 * Each case is timed as "load" (the call + free_list) and "load + read"
 * (also summing every element, which is where a mapping pays its page
 * faults). Repetitions alternate the variants; medians are printed with the
 * ratio read() time / mft time (>= 1: mft is faster).
 * The library's block cache is off, so mft's copies get fresh pages as the
 * baseline's malloc does.
 * Usage: bench_safetensors [DIR] [REPS]   (DIR default /tmp, REPS default 9) */
#include "bench_util.h"
#include <fcntl.h>
#include <unistd.h>
#include "mft/mft.h"

static double sum_f32(const void *p, size_t nbytes) {
    const float *f = p;
    double s = 0;
    for (size_t i = 0; i < nbytes / 4; i++) s += f[i];
    return s;
}

/* read() of the whole file into fresh memory; touch: sum it. */
static double time_read(const char *path, bool touch) {
    double t0 = bench_now();
    int fd = open(path, O_RDONLY);
    off_t size = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
    char *buf = size > 0 ? malloc((size_t)size) : NULL;
    size_t got = 0;
    while (buf && got < (size_t)size) {
        ssize_t r = pread(fd, buf + got, (size_t)size - got, (off_t)got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    if (fd >= 0) close(fd);
    if (!buf || got != (size_t)size) {
        fprintf(stderr, "bench_safetensors: cannot read %s\n", path);
        exit(1);
    }
    if (touch) {
        double s = sum_f32(buf + 4096, got - 4096);
        bench_escape(&s);
    }
    bench_escape(buf);
    free(buf);
    return bench_now() - t0;
}

static double time_load(const char *path, unsigned flags, bool touch) {
    double t0 = bench_now();
    int n = 0;
    char **names = NULL;
    mft_tensor **ts = NULL;
    if (mft_safetensors_load(path, flags, &n, &names, &ts) != MFT_OK) {
        fprintf(stderr, "bench_safetensors: %s\n", mft_last_error_message());
        exit(1);
    }
    for (int i = 0; touch && i < n; i++) {
        if (mft_tensor_dtype(ts[i]) != MFT_F32) continue;
        double s = sum_f32(mft_tensor_data(ts[i]), (size_t)mft_tensor_numel(ts[i]) * 4);
        bench_escape(&s);
    }
    mft_safetensors_free_list(n, names, ts);
    return bench_now() - t0;
}

typedef struct variant {
    const char *label;
    const char *path;
    int kind; /* 0: read(), 1: mft load */
    unsigned flags;
    bool touch;
} variant;

static void run(const char *title, const variant *v, int nv, int reps) {
    double samples[8][64];
    for (int k = 0; k < nv; k++) /* warm-up: the page cache and the allocator */
        v[k].kind ? time_load(v[k].path, v[k].flags, v[k].touch) : time_read(v[k].path, v[k].touch);
    bench_load_snap snap = bench_load_begin();
    for (int r = 0; r < reps; r++)
        for (int j = 0; j < nv; j++) {
            int k = (j + r) % nv; /* round-robin, rotating start */
            samples[k][r] = v[k].kind ? time_load(v[k].path, v[k].flags, v[k].touch)
                                      : time_read(v[k].path, v[k].touch);
        }
    bench_load load = bench_load_end(&snap);
    printf("\n%s (median of %d, ms; ratio = read() time / this)%s\n", title, reps,
           bench_load_disturbed(&load) ? "  -- other processes were busy: DISTURBED" : "");
    double base[2] = {0, 0};
    for (int k = 0; k < nv; k++)
        if (!v[k].kind) base[v[k].touch] = bench_median(samples[k], reps);
    for (int k = 0; k < nv; k++) {
        double m = bench_median(samples[k], reps);
        printf("  %-50s %9.3f  x%.2f\n", v[k].label, m * 1e3, base[v[k].touch] / m);
    }
}

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    int reps = argc > 2 ? atoi(argv[2]) : 9;
    if (reps < 1 || reps > 64) reps = 9;
    mft_set_num_threads(1);
    /* no block cache: every load gets fresh memory, as the read() baseline's
     * malloc does (a cached block would skip the page faults) */
    mft_alloc_cache_set_limit(0);
    char pm_l[512], pm_p[512], big_p[512], big_l[512];
    snprintf(pm_l, sizeof pm_l, "%s/bench_st_model_logical.safetensors", dir);
    snprintf(pm_p, sizeof pm_p, "%s/bench_st_model_physical.safetensors", dir);
    snprintf(big_p, sizeof big_p, "%s/bench_st_big_physical.safetensors", dir);
    snprintf(big_l, sizeof big_l, "%s/bench_st_big_logical.safetensors", dir);

    /* the Fashion-MNIST model's parameters */
    mft_fashion_cnn_config cfg = {0};
    cfg.format = MFT_CHANNELS_LAST;
    cfg.seed = 1;
    mft_module *m = mft_nn_fashion_cnn(&cfg);
    if (!m) {
        fprintf(stderr, "bench_safetensors: %s\n", mft_last_error_message());
        return 1;
    }
    mft_tensor *params[16];
    const char *pnames[16];
    int np = mft_module_parameters(m, params, pnames, 16);
    if (mft_safetensors_save(pm_l, np, pnames, (const mft_tensor *const *)params, 0) != MFT_OK ||
        mft_safetensors_save(pm_p, np, pnames, (const mft_tensor *const *)params,
                             MFT_SAFETENSORS_PHYSICAL) != MFT_OK) {
        fprintf(stderr, "bench_safetensors: %s\n", mft_last_error_message());
        return 1;
    }
    printf("bench_safetensors: %d parameters, %lld elements (Fashion-MNIST CNN, channels_last); "
           "files in %s, read from the page cache; 1 thread\n",
           np, (long long)mft_module_num_parameters(m), dir);
    mft_module_free(m);
    const variant model[] = {
        {"read() of the file", pm_l, 0, 0, false},
        {"physical file, mmap load (zero copy)", pm_p, 1, 0, false},
        {"physical file, MFT_SAFETENSORS_READ", pm_p, 1, MFT_SAFETENSORS_READ, false},
        {"logical file, mmap load (conv weights reordered)", pm_l, 1, 0, false},
        {"read() of the file + sum", pm_l, 0, 0, true},
        {"physical file, mmap load + sum", pm_p, 1, 0, true},
        {"logical file, mmap load + sum", pm_l, 1, 0, true},
    };
    run("Fashion-MNIST parameters", model, 7, reps * 5);

    /* one ~100 MB channels_last tensor */
    const int64_t s[4] = {16, 64, 160, 160};
    mft_tensor *big = mft_rand(4, s, MFT_F32, MFT_CHANNELS_LAST, 3);
    const char *bn = "activation";
    if (!big || mft_safetensors_save(big_p, 1, &bn, (const mft_tensor *const *)&big,
                                     MFT_SAFETENSORS_PHYSICAL) != MFT_OK ||
        mft_safetensors_save(big_l, 1, &bn, (const mft_tensor *const *)&big, 0) != MFT_OK) {
        fprintf(stderr, "bench_safetensors: %s\n", mft_last_error_message());
        return 1;
    }
    printf("\n%lld MB file: F32 (16,64,160,160) channels_last\n",
           (long long)(mft_tensor_numel(big) * 4 / 1000000));
    mft_tensor_release(big);
    const variant bigv[] = {
        {"read() of the file", big_p, 0, 0, false},
        {"physical file, mmap load (zero copy)", big_p, 1, 0, false},
        {"physical file, MFT_SAFETENSORS_READ", big_p, 1, MFT_SAFETENSORS_READ, false},
        {"logical file, mmap load + NHWC reorder", big_l, 1, 0, false},
        {"read() of the file + sum", big_p, 0, 0, true},
        {"physical file, mmap load + sum", big_p, 1, 0, true},
        {"logical file, mmap load + NHWC reorder + sum", big_l, 1, 0, true},
    };
    run("100 MB tensor", bigv, 7, reps);
    remove(pm_l);
    remove(pm_p);
    remove(big_p);
    remove(big_l);
    return 0;
}
