/* tests/io/test_safetensors.c — mft/safetensors.h: round trips of every dtype,
 * ranks 0-5, empty tensors, channels_last and nChw16c (values, tags, zero pad
 * lanes) in both save modes and both load modes; the golden files of
 * tests/golden/safetensors/ (written byte by byte by gen_safetensors.py): the
 * valid ones load with the values and tags the script put in, every malformed
 * one is refused with the expected status and message, by load and by
 * load_into (targets untouched); the writer's byte layout (header size a
 * multiple of 8, order by element size then name, each tensor aligned);
 * zero-copy views into one mapping that outlive the list and the file's
 * bytes, copy-on-write; load_into all-or-nothing (hashes before / after);
 * argument errors. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <sys/stat.h>
#include <unistd.h>
#include "test_util.h"

static char tmpdir[256];

static void tmp_path(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* Logical values: tu_formula of the linear index (the formula of
 * tests/io/safetensors_ref.py), exact in every dtype. */
static void fill(mft_tensor *t, int salt) { tu_formula_walk(t, salt, true); }
static bool has_formula(const mft_tensor *t, int salt) {
    return tu_formula_walk((mft_tensor *)t, salt, false);
}

static int find(int n, char **names, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return i;
    return -1;
}

/* Saves two tensors filled with the formula (salts 1, 2) to tmpdir/file. */
static void save_two(char *p, size_t plen, const char *file, const char *const names[2],
                     mft_tensor *a, mft_tensor *b, unsigned flags) {
    fill(a, 1);
    fill(b, 2);
    tmp_path(p, plen, file);
    const mft_tensor *ts[2] = {a, b};
    CHECK(mft_safetensors_save(p, 2, names, ts, flags) == MFT_OK);
}

/* ------------------------------------------------------------------ round trips */
static void round_trip(const char *label, const mft_tensor *src, int salt, unsigned save_flags) {
    char p[300];
    tmp_path(p, sizeof p, "rt.safetensors");
    const char *name = "t";
    CHECK_MSG(mft_safetensors_save(p, 1, &name, &src, save_flags) == MFT_OK, "%s: %s", label,
              mft_last_error_message());
    for (unsigned lf = 0; lf <= MFT_SAFETENSORS_READ; lf += MFT_SAFETENSORS_READ) {
        int n = -1;
        char **names = NULL;
        mft_tensor **ts = NULL;
        mft_status st = mft_safetensors_load(p, lf, &n, &names, &ts);
        CHECK_MSG(st == MFT_OK && n == 1, "%s (load flags %u): %s", label, lf,
                  mft_last_error_message());
        if (st != MFT_OK || n != 1) continue;
        const mft_tensor *t = ts[0];
        CHECK_MSG(strcmp(names[0], "t") == 0, "%s", label);
        CHECK_MSG(tu_has_sizes(t, mft_tensor_ndim(src), mft_tensor_sizes(src)) &&
                      mft_tensor_dtype(t) == mft_tensor_dtype(src),
                  "%s: sizes or dtype differ", label);
        CHECK_MSG(has_formula(t, salt), "%s (save %u, load %u): values differ", label, save_flags,
                  lf);
        CHECK_MSG(mft_tensor_hash(t) == mft_tensor_hash(src), "%s: hash differs", label);
        const int nd = mft_tensor_ndim(src);
        if (nd >= 3 && nd <= 5)
            CHECK_MSG(mft_tensor_format(t) == mft_tensor_format(src), "%s: tag %s, saved %s", label,
                      mft_format_name(mft_tensor_format(t)), mft_format_name(mft_tensor_format(src)));
        if (mft_tensor_is_blocked(src)) {
            CHECK_MSG(mft_tensor_is_blocked(t) && mft_tensor_check_padding(t) == MFT_OK,
                      "%s: not blocked or pads not zero", label);
        }
        mft_format f = mft_tensor_format(src);
        if (f == MFT_CHANNELS_LAST || f == MFT_NCHW16C)
            CHECK_MSG(mft_tensor_is_contiguous(t, f), "%s: not packed %s", label, mft_format_name(f));
        mft_safetensors_free_list(n, names, ts);
    }
    remove(p);
}

