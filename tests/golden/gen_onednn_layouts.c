/* tests/golden/gen_onednn_layouts.c — writes tests/golden/onednn_layouts.txt,
 * the oneDNN golden data for tests/tensor/test_layout_desc.c.
 *
 * A test-data tool, not part of the build (the library never uses oneDNN).
 * Built and run by hand against Debian's libdnnl-dev 2.6:
 *   cc -O1 -o /tmp/gen_onednn_layouts tests/golden/gen_onednn_layouts.c -ldnnl
 *   /tmp/gen_onednn_layouts > tests/golden/onednn_layouts.txt
 *
 * For each (tag, sizes): dnnl_memory_desc_init_by_tag (f32) gives padded_dims,
 * the outer strides, the inner blocks and dnnl_memory_desc_get_size; then a
 * reorder from the plain row-major tag into the tag, from a source holding
 * (logical linear index + 1) as float into a destination pre-filled with -7,
 * gives the physical slot of every logical element (the slot holding i + 1;
 * +1 so that element 0 is told apart from a pad lane). The tool checks that
 * every element lands in exactly one slot and that every other slot was
 * written 0 (oneDNN's zero-pad invariant), and stops otherwise.
 *
 * Output, one case per line (numbers separated by spaces):
 *   <alias> <letters> <ndim> <sizes..> <padded..> <strides..> <nblocks>
 *   <(size dim)..> <bytes> <slot of element 0> <slot of element 1> ...
 * Lines starting with '#' are comments. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <oneapi/dnnl/dnnl.h>

#define OK(x)                                                                  \
    do {                                                                       \
        dnnl_status_t s_ = (x);                                                \
        if (s_ != dnnl_success) {                                              \
            fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #x, \
                    (int)s_);                                                  \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static dnnl_engine_t eng;
static dnnl_stream_t strm;

static void emit(const char *alias, const char *letters, dnnl_format_tag_t tag, int nd,
                 const long long *sz) {
    static const dnnl_format_tag_t plain[] = {dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc,
                                              dnnl_abcd, dnnl_abcde};
    dnnl_dims_t dims;
    long long numel = 1;
    for (int d = 0; d < nd; d++) dims[d] = sz[d], numel *= sz[d];
    dnnl_memory_desc_t md, src_md;
    OK(dnnl_memory_desc_init_by_tag(&md, nd, dims, dnnl_f32, tag));
    OK(dnnl_memory_desc_init_by_tag(&src_md, nd, dims, dnnl_f32, plain[nd]));
    size_t bytes = dnnl_memory_desc_get_size(&md), nslots = bytes / sizeof(float);
    float *src = malloc((size_t)numel * sizeof(float)), *dst = malloc(bytes);
    long long *pos = malloc((size_t)numel * sizeof(long long));
    for (long long i = 0; i < numel; i++) src[i] = (float)(i + 1), pos[i] = -1;
    for (size_t i = 0; i < nslots; i++) dst[i] = -7.0f;
    dnnl_memory_t ms, mdst;
    OK(dnnl_memory_create(&ms, &src_md, eng, src));
    OK(dnnl_memory_create(&mdst, &md, eng, dst));
    dnnl_primitive_desc_t pd;
    dnnl_primitive_t prim;
    OK(dnnl_reorder_primitive_desc_create(&pd, &src_md, eng, &md, eng, NULL));
    OK(dnnl_primitive_create(&prim, pd));
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, ms}, {DNNL_ARG_TO, mdst}};
    OK(dnnl_primitive_execute(prim, strm, 2, args));
    OK(dnnl_stream_wait(strm));
    for (size_t s = 0; s < nslots; s++) {
        float v = dst[s];
        if (v == 0.0f) continue;
        long long i = (long long)v - 1;
        if ((float)(i + 1) != v || i < 0 || i >= numel || pos[i] != -1) {
            fprintf(stderr, "%s: slot %zu holds %g\n", letters, s, (double)v);
            exit(1);
        }
        pos[i] = (long long)s;
    }
    for (long long i = 0; i < numel; i++)
        if (pos[i] < 0) {
            fprintf(stderr, "%s: element %lld not found\n", letters, i);
            exit(1);
        }
    const dnnl_blocking_desc_t *b = &md.format_desc.blocking;
    printf("%s %s %d", alias, letters, nd);
    for (int d = 0; d < nd; d++) printf(" %lld", (long long)md.dims[d]);
    for (int d = 0; d < nd; d++) printf(" %lld", (long long)md.padded_dims[d]);
    for (int d = 0; d < nd; d++) printf(" %lld", (long long)b->strides[d]);
    printf(" %d", b->inner_nblks);
    for (int k = 0; k < b->inner_nblks; k++)
        printf(" %lld %lld", (long long)b->inner_blks[k], (long long)b->inner_idxs[k]);
    printf(" %zu", bytes);
    for (long long i = 0; i < numel; i++) printf(" %lld", pos[i]);
    printf("\n");
    dnnl_primitive_destroy(prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_memory_destroy(ms);
    dnnl_memory_destroy(mdst);
    free(src);
    free(dst);
    free(pos);
}

int main(void) {
    OK(dnnl_engine_create(&eng, dnnl_cpu, 0));
    OK(dnnl_stream_create(&strm, eng, dnnl_stream_default_flags));
    dnnl_version_t const *v = dnnl_version();
    printf("# oneDNN %d.%d.%d layouts (tests/golden/gen_onednn_layouts.c; format described "
           "there)\n", v->major, v->minor, v->patch);
    static const long long cs[] = {1, 3, 15, 16, 17, 33};
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++) {
        long long s4[4] = {2, cs[i], 2, 3};
        emit("nchw", "abcd", dnnl_abcd, 4, s4);
        emit("nhwc", "acdb", dnnl_acdb, 4, s4);
        emit("nChw8c", "aBcd8b", dnnl_aBcd8b, 4, s4);
        emit("nChw16c", "aBcd16b", dnnl_aBcd16b, 4, s4);
    }
    static const long long c35[] = {3, 17};
    for (size_t i = 0; i < 2; i++) {
        long long s3[3] = {2, c35[i], 3}, s5[5] = {2, c35[i], 2, 2, 3};
        emit("ncw", "abc", dnnl_abc, 3, s3);
        emit("nwc", "acb", dnnl_acb, 3, s3);
        emit("nCw8c", "aBc8b", dnnl_aBc8b, 3, s3);
        emit("nCw16c", "aBc16b", dnnl_aBc16b, 3, s3);
        emit("ncdhw", "abcde", dnnl_abcde, 5, s5);
        emit("ndhwc", "acdeb", dnnl_acdeb, 5, s5);
        emit("nCdhw8c", "aBcde8b", dnnl_aBcde8b, 5, s5);
        emit("nCdhw16c", "aBcde16b", dnnl_aBcde16b, 5, s5);
    }
    static const long long oi[][4] = {{20, 3, 3, 2}, {17, 33, 2, 1}, {5, 16, 2, 1}, {16, 16, 1, 2}};
    for (size_t i = 0; i < sizeof oi / sizeof *oi; i++) {
        emit("oihw", "abcd", dnnl_abcd, 4, oi[i]);
        emit("ohwi", "acdb", dnnl_acdb, 4, oi[i]);
        emit("OIhw16i16o", "ABcd16b16a", dnnl_ABcd16b16a, 4, oi[i]);
        emit("Ohwi16o", "Acdb16a", dnnl_Acdb16a, 4, oi[i]);
        emit("OIhw4i16o4i", "ABcd4b16a4b", dnnl_ABcd4b16a4b, 4, oi[i]);
    }
    static const long long goi[][5] = {{2, 20, 3, 2, 1}, {2, 5, 17, 1, 2}};
    for (size_t i = 0; i < 2; i++) {
        emit("goihw", "abcde", dnnl_abcde, 5, goi[i]);
        emit("gOIhw16i16o", "aBCde16c16b", dnnl_aBCde16c16b, 5, goi[i]);
    }
    dnnl_stream_destroy(strm);
    dnnl_engine_destroy(eng);
    return 0;
}
