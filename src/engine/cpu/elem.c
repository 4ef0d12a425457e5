/* src/engine/cpu/elem.c - the CPU reference executor's element-wise kernels:
 * activations, PRelu, broadcasting Add/Sub/Mul/Div on float and int64, the
 * broadcast of two shapes, softmax and Cast (see kernels_elem.h). Written
 * for correctness first; the inner loops run over the last axis with the
 * operands' strides so broadcasting costs no index arithmetic per element. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/internal.h"
#include "engine/cpu/kernels_elem.h"
#include "engine/cpu/simd.h"
#include "engine/cpu/scalar.h"
#include "engine/cpu/unary_inline.h"

char *vram__cpu_shape_fmt(const vram__shape *s, char *buf, size_t cap)
{
    size_t len = 0;
    if (!cap)
        return buf;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, cap - len, "[");
    for (int i = 0; i < s->rank && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, i ? ",%lld" : "%lld", (long long)s->dim[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

/* ---- unary -------------------------------------------------------------- */

/* Cloned for AVX2 and FMA: static, since a cloned function is exported as
 * an indirect symbol with its resolver, which the library must not export. */
VRAM__CPU_CLONES
static void unary(int op, const float *params, int64_t n, const float *x, float *y)
{
    int64_t i;
    switch (op) {
    case VRAM__UN_RELU:
        for (i = 0; i < n; i++)
            y[i] = vram__relu1(x[i]);
        return;
    case VRAM__UN_SIGMOID:
        for (i = 0; i < n; i++)
            y[i] = vram__sigmoid1(x[i]);
        return;
    case VRAM__UN_TANH:
        for (i = 0; i < n; i++)
            y[i] = tanhf(x[i]);
        return;
    case VRAM__UN_LEAKY_RELU: {
        float alpha = vram__leaky_alpha(params);
        for (i = 0; i < n; i++)
            y[i] = vram__leaky_relu1(x[i], alpha);
        return;
    }
    case VRAM__UN_CLIP: {
        float lo = vram__clip_lo(params), hi = vram__clip_hi(params);
        for (i = 0; i < n; i++)
            y[i] = vram__clampf(x[i], lo, hi);
        return;
    }
    case VRAM__UN_HARD_SIGMOID: {
        float alpha = vram__hsig_alpha(params), beta = vram__hsig_beta(params);
        for (i = 0; i < n; i++)
            y[i] = vram__hard_sigmoid1(x[i], alpha, beta);
        return;
    }
    case VRAM__UN_HARD_SWISH:
        for (i = 0; i < n; i++)
            y[i] = vram__hard_swish1(x[i]);
        return;
    case VRAM__UN_IDENTITY:
        if (y != x && n > 0)
            memmove(y, x, (size_t)n * sizeof *y);
        return;
    default:
        for (i = 0; i < n; i++)
            y[i] = NAN;
        return;
    }
}

void vram__cpu_unary(int op, const float *params, int64_t n, const float *x, float *y)
{
    unary(op, params, n, x, y);
}

/* ---- broadcasting ------------------------------------------------------- */

int vram__broadcast_shape(const vram__shape *a, const vram__shape *b, vram__shape *out)
{
    char sa[160], sb[160];
    if (a->rank < 0 || a->rank > VRAM__MAX_RANK || b->rank < 0 || b->rank > VRAM__MAX_RANK)
        return vram__fail(VRAM_EINVAL, "cannot broadcast shapes of rank %d and %d (0 to %d)", a->rank,
                          b->rank, VRAM__MAX_RANK);
    vram__shape r;
    memset(&r, 0, sizeof r);
    r.rank = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r.rank; i++) {
        int ia = i - (r.rank - a->rank), ib = i - (r.rank - b->rank);
        int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
        int64_t d;
        if (da == db || db == 1)
            d = da;
        else if (da == 1)
            d = db;
        else if (da == -1)
            d = db;
        else if (db == -1)
            d = da;
        else
            return vram__fail(VRAM_EINVAL, "cannot broadcast shapes %s and %s: dimension %lld against %lld",
                              vram__cpu_shape_fmt(a, sa, sizeof sa), vram__cpu_shape_fmt(b, sb, sizeof sb),
                              (long long)da, (long long)db);
        r.dim[i] = d;
    }
    *out = r;
    return 0;
}

