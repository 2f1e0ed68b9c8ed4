/* bench/bench_dlpack.c — DLPack export + import cost against tensor size:
 * both are O(1) (no element is touched), so a 4 KB and a 400 MB tensor take
 * the same time per round trip, while a copy (mft_clone) grows with the bytes.
 *
 * One round trip = mft_to_dlpack(t) + mft_from_dlpack(m) + releasing the
 * imported tensor (which runs the export's deleter). Each is timed in batches
 * of --iters round trips, --reps batches per size, medians reported; the
 * two sizes alternate inside every repetition (bench_run) so machine drift
 * hits both alike. Before timing, every round trip of the first batch checks
 * that the imported tensor's data pointer is the exported tensor's (shared,
 * not copied) and that its strides and tag are the channels_last ones.
 *
 * Usage: bench_dlpack [--iters N] [--reps R]
 * Output: per size, ns per round trip (median over reps), the ratio
 * large / small (about 1 when O(1)), and one mft_clone of each size for
 * scale (median over reps). The machine load during the run is printed.
 * Exit status: 0 ok, 1 mft error or a copy detected, 2 usage. */
#include "bench_util.h"

#include <stdbool.h>

#include "mft/mft.h"

typedef struct size_case {
    const char *name;
    int64_t sizes[4];
    mft_tensor *t;
} size_case;

static int iters = 20000;

/* One export + import + release; false when the memory was not shared. */
static bool round_trip(mft_tensor *t) {
    struct DLManagedTensor *m = NULL;
    if (mft_to_dlpack(t, 0, &m) != MFT_OK) return false;
    mft_tensor *u = mft_from_dlpack(m, MFT_PRESERVE);
    if (!u) return false; /* the run fails: m is not reclaimed */
    bool shared = mft_tensor_data(u) == mft_tensor_data(t) &&
                  mft_tensor_format(u) == MFT_CHANNELS_LAST &&
                  mft_tensor_strides(u)[1] == 1;
    mft_tensor_release(u);
    return shared;
}

static double time_batch(mft_tensor *t) {
    double t0 = bench_now();
    for (int i = 0; i < iters; i++) {
        struct DLManagedTensor *m = NULL;
        mft_to_dlpack(t, 0, &m);
        mft_tensor *u = mft_from_dlpack(m, MFT_PRESERVE);
        bench_escape(u);
        mft_tensor_release(u);
    }
    return (bench_now() - t0) / iters;
}

static double time_clone(mft_tensor *t) {
    double t0 = bench_now();
    mft_tensor *c = mft_clone(t, MFT_PRESERVE);
    double dt = bench_now() - t0;
    bench_escape(c);
    mft_tensor_release(c);
    return dt;
}

int main(int argc, char **argv) {
    int reps = 15;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc &&
            bench_parse_int(argv[i + 1], &iters) == 0) {
            i++;
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc &&
                   bench_parse_int(argv[i + 1], &reps) == 0) {
            i++;
        } else {
            fprintf(stderr, "usage: %s [--iters N] [--reps R]\n", argv[0]);
            return 2;
        }
    }
    /* 1x4x16x16 f32 = 4 KiB; 4x100x512x512 f32 = 400 MiB */
    size_case cases[2] = {{"4 KiB  (1x4x16x16 f32)", {1, 4, 16, 16}, NULL},
                          {"400 MiB (4x100x512x512 f32)", {4, 100, 512, 512}, NULL}};
    for (int c = 0; c < 2; c++) {
        cases[c].t = mft_ones(4, cases[c].sizes, MFT_F32, MFT_CHANNELS_LAST);
        if (!cases[c].t) {
            fprintf(stderr, "bench_dlpack: %s\n", mft_last_error_message());
            return 1;
        }
        for (int i = 0; i < 1000; i++) {
            if (!round_trip(cases[c].t)) {
                fprintf(stderr, "bench_dlpack: %s: round trip not shared or failed: %s\n",
                        cases[c].name, mft_last_error_message());
                return 1;
            }
        }
    }
    double *rt[2], *cl[2];
    for (int c = 0; c < 2; c++) {
        rt[c] = calloc((size_t)reps, sizeof(double));
        cl[c] = calloc((size_t)reps, sizeof(double));
        if (!rt[c] || !cl[c]) return 1;
    }
    bench_load_snap l0 = bench_load_begin();
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < 2; k++) {
            int c = (r + k) % 2; /* alternate which size goes first */
            rt[c][r] = time_batch(cases[c].t);
            cl[c][r] = time_clone(cases[c].t);
        }
    }
    bench_load load = bench_load_end(&l0);
    double med[2], clone_med[2];
    printf("DLPack round trip (mft_to_dlpack + mft_from_dlpack + release), %d x %d per size\n",
           reps, iters);
    for (int c = 0; c < 2; c++) {
        med[c] = bench_median(rt[c], reps);
        clone_med[c] = bench_median(cl[c], reps);
        printf("  %-28s %8.1f ns per round trip   (mft_clone of it: %.3g us)\n", cases[c].name,
               med[c] * 1e9, clone_med[c] * 1e6);
    }
    printf("  ratio 400 MiB / 4 KiB: round trip %.2f, clone %.0f\n", med[1] / med[0],
           clone_med[1] / clone_med[0]);
    printf("  data pointer shared in every checked round trip: yes\n");
    if (load.ok)
        printf("  machine load: other processes used %.2f cores (steal %.2f)%s\n", load.other_cores,
               load.steal_cores, bench_load_disturbed(&load) ? " -- disturbed" : "");
    for (int c = 0; c < 2; c++) {
        free(rt[c]);
        free(cl[c]);
        mft_tensor_release(cases[c].t);
    }
    return 0;
}
