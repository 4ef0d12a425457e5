/* src/engine/shape_elem.c - reading and writing single elements of any
 * element type the engine handles, for constant folding: integer and float
 * views with C cast semantics (truncation toward zero, integer wrap), made
 * total where C leaves them undefined (NaN and out-of-range floats saturate),
 * and IEEE half precision conversions rounding to nearest even. */
#include <math.h>
#include <string.h>

#include "shape_ops.h"

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf, nan */
    } else if (exp) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man) { /* subnormal: value man * 2^-24 */
        float f = (float)man * 5.9604644775390625e-8f;
        return sign ? -f : f;
    } else {
        bits = sign;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Round to nearest even, as a float -> half conversion does. */
static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf or nan (keep a quiet nan) */
        return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) /* rounds to at least 65520: overflow to inf */
        return (uint16_t)(sign | 0x7c00);
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or 0 */
        float a;
        memcpy(&a, &ax, sizeof a);
        /* a * 2^24 is the subnormal's integer mantissa; rintf rounds to even */
        return (uint16_t)(sign | (uint16_t)rintf(a * 16777216.0f));
    }
    uint32_t mant = ax & 0x7fffff, exp = (ax >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13), rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1)))
        h++; /* a carry into the exponent is still the right encoding */
    return (uint16_t)(sign | h);
}

int vram__sx_is_float_type(int dtype)
{
    return dtype == VRAM_DTYPE_FLOAT || dtype == VRAM_DTYPE_DOUBLE || dtype == VRAM_DTYPE_FLOAT16;
}

int vram__sx_is_int_type(int dtype)
{
    return dtype == VRAM_DTYPE_INT64 || dtype == VRAM_DTYPE_INT32 || dtype == VRAM_DTYPE_INT8 ||
           dtype == VRAM_DTYPE_UINT8 || dtype == VRAM_DTYPE_BOOL;
}

int64_t vram__sx_get_i64(const void *data, int dtype, size_t i)
{
    switch (dtype) {
    case VRAM_DTYPE_INT64: { int64_t v; memcpy(&v, (const char *)data + 8 * i, 8); return v; }
    case VRAM_DTYPE_INT32: { int32_t v; memcpy(&v, (const char *)data + 4 * i, 4); return v; }
    case VRAM_DTYPE_INT8: return ((const int8_t *)data)[i];
    case VRAM_DTYPE_UINT8: return ((const uint8_t *)data)[i];
    case VRAM_DTYPE_BOOL: return ((const uint8_t *)data)[i] != 0;
    default: {
        double d = vram__sx_get_f64(data, dtype, i);
        /* float -> integer truncates; out-of-range values saturate rather than
         * being undefined behaviour */
        if (isnan(d))
            return 0;
        if (d >= 9223372036854775807.0)
            return INT64_MAX;
        if (d <= -9223372036854775808.0)
            return INT64_MIN;
        return (int64_t)d;
    }
    }
}

double vram__sx_get_f64(const void *data, int dtype, size_t i)
{
    switch (dtype) {
    case VRAM_DTYPE_FLOAT: { float v; memcpy(&v, (const char *)data + 4 * i, 4); return v; }
    case VRAM_DTYPE_DOUBLE: { double v; memcpy(&v, (const char *)data + 8 * i, 8); return v; }
    case VRAM_DTYPE_FLOAT16: {
        uint16_t h;
        memcpy(&h, (const char *)data + 2 * i, 2);
        return half_to_float(h);
    }
    default: return (double)vram__sx_get_i64(data, dtype, i);
    }
}

void vram__sx_put_i64(void *data, int dtype, size_t i, int64_t v)
{
    char *p = data;
    switch (dtype) {
    case VRAM_DTYPE_INT64: memcpy(p + 8 * i, &v, 8); break;
    case VRAM_DTYPE_INT32: {
        int32_t w = (int32_t)(uint32_t)(uint64_t)v; /* wraps, as a cast does */
        memcpy(p + 4 * i, &w, 4);
        break;
    }
    case VRAM_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)(uint8_t)(uint64_t)v; break;
    case VRAM_DTYPE_UINT8: ((uint8_t *)p)[i] = (uint8_t)(uint64_t)v; break;
    case VRAM_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: vram__sx_put_f64(data, dtype, i, (double)v); break;
    }
}

void vram__sx_put_f64(void *data, int dtype, size_t i, double v)
{
    char *p = data;
    switch (dtype) {
    case VRAM_DTYPE_FLOAT: { float f = (float)v; memcpy(p + 4 * i, &f, 4); break; }
    case VRAM_DTYPE_DOUBLE: memcpy(p + 8 * i, &v, 8); break;
    case VRAM_DTYPE_FLOAT16: {
        uint16_t h = float_to_half((float)v);
        memcpy(p + 2 * i, &h, 2);
        break;
    }
    case VRAM_DTYPE_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    default: {
        /* to an integer type: truncate toward zero, saturating at int64 */
        int64_t w = isnan(v) ? 0
                    : v >= 9223372036854775807.0 ? INT64_MAX
                    : v <= -9223372036854775808.0 ? INT64_MIN
                                                  : (int64_t)v;
        vram__sx_put_i64(data, dtype, i, w);
        break;
    }
    }
}