/* Element strides of operand s seen through the output shape ys (s aligned
 * to the right, as NumPy): 0 on the axes s broadcasts along. */
void vram__bcast_strides(const vram__shape *s, const vram__shape *ys, int64_t *st)
{
    int64_t acc = 1;
    for (int i = ys->rank - 1; i >= 0; i--) {
        int is = i - (ys->rank - s->rank);
        int64_t d = is >= 0 ? s->dim[is] : 1;
        st[i] = (d == 1 && ys->dim[i] != 1) ? 0 : acc;
        acc *= d;
    }
}

/* Check that ys is the broadcast of as and bs, with every dimension known. */
int vram__bcast_check(const char *what, const vram__shape *as, const vram__shape *bs, const vram__shape *ys)
{
    char s1[160], s2[160], s3[160];
    vram__shape t;
    int rc = vram__broadcast_shape(as, bs, &t);
    if (rc)
        return vram__fail_prefix(rc, "%s: ", what);
    int same = t.rank == ys->rank;
    for (int i = 0; same && i < t.rank; i++)
        same = t.dim[i] == ys->dim[i] && t.dim[i] >= 0;
    if (!same)
        return vram__fail(VRAM_EINVAL, "%s: output shape %s is not the broadcast of %s and %s", what,
                          vram__cpu_shape_fmt(ys, s1, sizeof s1), vram__cpu_shape_fmt(as, s2, sizeof s2),
                          vram__cpu_shape_fmt(bs, s3, sizeof s3));
    return 0;
}

/* One run along the last output axis: n elements, operand strides sa, sb
 * (in elements), output contiguous. */
typedef void (*row_fn)(int op, int64_t n, const void *a, int64_t sa, const void *b, int64_t sb, void *y);

/* Walk the output of shape ys row by row (the last axis is one row), with
 * a and b advanced by their broadcast strides; `esz` is the element size. */
static void bcast_run(row_fn row, int op, size_t esz, const vram__shape *as, const void *a, const vram__shape *bs,
                      const void *b, const vram__shape *ys, void *y)
{
    int64_t sa[VRAM__MAX_RANK], sb[VRAM__MAX_RANK], idx[VRAM__MAX_RANK] = {0};
    int r = ys->rank;
    int64_t total = vram__cpu_elems(ys);
    if (total <= 0)
        return;
    if (r == 0) {
        row(op, 1, a, 0, b, 0, y);
        return;
    }
    vram__bcast_strides(as, ys, sa);
    vram__bcast_strides(bs, ys, sb);
    const char *pa = a, *pb = b;
    char *py = y;
    int64_t inner = ys->dim[r - 1], oa = 0, ob = 0;
    for (int64_t o = 0; o < total; o += inner) {
        row(op, inner, pa + oa * (int64_t)esz, sa[r - 1], pb + ob * (int64_t)esz, sb[r - 1], py + o * (int64_t)esz);
        for (int d = r - 2; d >= 0; d--) {
            oa += sa[d];
            ob += sb[d];
            if (++idx[d] < ys->dim[d])
                break;
            oa -= sa[d] * ys->dim[d];
            ob -= sb[d] * ys->dim[d];
            idx[d] = 0;
        }
    }
}

#define ROW_LOOP(T, EXPR)                                                                                    \
    do {                                                                                                     \
        const T *A = a_, *B = b_;                                                                            \
        T *Y = y_;                                                                                           \
        for (int64_t i = 0; i < n; i++) {                                                                    \
            T av = A[i * sa], bv = B[i * sb];                                                                \
            Y[i] = (EXPR);                                                                                   \
        }                                                                                                    \
    } while (0)

