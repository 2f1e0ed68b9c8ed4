/* tools/explain.h — what the files of mft-explain share: argument parsing and
 * error exits (mft-explain.c), the op and conversion explanations
 * (explain_op.c) and the model of PyTorch 1.13's layout choices they are
 * compared with (explain_pytorch.c).
 *
 * Note [PyTorch on these inputs]
 * An explanation says whether PyTorch 1.13 agrees on the concrete tensors
 * given, not merely whether the rule row has a deviation: PyTorch keeps no
 * tag, so what it does follows from strides alone (suggest_memory_format,
 * is_contiguous), while mft's tag may carry a format the strides cannot show
 * (C == 1, H == W == 1; docs/spec.md §3). explain_pytorch.c computes, from the
 * same sizes and strides mft saw, the strides PyTorch's op would return, whether
 * it would copy (conversions) and the format its suggest_memory_format would
 * read from them; explain_op.c prints "PyTorch 1.13: same" when strides,
 * copying and format all match mft's result, and "gives <FORMAT> here,
 * because ..." otherwise. tools/golden/gen_explain.py checks those claims
 * against torch 1.13 itself (tools/golden/explain_cases.txt). */
#ifndef MFT_TOOLS_EXPLAIN_H
#define MFT_TOOLS_EXPLAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <mft/mft.h>

#define EXIT_BAD_ARGS 2

#if defined(__GNUC__) || defined(__clang__)
#define EXPLAIN_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define EXPLAIN_PRINTF(f, a)
#endif

/* ---- mft-explain.c */
/* Reports a usage problem (printf-style) and exits 2. */
EXPLAIN_PRINTF(1, 2) _Noreturn void explain_bad_args(const char *fmt, ...);
/* Reports the library's last error and exits: 1 for out of memory, 2 for
 * everything else (bad sizes, strides, format...). */
_Noreturn void explain_lib_error(const char *what);
/* One decimal integer filling all of [s, end). */
bool explain_parse_i64(const char *s, const char *end, int64_t *out);
/* "a,b,c" into at most MFT_MAX_DIMS integers (exits 2 on a bad item); "" or
 * "-" is rank 0. Returns the count. */
int explain_parse_list(const char *s, int64_t *out, const char *what);
/* contiguous / nchw / ncl / ncdhw / channels_first / cf and channels_last /
 * cl / nhwc / nlc / nwc / ndhwc (any case). */
bool explain_parse_format(const char *s, mft_format *out);
/* "[a,b,c]" */
const char *explain_dims(char *buf, size_t len, int n, const int64_t *v);
/* Wraps a zeroed buffer of exactly the minimum size (+ offset) with
 * mft_from_blob; exits on error. */
mft_tensor *explain_wrap_strided(int ndim, const int64_t *sizes, const int64_t *strides,
                                 int64_t offset, mft_dtype dtype);
/* The printf-style append used to build explanation text: appends to
 * buf[*pos..len), always NUL-terminated, *pos counts what was wanted. */
EXPLAIN_PRINTF(4, 5) void explain_append(char *buf, size_t len, size_t *pos, const char *fmt, ...);

/* ---- explain_safetensors.c */
/* Prints mft_safetensors_describe's text for tensor `name` of the file and
 * returns that tensor as mft_safetensors_load makes it (a new reference);
 * exits on the library's error (2: a refused file or missing name). */
mft_tensor *explain_safetensors(const char *path, const char *name);

/* ---- layout names */
/* "NCHW" / "NHWC" for rank 4, "NCDHW" / "NDHWC" rank 5, "NCL" / "NLC" rank
 * 3; other ranks: "contiguous" for CONTIGUOUS ("?" for channels-last). */
const char *explain_layout_name(int ndim, mft_format fmt);

/* ---- explain_pytorch.c: the model of PyTorch 1.13 (Note [PyTorch on these inputs]) */
/* PyTorch's is_channels_last_strides_2d / _3d (c10/core/MemoryFormat.h),
 * true only for rank 4 / 5. When false and why is not NULL, writes the
 * check that failed ("W's stride 1 is below C's stride 784"). */
bool pt_channels_last_strides(int ndim, const int64_t *sizes, const int64_t *strides, char *why,
                              size_t len);
/* suggest_memory_format as an mft_format (channels_last_3d is CHANNELS_LAST
 * at rank 5). */
mft_format pt_suggest(int ndim, const int64_t *sizes, const int64_t *strides);
/* "x's strides [784,784,28,1] read as NCHW (W's stride 1 is below C's
 * stride 784)" for a tensor named `name`. */
void pt_reading(const char *name, const mft_tensor *t, char *buf, size_t len);

/* What PyTorch 1.13 returns for one result. */
typedef struct pt_answer {
    bool counterpart; /* false: PyTorch has no such call (reason says why) */
    int ndim;
    int64_t strides[MFT_MAX_DIMS];
    bool copies;      /* conversions: a copy (new storage) */
    bool has_copy;    /* copies is meaningful */
    mft_format reads; /* suggest_memory_format of the result */
    char call[1024];  /* the PyTorch call, "x.to(memory_format=torch.channels_last)" */
    char reason[768]; /* why PyTorch ends where it does, for "because ..." */
    int deviation;    /* docs/deviations.md row behind a difference, 0 none */
} pt_answer;

/* PyTorch's answer for x.<method>(memory_format=fmt), method "to" (for
 * mft_to_format), "contiguous" (mft_contiguous) or "clone" (mft_clone). */
void pt_convert(const mft_tensor *x, mft_format fmt, const char *method, pt_answer *out);
/* PyTorch's answer for op (as run by mft-explain --op) on inputs in[0..n),
 * whose mft result is `result`; false when the tool has no model of op. */
bool pt_op(const char *op, int n, const mft_tensor *const *in, const mft_tensor *result,
           pt_answer *out);

/* ---- explain_npy.c */
/* Prints "# file PATH: .npy format M.m, header {...}" and where the data
 * starts, from the file's preamble; prints nothing for a file that is not
 * .npy (mft_load_npy says why). */
void explain_npy_header(const char *path);

/* ---- explain_op.c */
/* mft-explain SIZES ... --to FMT: x is the tensor built from the command
 * line (how: the call that built it). Prints both conversions; returns the
 * exit status. */
int explain_convert(const mft_tensor *x, const char *how, mft_format to);
/* mft-explain --op OP --in SPEC...: returns the exit status. */
int explain_op(const char *op, int nin, const char *const *specs, mft_format declared,
               bool declared_given, mft_dtype dtype);

#endif