static void test_round_trips_dtypes_ranks(void) {
    const mft_dtype dts[5] = {MFT_F32, MFT_F64, MFT_I32, MFT_I64, MFT_U8};
    const int64_t sz[5] = {2, 3, 2, 3, 2};
    for (int d = 0; d < 5; d++)
        for (int r = 0; r <= 5; r++)
            for (int mode = 0; mode < 2; mode++) {
                mft_tensor *t = mft_empty(r, sz, dts[d], MFT_CONTIGUOUS);
                fill(t, r + d);
                char label[64];
                snprintf(label, sizeof label, "%s rank %d mode %d", mft_dtype_name(dts[d]), r, mode);
                round_trip(label, t, r + d, mode ? MFT_SAFETENSORS_PHYSICAL : 0);
                mft_tensor_release(t);
            }
    /* empty tensors, one of each rank 1-4 */
    for (int r = 1; r <= 4; r++) {
        int64_t es[4] = {2, 0, 3, 1};
        if (r == 1) es[0] = 0;
        mft_tensor *t = mft_zeros(r, es, MFT_F64, MFT_CONTIGUOUS);
        round_trip("empty", t, 0, 0);
        round_trip("empty physical", t, 0, MFT_SAFETENSORS_PHYSICAL);
        mft_tensor_release(t);
    }
}

static void test_round_trips_formats(void) {
    const int64_t s4[4] = {2, 17, 3, 4}, s5[5] = {2, 3, 2, 3, 4}, s3[3] = {2, 5, 3};
    for (int mode = 0; mode < 2; mode++) {
        const unsigned fl = mode ? MFT_SAFETENSORS_PHYSICAL : 0;
        mft_tensor *cl = mft_empty(4, s4, MFT_F32, MFT_CHANNELS_LAST);
        fill(cl, 3);
        round_trip("channels_last", cl, 3, fl);
        mft_tensor *b16 = mft_to_format(cl, MFT_NCHW16C);
        round_trip("nChw16c", b16, 3, fl);
        mft_tensor *b8 = mft_to_format(cl, MFT_NCHW8C);
        round_trip("nChw8c", b8, 3, fl);
        mft_tensor *cl5 = mft_empty(5, s5, MFT_I64, MFT_CHANNELS_LAST);
        fill(cl5, 4);
        round_trip("channels_last_3d", cl5, 4, fl);
        mft_tensor *cl3 = mft_empty(3, s3, MFT_U8, MFT_CHANNELS_LAST);
        fill(cl3, 5);
        round_trip("NLC", cl3, 5, fl);
        /* C == 1: strides fit both orders; the tag still comes back */
        const int64_t c1[4] = {2, 1, 3, 2};
        mft_tensor *amb = mft_empty(4, c1, MFT_F32, MFT_CHANNELS_LAST);
        fill(amb, 6);
        round_trip("channels_last C=1", amb, 6, fl);
        /* a non-dense view (every other W) and a transposed matrix */
        mft_tensor *sl = mft_slice(cl, 3, 0, 4, 2);
        mft_tensor *m = mft_empty(2, (int64_t[]){3, 5}, MFT_F64, MFT_CONTIGUOUS);
        fill(m, 7);
        mft_tensor *mt = mft_transpose(m, 0, 1);
        mft_tensor *mtc = mft_contiguous(mt, MFT_CONTIGUOUS);
        int64_t z = 0;
        CHECK(mft_tensor_set(mtc, (int64_t[]){0, 0}, mft_tensor_get(mtc, (int64_t[]){0, 0})) ==
              MFT_OK);
        (void)z;
        char p[300];
        tmp_path(p, sizeof p, "views.safetensors");
        const char *names[2] = {"slice", "mt"};
        const mft_tensor *ts[2] = {sl, mt};
        CHECK(mft_safetensors_save(p, 2, names, ts, fl) == MFT_OK);
        int n = 0;
        char **nm = NULL;
        mft_tensor **lt = NULL;
        CHECK(mft_safetensors_load(p, 0, &n, &nm, &lt) == MFT_OK && n == 2);
        for (int i = 0; i < n; i++) {
            const mft_tensor *want = strcmp(nm[i], "slice") == 0 ? sl : mtc;
            CHECK_MSG(mft_tensor_hash(lt[i]) == mft_tensor_hash(want), "view %s (mode %d)", nm[i],
                      mode);
        }
        mft_safetensors_free_list(n, nm, lt);
        remove(p);
        mft_tensor_release(sl);
        mft_tensor_release(m);
        mft_tensor_release(mt);
        mft_tensor_release(mtc);
        mft_tensor_release(amb);
        mft_tensor_release(cl3);
        mft_tensor_release(cl5);
        mft_tensor_release(b8);
        mft_tensor_release(b16);
        mft_tensor_release(cl);
    }
}