static void row_f32(int op, int64_t n, const void *a_, int64_t sa, const void *b_, int64_t sb, void *y_)
{
    switch (op) {
    case VRAM__BIN_ADD: ROW_LOOP(float, av + bv); break;
    case VRAM__BIN_SUB: ROW_LOOP(float, av - bv); break;
    case VRAM__BIN_MUL: ROW_LOOP(float, av * bv); break;
    default: ROW_LOOP(float, av / bv); break;
    }
}

static void row_prelu(int op, int64_t n, const void *a_, int64_t sa, const void *b_, int64_t sb, void *y_)
{
    ROW_LOOP(float, av < 0.0f ? bv * av : av);
}

/* uint64 back to int64 modulo 2^64 without implementation-defined casts. */
static int64_t wrap64(uint64_t u) { return u <= (uint64_t)INT64_MAX ? (int64_t)u : -(int64_t)(UINT64_MAX - u) - 1; }

static int64_t div64(int64_t a, int64_t b) { return (a == INT64_MIN && b == -1) ? INT64_MIN : a / b; }

static void row_i64(int op, int64_t n, const void *a_, int64_t sa, const void *b_, int64_t sb, void *y_)
{
    switch (op) {
    case VRAM__BIN_ADD: ROW_LOOP(int64_t, wrap64((uint64_t)av + (uint64_t)bv)); break;
    case VRAM__BIN_SUB: ROW_LOOP(int64_t, wrap64((uint64_t)av - (uint64_t)bv)); break;
    case VRAM__BIN_MUL: ROW_LOOP(int64_t, wrap64((uint64_t)av * (uint64_t)bv)); break;
    default: ROW_LOOP(int64_t, div64(av, bv)); break;
    }
}

const char *vram__binary_name(int op)
{
    static const char *const names[] = {"Add", "Sub", "Mul", "Div"};
    return op >= 0 && op < 4 ? names[op] : "binary op";
}

int vram__cpu_binary(int op, const vram__shape *as, const float *a, const vram__shape *bs, const float *b,
                     const vram__shape *ys, float *y)
{
    if (op < VRAM__BIN_ADD || op > VRAM__BIN_DIV)
        return vram__fail(VRAM_EINVAL, "unknown binary op %d", op);
    int rc = vram__bcast_check(vram__binary_name(op), as, bs, ys);
    if (rc)
        return rc;
    bcast_run(row_f32, op, sizeof(float), as, a, bs, b, ys, y);
    return 0;
}

int vram__cpu_binary_i64(int op, const vram__shape *as, const int64_t *a, const vram__shape *bs,
                         const int64_t *b, const vram__shape *ys, int64_t *y)
{
    if (op < VRAM__BIN_ADD || op > VRAM__BIN_DIV)
        return vram__fail(VRAM_EINVAL, "unknown binary op %d", op);
    int rc = vram__bcast_check(vram__binary_name(op), as, bs, ys);
    if (rc)
        return rc;
    if (op == VRAM__BIN_DIV && vram__cpu_elems(ys) > 0) {
        int64_t nb = vram__cpu_elems(bs);
        for (int64_t i = 0; i < nb; i++)
            if (b[i] == 0)
                return vram__fail(VRAM_EINVAL, "Div: integer division by zero (divisor element %lld of %lld)",
                                  (long long)i, (long long)nb);
    }
    bcast_run(row_i64, op, sizeof(int64_t), as, a, bs, b, ys, y);
    return 0;
}

int vram__cpu_prelu(const vram__shape *xs, const float *x, const vram__shape *ss, const float *slope, float *y)
{
    int rc = vram__bcast_check("PRelu", xs, ss, xs);
    if (rc)
        return rc;
    bcast_run(row_prelu, 0, sizeof(float), xs, x, ss, slope, xs, y);
    return 0;
}

/* ---- softmax -------------------------------------------------------------- */

