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
    static const char *names[] = {"CONTIGUOUS", "CHANNELS_LAST", "PRESERVE"};
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
