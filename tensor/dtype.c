/* tensor/dtype.c — element types: sizes, names, and conversion of one element
 * to and from double (used by get/set, fill and the reference kernels). */
#include <math.h>
#include <string.h>
#include "internal.h"

size_t mft_dtype_size(mft_dtype dt) { return mft__elem_size(dt); }

const char *mft_dtype_name(mft_dtype dt) {
    static const char *names[] = {"f32", "f64", "i32", "i64", "u8"};
    return (unsigned)dt < MFT_DTYPE_COUNT ? names[dt] : "invalid";
}
const char *mft_format_name(mft_format f) {
    static const char *names[] = {"CONTIGUOUS", "CHANNELS_LAST", "PRESERVE",
                                  "NCHW8C",     "NCHW16C",       "BLOCKED"};
    return (unsigned)f < MFT_FORMAT_COUNT ? names[f] : "invalid";
}
const char *mft_origin_name(mft_origin o) {
    static const char *names[] = {"declared", "inferred", "inherited"};
    return (unsigned)o < MFT_ORIGIN_COUNT ? names[o] : "invalid";
}

mft_status mft__check_dtype(const char *fn, mft_dtype dt) {
    if ((unsigned)dt >= MFT_DTYPE_COUNT) {
        mft__set_error(MFT_ERR_DTYPE, "%s: unsupported dtype %d", fn, (int)dt);
        return MFT_ERR_DTYPE;
    }
    return MFT_OK;
}

/* Note [Integer scalars]
 * A double that the user gives as a value for an integer dtype (an op's
 * scalar, clamp bounds, a pow exponent, alpha, a fill value) must convert
 * without overflow, by PyTorch's checked_convert rule: finite, and truncated
 * toward zero within the dtype's range, where u8 also takes -255..-1 (they
 * wrap, so that x + (-3) is x - 3). Otherwise the call fails with
 * MFT_ERR_OVERFLOW naming it: saturating or wrapping would silently change
 * what was asked (clamp(i32, -1e20, 1e20) became clamp(i32, -1, 0)).
 * The wrapping arithmetic ops add/sub/rsub/mul_scalar check against i64
 * instead: their integer results are exact modulo 2^bits whatever the
 * scalar, as PyTorch's wrapped numbers (u8 + 300 is u8 + 44); beyond i64
 * PyTorch cannot take the number either. Element-by-element casts of
 * tensors (to_dtype, copies) saturate, below. */
static const double k_int_lo[MFT_DTYPE_COUNT] = {[MFT_I32] = -2147483648.0,
                                                 [MFT_I64] = -9223372036854775808.0,
                                                 [MFT_U8] = -255.0};
static const double k_int_hi[MFT_DTYPE_COUNT] = {[MFT_I32] = 2147483647.0,
                                                 [MFT_I64] = 9223372036854775807.0,
                                                 [MFT_U8] = 255.0};

mft_status mft__check_int_value(const char *fn, const char *what, mft_dtype dt, double v) {
    if (dt == MFT_F32 || dt == MFT_F64 || (unsigned)dt >= MFT_DTYPE_COUNT) return MFT_OK;
    double t = trunc(v);
    /* INT64_MAX rounds up to 2^63 as a double: i64 values must stay below it */
    bool fits = isfinite(v) && t >= k_int_lo[dt] &&
                (dt == MFT_I64 ? t < 9223372036854775808.0 : t <= k_int_hi[dt]);
    if (fits) return MFT_OK;
    mft__set_error(MFT_ERR_OVERFLOW,
                   "%s: %s %.17g cannot be converted to %s without overflow (allowed %.0f..%.0f; "
                   "Note [Integer scalars])",
                   fn, what, v, mft_dtype_name(dt), k_int_lo[dt], k_int_hi[dt]);
    return MFT_ERR_OVERFLOW;
}

/* Float -> integer conversions saturate NaN/inf/out-of-range values instead of
 * invoking undefined behaviour (C11 6.3.1.4). */
static int64_t to_i64(double v, double lo, double hi) {
    if (isnan(v)) return 0;
    if (v <= lo) return (int64_t)lo;
    if (v >= hi) return (int64_t)hi;
    return (int64_t)v;
}

void mft__store(mft_dtype dt, void *p, double v) {
    switch (dt) {
    case MFT_F32: { float x = (float)v; memcpy(p, &x, 4); break; }
    case MFT_F64: memcpy(p, &v, 8); break;
    case MFT_I32: { int32_t x = (int32_t)to_i64(v, -2147483648.0, 2147483647.0); memcpy(p, &x, 4); break; }
    case MFT_I64: { int64_t x = to_i64(v, -9223372036854775808.0, 9223372036854774784.0); memcpy(p, &x, 8); break; }
    case MFT_U8: { /* wraps modulo 256 like PyTorch's integer casts */
        uint8_t x = (uint8_t)to_i64(v, -9223372036854775808.0, 9223372036854774784.0);
        memcpy(p, &x, 1);
        break;
    }
    default: break;
    }
}

double mft__load(mft_dtype dt, const void *p) {
    switch (dt) {
    case MFT_F32: { float x; memcpy(&x, p, 4); return x; }
    case MFT_F64: { double x; memcpy(&x, p, 8); return x; }
    case MFT_I32: { int32_t x; memcpy(&x, p, 4); return x; }
    case MFT_I64: { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case MFT_U8: { uint8_t x; memcpy(&x, p, 1); return x; }
    default: return 0.0;
    }
}