void vram__cpu_softmax(const vram__shape *s, int axis, const float *x, float *y)
{
    if (axis < 0)
        axis += s->rank;
    int64_t outer = 1, n = s->rank ? s->dim[axis] : 1, inner = 1;
    for (int i = 0; i < axis; i++)
        outer *= s->dim[i];
    for (int i = axis + 1; i < s->rank; i++)
        inner *= s->dim[i];
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < inner; j++) {
            int64_t base = o * n * inner + j;
            float mx = -INFINITY;
            for (int64_t k = 0; k < n; k++)
                if (x[base + k * inner] > mx)
                    mx = x[base + k * inner];
            double sum = 0.0;
            for (int64_t k = 0; k < n; k++) {
                float e = expf(x[base + k * inner] - mx);
                y[base + k * inner] = e;
                sum += e;
            }
            float inv = (float)(1.0 / sum);
            for (int64_t k = 0; k < n; k++)
                y[base + k * inner] *= inv;
        }
    }
}

/* ---- cast ------------------------------------------------------------------ */

/* The ONNX name of a type Cast handles, "type N" for the others. */
static const char *cast_name(int t, char *buf, size_t cap)
{
    switch (t) {
    case VRAM_DTYPE_FLOAT: return "float";
    case VRAM_DTYPE_DOUBLE: return "double";
    case VRAM_DTYPE_FLOAT16: return "float16";
    case VRAM_DTYPE_INT64: return "int64";
    case VRAM_DTYPE_INT32: return "int32";
    case VRAM_DTYPE_INT8: return "int8";
    case VRAM_DTYPE_UINT8: return "uint8";
    case VRAM_DTYPE_BOOL: return "bool";
    default: snprintf(buf, cap, "type %d", t); return buf;
    }
}

static int is_floating(int t) { return t == VRAM_DTYPE_FLOAT || t == VRAM_DTYPE_DOUBLE || t == VRAM_DTYPE_FLOAT16; }

static int cast_supported(int t)
{
    switch (t) {
    case VRAM_DTYPE_FLOAT:
    case VRAM_DTYPE_DOUBLE:
    case VRAM_DTYPE_FLOAT16:
    case VRAM_DTYPE_INT64:
    case VRAM_DTYPE_INT32:
    case VRAM_DTYPE_INT8:
    case VRAM_DTYPE_UINT8:
    case VRAM_DTYPE_BOOL:
        return 1;
    default:
        return 0;
    }
}

static size_t cast_size(int t)
{
    switch (t) {
    case VRAM_DTYPE_FLOAT: return 4;
    case VRAM_DTYPE_DOUBLE: return 8;
    case VRAM_DTYPE_FLOAT16: return 2;
    case VRAM_DTYPE_INT64: return 8;
    case VRAM_DTYPE_INT32: return 4;
    default: return 1;
    }
}

static double read_f(int t, const void *x, int64_t i)
{
    switch (t) {
    case VRAM_DTYPE_FLOAT: return ((const float *)x)[i];
    case VRAM_DTYPE_DOUBLE: return ((const double *)x)[i];
    default: return vram__half_to_float(((const uint16_t *)x)[i]);
    }
}

static int64_t read_i(int t, const void *x, int64_t i)
{
    switch (t) {
    case VRAM_DTYPE_INT64: return ((const int64_t *)x)[i];
    case VRAM_DTYPE_INT32: return ((const int32_t *)x)[i];
    case VRAM_DTYPE_INT8: return ((const int8_t *)x)[i];
    case VRAM_DTYPE_UINT8: return ((const uint8_t *)x)[i];
    default: return ((const uint8_t *)x)[i] != 0;
    }
}

/* Truncate toward zero and saturate to [lo, hi]; NaN is 0. The bounds are
 * exact in double for every target (hi + 1 is a power of two). */
static int64_t sat_trunc(double d, double lo, double hi_plus_1, int64_t ilo, int64_t ihi)
{
    if (isnan(d))
        return 0;
    if (d >= hi_plus_1)
        return ihi;
    if (d <= lo - 1.0) /* for int64, lo - 1.0 rounds to lo: still exact */
        return ilo;
    return (int64_t)d;
}