/* ------------------------------------------------------------------ the writer's bytes */
static uint64_t get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void test_writer_layout(void) {
    /* names and sizes chosen so that sorting by name alone would misalign */
    mft_tensor *a = mft_ones(1, (int64_t[]){3}, MFT_U8, MFT_CONTIGUOUS);
    mft_tensor *b = mft_ones(1, (int64_t[]){1}, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *c = mft_ones(1, (int64_t[]){1}, MFT_I64, MFT_CONTIGUOUS);
    mft_tensor *d = mft_ones(1, (int64_t[]){2}, MFT_F64, MFT_CONTIGUOUS);
    const char *names[4] = {"a", "b", "c", "d"};
    const mft_tensor *ts[4] = {a, b, c, d};
    char p[300];
    tmp_path(p, sizeof p, "order.safetensors");
    CHECK(mft_safetensors_save(p, 4, names, ts, 0) == MFT_OK);
    size_t n = 0;
    unsigned char *buf = tu_read_file(p, &n);
    CHECK(buf && n >= 8);
    if (buf && n >= 8) {
        uint64_t h = get_u64(buf);
        CHECK_MSG(h % 8 == 0, "header size %llu", (unsigned long long)h);
        CHECK(n == 8 + h + 16 + 8 + 4 + 3);
        /* the reference order: I64/F64 (8 bytes) by name, then F32, then U8 */
        char *text = malloc(h + 1);
        memcpy(text, buf + 8, h);
        text[h] = '\0';
        const char *pc = strstr(text, "\"c\":"), *pd = strstr(text, "\"d\":"),
                   *pb = strstr(text, "\"b\":"), *pa = strstr(text, "\"a\":");
        CHECK(pc && pd && pb && pa && pc < pd && pd < pb && pb < pa);
        CHECK(strstr(text, "\"c\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}"));
        CHECK(strstr(text, "\"d\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]}"));
        CHECK(strstr(text, "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[24,28]}"));
        CHECK(strstr(text, "\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[28,31]}"));
        /* padding: spaces only, after the closing brace */
        char *end = strrchr(text, '}');
        CHECK(end != NULL);
        for (char *q = end ? end + 1 : text; end && *q; q++) CHECK(*q == ' ');
        free(text);
    }
    free(buf);
    remove(p);
    /* the .tmp file is gone and nothing is left on a failing save */
    char tmp[310];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    CHECK(access(tmp, F_OK) != 0);
    mft_tensor_release(a);
    mft_tensor_release(b);
    mft_tensor_release(c);
    mft_tensor_release(d);
}

/* ------------------------------------------------------------------ zero copy */
static void test_zero_copy_lifetime(void) {
    const int64_t s4[4] = {2, 3, 4, 5};
    mft_tensor *cl = mft_empty(4, s4, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *v = mft_empty(1, (int64_t[]){7}, MFT_F64, MFT_CONTIGUOUS);
    char p[300];
    const char *names[2] = {"x", "v"};
    const mft_tensor *ts[2] = {cl, v};
    save_two(p, sizeof p, "zc.safetensors", names, cl, v, MFT_SAFETENSORS_PHYSICAL);
    int n = 0;
    char **nm = NULL;
    mft_tensor **lt = NULL;
    CHECK(mft_safetensors_load(p, 0, &n, &nm, &lt) == MFT_OK && n == 2);
    int ix = find(n, nm, "x"), iv = find(n, nm, "v");
    CHECK(ix >= 0 && iv >= 0);
    if (ix < 0 || iv < 0) return;
    mft_tensor *x = mft_tensor_retain(lt[ix]), *vv = mft_tensor_retain(lt[iv]);
    /* both view one mapping: their data lie as far apart as in the file
     * (v: F64 first at offset 0, x: 56 bytes later) */
    CHECK_EQ_I((char *)mft_tensor_data(x) - (char *)mft_tensor_data(vv), 7 * 8);
    CHECK(mft_tensor_is_contiguous(x, MFT_CHANNELS_LAST));
    CHECK(mft_tensor_format(x) == MFT_CHANNELS_LAST);
    CHECK_EQ_I(mft_tensor_strides(x)[1], 1); /* the NHWC bytes viewed, not copied */
    mft_safetensors_free_list(n, nm, lt);
    /* the tensors outlive the list; writing is copy-on-write */
    CHECK(has_formula(x, 1) && has_formula(vv, 2));
    CHECK(mft_tensor_set(x, (int64_t[]){0, 0, 0, 0}, 99.0) == MFT_OK);
    mft_tensor_release(vv);
    CHECK(mft_tensor_get(x, (int64_t[]){0, 0, 0, 0}) == 99.0);
    mft_tensor_release(x);
    /* the file is unchanged: it still loads with the old value (READ mode) */
    CHECK(mft_safetensors_load(p, MFT_SAFETENSORS_READ, &n, &nm, &lt) == MFT_OK && n == 2);
    ix = find(n, nm, "x");
    CHECK(ix >= 0 && has_formula(lt[ix], 1));
    /* READ mode: each tensor owns its memory */
    iv = find(n, nm, "v");
    CHECK(ix >= 0 && iv >= 0 && !mft_tensor_shares_storage(lt[ix], lt[iv]));
    CHECK((char *)mft_tensor_data(lt[ix]) - (char *)mft_tensor_data(lt[iv]) != 7 * 8);
    mft_safetensors_free_list(n, nm, lt);
    /* logical mode: the channels_last entry is reordered back into new memory */
    CHECK(mft_safetensors_save(p, 2, names, ts, 0) == MFT_OK);
    CHECK(mft_safetensors_load(p, 0, &n, &nm, &lt) == MFT_OK && n == 2);
    ix = find(n, nm, "x");
    iv = find(n, nm, "v");
    CHECK(ix >= 0 && iv >= 0 && mft_tensor_is_contiguous(lt[ix], MFT_CHANNELS_LAST) &&
          (char *)mft_tensor_data(lt[ix]) - (char *)mft_tensor_data(lt[iv]) != 7 * 8);
    mft_safetensors_free_list(n, nm, lt);
    remove(p);
    mft_tensor_release(cl);
    mft_tensor_release(v);
}

/* ------------------------------------------------------------------ load_into */
static void test_load_into_all_or_nothing(void) {
    const int64_t s4[4] = {2, 3, 2, 2};
    mft_tensor *w = mft_empty(4, s4, MFT_F32, MFT_CONTIGUOUS);
    mft_tensor *b = mft_empty(1, (int64_t[]){3}, MFT_F64, MFT_CONTIGUOUS);
    char p[300];
    const char *names[2] = {"w", "b"};
    save_two(p, sizeof p, "into.safetensors", names, w, b, 0);
    /* targets: w channels_last (keeps its layout), b plain */
    mft_tensor *tw = mft_zeros(4, s4, MFT_F32, MFT_CHANNELS_LAST);
    mft_tensor *tb = mft_zeros(1, (int64_t[]){3}, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *tbad = mft_zeros(1, (int64_t[]){4}, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *tdt = mft_zeros(1, (int64_t[]){3}, MFT_F32, MFT_CONTIGUOUS);
    tu_dst_state s_w = tu_snap(tw), s_b = tu_snap(tb);
    mft_tensor *t1[2] = {tw, tbad};
    CHECK(mft_safetensors_load_into(p, 2, names, t1, 0) == MFT_ERR_SHAPE);
    TU_HAS("mft_safetensors_load_into");
    TU_CHECK_UNCHANGED(tw, s_w);
    mft_tensor *t2[2] = {tw, tdt};
    CHECK(mft_safetensors_load_into(p, 2, names, t2, 0) == MFT_ERR_DTYPE);
    TU_CHECK_UNCHANGED(tw, s_w);
    const char *missing[2] = {"w", "nope"};
    mft_tensor *t3[2] = {tw, tb};
    CHECK(mft_safetensors_load_into(p, 2, missing, t3, 0) == MFT_ERR_INVALID);
    TU_HAS("nope");
    TU_CHECK_UNCHANGED(tw, s_w);
    TU_CHECK_UNCHANGED(tb, s_b);
    const char *twice[2] = {"w", "w"};
    CHECK(mft_safetensors_load_into(p, 2, twice, t3, 0) == MFT_ERR_INVALID);
    TU_CHECK_UNCHANGED(tw, s_w);
    /* a broadcast target cannot be written */
    mft_tensor *one = mft_zeros(1, (int64_t[]){1}, MFT_F64, MFT_CONTIGUOUS);
    mft_tensor *bc = mft_expand(one, 1, (int64_t[]){3});
    mft_tensor *t4[2] = {tw, bc};
    CHECK(mft_safetensors_load_into(p, 2, names, t4, 0) == MFT_ERR_OVERLAP);
    TU_CHECK_UNCHANGED(tw, s_w);
    /* a corrupted file: nothing written */
    char bad[300];
    tmp_path(bad, sizeof bad, "into_bad.safetensors");
    size_t n = 0;
    unsigned char *buf = tu_read_file(p, &n);
    FILE *f = fopen(bad, "wb");
    CHECK(buf && f && fwrite(buf, 1, n - 1, f) == n - 1); /* truncated by one byte */
    if (f) fclose(f);
    free(buf);
    for (unsigned fl = 0; fl <= MFT_SAFETENSORS_READ; fl += MFT_SAFETENSORS_READ) {
        CHECK(mft_safetensors_load_into(bad, 2, names, t3, fl) == MFT_ERR_CORRUPT);
        TU_CHECK_UNCHANGED(tw, s_w);
        TU_CHECK_UNCHANGED(tb, s_b);
    }
    /* success: values in the targets' own layouts */
    for (unsigned fl = 0; fl <= MFT_SAFETENSORS_READ; fl += MFT_SAFETENSORS_READ) {
        CHECK(mft_safetensors_load_into(p, 2, names, t3, fl) == MFT_OK);
        CHECK(has_formula(tw, 1) && has_formula(tb, 2));
        CHECK(mft_tensor_is_contiguous(tw, MFT_CHANNELS_LAST) &&
              mft_tensor_format(tw) == MFT_CHANNELS_LAST);
        CHECK(mft_tensor_version(tw) > s_w.version);
    }
    remove(p);
    remove(bad);
    mft_tensor_release(bc);
    mft_tensor_release(one);
    mft_tensor_release(w);
    mft_tensor_release(b);
    mft_tensor_release(tw);
    mft_tensor_release(tb);
    mft_tensor_release(tbad);
    mft_tensor_release(tdt);
}

/* ------------------------------------------------------------------ golden files */
static mft_status status_named(const char *s) {
    for (int i = 0; i < MFT_STATUS_COUNT; i++) {
        char want[48];
        snprintf(want, sizeof want, "MFT_ERR_%s", s);
        static const char *const names[] = {
#define X_(name, desc) #name,
            MFT_STATUS_LIST(X_)
#undef X_
        };
        if (strcmp(names[i], want) == 0 || (strcmp(s, "OK") == 0 && i == MFT_OK))
            return (mft_status)i;
    }
    return MFT_STATUS_COUNT;
}

static void check_valid_values(const char *file, int n, char **names, mft_tensor **ts) {
    if (strstr(file, "valid_logical_cl") || strstr(file, "valid_physical_cl")) {
        int i = find(n, names, "x");
        CHECK(i >= 0);
        if (i < 0) return;
        /* the script put logical value c*4 + h*2 + w at (0,c,h,w) */
        for (int c = 0; c < 3; c++)
            for (int h = 0; h < 2; h++)
                for (int w = 0; w < 2; w++)
                    CHECK(mft_tensor_get(ts[i], (int64_t[]){0, c, h, w}) == c * 4 + h * 2 + w);
        CHECK(mft_tensor_format(ts[i]) == MFT_CHANNELS_LAST &&
              mft_tensor_format_origin(ts[i]) == MFT_DECLARED);
        char prov[512];
        mft_tensor_provenance(ts[i], prov, sizeof prov);
        CHECK_MSG(strstr(prov, "restored from metadata") != NULL, "%s", prov);
    } else if (strstr(file, "valid_physical_16c")) {
        int i = find(n, names, "x");
        CHECK(i >= 0 && mft_tensor_format(ts[i]) == MFT_NCHW16C);
        for (int c = 0; i >= 0 && c < 3; c++)
            for (int w = 0; w < 2; w++)
                CHECK(mft_tensor_get(ts[i], (int64_t[]){0, c, 0, w}) == c * 2 + w);
    } else if (strstr(file, "valid_empty_scalar")) {
        int e = find(n, names, "e"), s = find(n, names, "s");
        CHECK(e >= 0 && s >= 0 && mft_tensor_numel(ts[e]) == 0 && mft_tensor_ndim(ts[s]) == 0);
        CHECK(s >= 0 && mft_tensor_get(ts[s], NULL) == -7);
    } else if (strstr(file, "valid_plain") || strstr(file, "valid_unpadded")) {
        int b = find(n, names, "b");
        CHECK(b >= 0 && mft_tensor_get(ts[b], (int64_t[]){3}) == 6);
        char prov[512];
        mft_tensor_provenance(ts[b], prov, sizeof prov);
        CHECK_MSG(strstr(prov, "inferred from the file's strides") != NULL, "%s", prov);
    } else if (strstr(file, "valid_metadata_only")) {
        CHECK(n == 0);
    }
}

static void test_golden_files(void) {
    char list[512];
    snprintf(list, sizeof list, "%s/safetensors/expected.txt", MFT_TEST_DATA_DIR);
    FILE *f = fopen(list, "r");
    CHECK_MSG(f != NULL, "cannot open %s", list);
    if (!f) return;
    char line[512];
    int files = 0, bad = 0;
    /* the load_into target: "x" of bad_pad_lane's logical sizes, so that a
     * file whose header is valid fails on its bytes, not on the request */
    mft_tensor *target = mft_full(4, (int64_t[]){1, 3, 1, 2}, MFT_F32, MFT_CONTIGUOUS, 5);
    while (fgets(line, sizeof line, f)) {
        char file[256], status[32], needle[256];
        if (line[0] == '#' || sscanf(line, "%255s %31s %255[^\n]", file, status, needle) != 3)
            continue;
        char path[800];
        snprintf(path, sizeof path, "%s/safetensors/%s", MFT_TEST_DATA_DIR, file);
        const mft_status want = status_named(status);
        CHECK_MSG(want != MFT_STATUS_COUNT, "%s: unknown status %s", file, status);
        files++;
        for (unsigned fl = 0; fl <= MFT_SAFETENSORS_READ; fl += MFT_SAFETENSORS_READ) {
            int n = -1;
            char **names = (char **)1;
            mft_tensor **ts = (mft_tensor **)1;
            mft_clear_error();
            mft_status st = mft_safetensors_load(path, fl, &n, &names, &ts);
            CHECK_MSG(st == want, "%s (flags %u): %s, expected %s: %s", file, fl,
                      mft_status_str(st), mft_status_str(want), mft_last_error_message());
            if (want == MFT_OK) {
                if (st == MFT_OK) check_valid_values(file, n, names, ts);
                mft_safetensors_free_list(n, names, ts);
                continue;
            }
            bad++;
            CHECK(n == 0 && names == NULL && ts == NULL);
            const char *msg = mft_last_error_message();
            CHECK_MSG(strstr(msg, "mft_safetensors_load: ") == msg && strstr(msg, file) &&
                          strstr(msg, needle),
                      "%s: message '%s' lacks '%s'", file, msg, needle);
            /* load_into refuses it too and leaves its target alone */
            tu_dst_state before = tu_snap(target);
            const char *nm = "x";
            st = mft_safetensors_load_into(path, 1, &nm, &target, fl);
            CHECK_MSG(st == want, "%s: load_into %s", file, mft_status_str(st));
            TU_CHECK_UNCHANGED(target, before);
        }
    }
    fclose(f);
    mft_tensor_release(target);
    CHECK_MSG(files >= 45 && bad >= 80, "%d golden files, %d refusals", files, bad);
}

/* ------------------------------------------------------------------ argument errors */
static void test_errors(void) {
    char p[300];
    tmp_path(p, sizeof p, "err.safetensors");
    mft_tensor *t = mft_zeros(1, (int64_t[]){2}, MFT_F32, MFT_CONTIGUOUS);
    const mft_tensor *ts[2] = {t, t};
    const char *dup[2] = {"a", "a"};
    CHECK(mft_safetensors_save(p, 2, dup, ts, 0) == MFT_ERR_INVALID);
    TU_HAS("given twice");
    const char *meta[1] = {"__metadata__"};
    CHECK(mft_safetensors_save(p, 1, meta, ts, 0) == MFT_ERR_INVALID);
    TU_HAS("reserved");
    const char *empty[1] = {""};
    CHECK(mft_safetensors_save(p, 1, empty, ts, 0) == MFT_ERR_INVALID);
    const char *latin1[1] = {"caf\xe9"};
    CHECK(mft_safetensors_save(p, 1, latin1, ts, 0) == MFT_ERR_INVALID);
    TU_HAS("UTF-8");
    const char *ok[1] = {"a"};
    CHECK(mft_safetensors_save(p, 1, ok, ts, 4u) == MFT_ERR_INVALID);
    TU_HAS("flag");
    CHECK(mft_safetensors_save(NULL, 1, ok, ts, 0) == MFT_ERR_NULL);
    CHECK(mft_safetensors_save(p, -1, ok, ts, 0) == MFT_ERR_INVALID);
    const mft_tensor *none[1] = {NULL};
    CHECK(mft_safetensors_save(p, 1, ok, none, 0) == MFT_ERR_NULL);
    CHECK(access(p, F_OK) != 0);
    char dir[300];
    tmp_path(dir, sizeof dir, "no/such/dir.safetensors");
    CHECK(mft_safetensors_save(dir, 1, ok, ts, 0) == MFT_ERR_IO);
    TU_HAS("cannot create");
    int n = 5;
    char **names = NULL;
    mft_tensor **lt = NULL;
    CHECK(mft_safetensors_load(dir, 0, &n, &names, &lt) == MFT_ERR_IO && n == 0);
    TU_HAS("cannot open");
    CHECK(mft_safetensors_load(p, 1u, &n, &names, &lt) == MFT_ERR_INVALID);
    CHECK(mft_safetensors_load(NULL, 0, &n, &names, &lt) == MFT_ERR_NULL);
    CHECK(mft_safetensors_load(p, 0, NULL, &names, &lt) == MFT_ERR_NULL);
    CHECK(mft_safetensors_load(tmpdir, 0, &n, &names, &lt) == MFT_ERR_IO); /* a directory */
    mft_tensor *tt[1] = {t};
    CHECK(mft_safetensors_load_into(p, 1, ok, tt, 8u) == MFT_ERR_INVALID);
    CHECK(mft_safetensors_load_into(p, -1, ok, tt, 0) == MFT_ERR_INVALID);
    mft_safetensors_free_list(0, NULL, NULL);
    /* zero tensors: a metadata-only file that loads back empty */
    CHECK(mft_safetensors_save(p, 0, NULL, NULL, 0) == MFT_OK);
    CHECK(mft_safetensors_load(p, 0, &n, &names, &lt) == MFT_OK && n == 0 && !names && !lt);
    remove(p);
    mft_tensor_release(t);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mft_st_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_round_trips_dtypes_ranks);
    RUN(test_round_trips_formats);
    RUN(test_writer_layout);
    RUN(test_zero_copy_lifetime);
    RUN(test_load_into_all_or_nothing);
    RUN(test_golden_files);
    RUN(test_errors);
    rmdir(tmpdir);
    TEST_MAIN_END();
}