/* Two's complement narrowing of v to `bits` bits, sign-extended back when
 * the target is signed. */
static int64_t wrap_to(int64_t v, int bits, int is_signed)
{
    uint64_t mask = (1ull << bits) - 1, u = (uint64_t)v & mask;
    if (is_signed && (u >> (bits - 1)))
        return -(int64_t)(mask - u) - 1;
    return (int64_t)u;
}

static void write_f(int t, void *y, int64_t i, double d)
{
    switch (t) {
    case VRAM_DTYPE_FLOAT: ((float *)y)[i] = (float)d; break;
    case VRAM_DTYPE_DOUBLE: ((double *)y)[i] = d; break;
    case VRAM_DTYPE_FLOAT16: ((uint16_t *)y)[i] = vram__double_to_half(d); break;
    case VRAM_DTYPE_INT64: ((int64_t *)y)[i] = sat_trunc(d, -0x1p63, 0x1p63, INT64_MIN, INT64_MAX); break;
    case VRAM_DTYPE_INT32: ((int32_t *)y)[i] = (int32_t)sat_trunc(d, -0x1p31, 0x1p31, INT32_MIN, INT32_MAX); break;
    case VRAM_DTYPE_INT8: ((int8_t *)y)[i] = (int8_t)sat_trunc(d, -128.0, 128.0, INT8_MIN, INT8_MAX); break;
    case VRAM_DTYPE_UINT8: ((uint8_t *)y)[i] = (uint8_t)sat_trunc(d, 0.0, 256.0, 0, UINT8_MAX); break;
    default: ((uint8_t *)y)[i] = d != 0.0; break; /* NaN != 0 */
    }
}

static void write_i(int t, void *y, int64_t i, int64_t v)
{
    switch (t) {
    case VRAM_DTYPE_FLOAT: ((float *)y)[i] = (float)v; break;
    case VRAM_DTYPE_DOUBLE: ((double *)y)[i] = (double)v; break;
    case VRAM_DTYPE_FLOAT16: ((uint16_t *)y)[i] = vram__double_to_half((double)v); break;
    case VRAM_DTYPE_INT64: ((int64_t *)y)[i] = v; break;
    case VRAM_DTYPE_INT32: ((int32_t *)y)[i] = (int32_t)wrap_to(v, 32, 1); break;
    case VRAM_DTYPE_INT8: ((int8_t *)y)[i] = (int8_t)wrap_to(v, 8, 1); break;
    case VRAM_DTYPE_UINT8: ((uint8_t *)y)[i] = (uint8_t)wrap_to(v, 8, 0); break;
    default: ((uint8_t *)y)[i] = v != 0; break;
    }
}

int vram__cast_check(int from, int to)
{
    char b1[24], b2[24];
    if (!cast_supported(from) || !cast_supported(to))
        return vram__fail(VRAM_ENOSYS, "Cast from %s to %s is not supported", cast_name(from, b1, sizeof b1),
                          cast_name(to, b2, sizeof b2));
    return 0;
}

int vram__cpu_cast(int from, int to, int64_t n, const void *x, void *y)
{
    int rc = vram__cast_check(from, to);
    if (rc)
        return rc;
    if (n <= 0)
        return 0;
    if (from == to) {
        if (from == VRAM_DTYPE_BOOL) { /* normalize any non-zero byte to 1 */
            for (int64_t i = 0; i < n; i++)
                ((uint8_t *)y)[i] = ((const uint8_t *)x)[i] != 0;
        } else if (x != y) {
            memmove(y, x, (size_t)n * cast_size(from));
        }
        return 0;
    }
    if (is_floating(from)) {
        for (int64_t i = 0; i < n; i++)
            write_f(to, y, i, read_f(from, x, i));
    } else {
        for (int64_t i = 0; i < n; i++)
            write_i(to, y, i, read_i(from, x, i));
    }
    return 0;
}
