/* tests/unit/test_cpu_elem.c - the CPU element-wise and data-movement
 * kernels of src/engine/cpu/kernels_elem.h, each against hand-computed
 * values or a straightforward reference written here with explicit index
 * arithmetic:
 *  - unary ops, incl. extreme inputs (sigmoid of +-100, tanh saturation),
 *    NaN propagation, in place, default parameters;
 *  - broadcasting in every pattern (scalar, row, column, rank mismatch, both
 *    sides), on float and int64, in place, incompatible shapes rejected with
 *    both shapes in the message and the output untouched; int64 division
 *    semantics and division by zero; PRelu;
 *  - softmax on each axis (sums to 1, matches a double reference, stable
 *    for large inputs);
 *  - transpose of random permutations, rank 1-5, element sizes 1/2/3/4/8;
 *    concat and split as inverses on each axis; slices with negative steps;
 *  - pad in the three modes incl. negative pads and pads longer than the
 *    axis, and its errors;
 *  - resize: nearest for each nearest_mode and ctm on hand-checked 1-D and
 *    2-D cases, linear against hand-computed values (ONNX's own examples)
 *    and against a naive 4-D bilinear reference with random up and down
 *    scaling, and its errors;
 *  - gather on each axis incl. negative, scalar and out-of-range indices;
 *  - cast round trips and edge cases: NaN to bool and to int, large floats
 *    to int32 (they saturate), integer wrapping, every float16 value, the
 *    float16 rounding of every midpoint, subnormals, overflow to inf. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cpu/kernels_elem.h"
#include "vramkit/error.h"

/* ---- helpers --------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint32_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint32_t)(hi - lo + 1)); }

static float rnd_float(void) { return (float)rnd() / 2147483648.0f * 2.0f - 2.0f; }

static vram__shape shp(int rank, ...)
{
    vram__shape s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++)
        s.dim[i] = va_arg(ap, int);
    va_end(ap);
    return s;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle))
        fail_msg("\"%s\" does not contain \"%s\"", hay ? hay : "(null)", needle);
}

static void assert_close(double got, double want, double tol)
{
    if (!(fabs(got - want) <= tol * (1.0 + fabs(want))))
        fail_msg("got %.9g, want %.9g", got, want);
}

static void unravel(int64_t o, const vram__shape *s, int64_t *idx)
{
    for (int i = s->rank - 1; i >= 0; i--) {
        idx[i] = o % s->dim[i];
        o /= s->dim[i];
    }
}

static int64_t ravel(const int64_t *idx, const vram__shape *s)
{
    int64_t o = 0;
    for (int i = 0; i < s->rank; i++)
        o = o * s->dim[i] + idx[i];
    return o;
}

/* The element of operand s (right-aligned, NumPy rules) read for output
 * index idx of shape ys. */
static int64_t bcast_index(const vram__shape *s, const vram__shape *ys, const int64_t *idx)
{
    int64_t o = 0;
    for (int i = 0; i < s->rank; i++) {
        int iy = i + ys->rank - s->rank;
        o = o * s->dim[i] + (s->dim[i] == 1 ? 0 : idx[iy]);
    }
    return o;
}

static float *rand_floats(int64_t n)
{
    float *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++)
        v[i] = rnd_float();
    return v;
}

/* ---- unary ----------------------------------------------------------- */

static void test_unary(void **state)
{
    (void)state;
    const float x[] = {-100.0f, -20.0f, -6.0f, -3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 3.0f, 6.0f, 20.0f, 100.0f};
    const int n = (int)(sizeof x / sizeof x[0]);
    float y[16];
    const float leaky[] = {0.1f}, clip[] = {-1.0f, 2.0f}, hs[] = {0.2f, 0.5f};

    vram__cpu_unary(VRAM__UN_RELU, NULL, n, x, y);
    for (int i = 0; i < n; i++)
        assert_true(y[i] == (x[i] > 0 ? x[i] : 0.0f));

    vram__cpu_unary(VRAM__UN_SIGMOID, NULL, n, x, y);
    for (int i = 0; i < n; i++) {
        assert_true(isfinite(y[i]) && y[i] >= 0.0f && y[i] <= 1.0f);
        assert_close(y[i], 1.0 / (1.0 + exp(-(double)x[i])), 1e-6);
    }
    assert_true(y[0] > 0.0f && y[0] < 1e-40f); /* sigmoid(-100) = 3.7e-44, a subnormal, not 0/NaN */
    assert_true(y[n - 1] == 1.0f);
    assert_true(y[6] == 0.5f);

    vram__cpu_unary(VRAM__UN_TANH, NULL, n, x, y);
    for (int i = 0; i < n; i++)
        assert_close(y[i], tanh((double)x[i]), 1e-6);
    assert_true(y[0] == -1.0f && y[1] == -1.0f && y[n - 1] == 1.0f && y[n - 2] == 1.0f);

    vram__cpu_unary(VRAM__UN_LEAKY_RELU, leaky, n, x, y);
    for (int i = 0; i < n; i++)
        assert_true(y[i] == (x[i] < 0 ? 0.1f * x[i] : x[i]));
    vram__cpu_unary(VRAM__UN_LEAKY_RELU, NULL, n, x, y); /* default alpha 0.01 */
    assert_true(y[0] == 0.01f * -100.0f);

    vram__cpu_unary(VRAM__UN_CLIP, clip, n, x, y);
    for (int i = 0; i < n; i++)
        assert_true(y[i] == (x[i] < -1.0f ? -1.0f : x[i] > 2.0f ? 2.0f : x[i]));
    vram__cpu_unary(VRAM__UN_CLIP, NULL, n, x, y); /* no bounds: unchanged */
    assert_memory_equal(y, x, sizeof x);

    vram__cpu_unary(VRAM__UN_HARD_SIGMOID, hs, n, x, y);
    for (int i = 0; i < n; i++)
        assert_close(y[i], fmax(0.0, fmin(1.0, 0.2 * x[i] + 0.5)), 1e-7);
    assert_true(y[0] == 0.0f && y[n - 1] == 1.0f && y[6] == 0.5f);

    vram__cpu_unary(VRAM__UN_HARD_SWISH, NULL, n, x, y);
    for (int i = 0; i < n; i++)
        assert_close(y[i], x[i] * fmax(0.0, fmin(1.0, x[i] / 6.0 + 0.5)), 1e-7);
    assert_true(y[2] == 0.0f && y[10] == 6.0f && y[9] == 3.0f * 1.0f); /* -6 -> 0, 6 -> 6, 3 -> 3 */
    assert_close(y[4], -1.0 * (1.0 / 3.0), 1e-7);

    vram__cpu_unary(VRAM__UN_IDENTITY, NULL, n, x, y);
    assert_memory_equal(y, x, sizeof x);

    /* In place. */
    float z[16];
    memcpy(z, x, sizeof x);
    vram__cpu_unary(VRAM__UN_SIGMOID, NULL, n, z, z);
    vram__cpu_unary(VRAM__UN_SIGMOID, NULL, n, x, y);
    assert_memory_equal(z, y, sizeof x);

    /* NaN stays NaN. */
    float nan_in[1] = {NAN}, o[1];
    for (int op = VRAM__UN_RELU; op <= VRAM__UN_IDENTITY; op++) {
        vram__cpu_unary(op, op == VRAM__UN_CLIP ? clip : NULL, 1, nan_in, o);
        assert_true(isnan(o[0]));
    }
    /* An unknown op cannot pass for a result. */
    vram__cpu_unary(99, NULL, 2, x, y);
    assert_true(isnan(y[0]) && isnan(y[1]));
}

/* ---- broadcasting ------------------------------------------------------ */

static void test_broadcast_shape(void **state)
{
    (void)state;
    vram__shape a, b, out;
    struct {
        vram__shape a, b, want;
    } ok[] = {
        {shp(0), shp(0), shp(0)},
        {shp(0), shp(2, 3, 4), shp(2, 3, 4)},
        {shp(2, 3, 4), shp(1, 4), shp(2, 3, 4)},
        {shp(2, 3, 4), shp(2, 3, 1), shp(2, 3, 4)},
        {shp(3, 2, 3, 4), shp(2, 3, 1), shp(3, 2, 3, 4)},
        {shp(2, 3, 1), shp(2, 1, 4), shp(2, 3, 4)},
        {shp(3, 2, 1, 4), shp(2, 3, 1), shp(3, 2, 3, 4)},
        {shp(2, 0, 1), shp(1, 5), shp(2, 0, 5)},
        {shp(2, -1, 3), shp(2, 4, 1), shp(2, 4, 3)},
        {shp(2, -1, 3), shp(2, 1, 3), shp(2, -1, 3)},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(vram__broadcast_shape(&ok[i].a, &ok[i].b, &out), 0);
        assert_int_equal(out.rank, ok[i].want.rank);
        for (int d = 0; d < out.rank; d++)
            assert_int_equal(out.dim[d], ok[i].want.dim[d]);
        assert_int_equal(vram__broadcast_shape(&ok[i].b, &ok[i].a, &out), 0); /* symmetric */
        for (int d = 0; d < out.rank; d++)
            assert_int_equal(out.dim[d], ok[i].want.dim[d]);
    }
    /* out may be one of the inputs. */
    a = shp(2, 3, 1);
    b = shp(1, 4);
    assert_int_equal(vram__broadcast_shape(&a, &b, &a), 0);
    assert_int_equal(a.rank, 2);
    assert_int_equal(a.dim[0], 3);
    assert_int_equal(a.dim[1], 4);

    /* Incompatible: both shapes in the message, out unchanged. */
    a = shp(2, 2, 3);
    b = shp(1, 4);
    out = shp(1, 77);
    assert_int_equal(vram__broadcast_shape(&a, &b, &out), VRAM_EINVAL);
    assert_contains(vram_last_error(), "[2,3]");
    assert_contains(vram_last_error(), "[4]");
    assert_int_equal(out.rank, 1);
    assert_int_equal(out.dim[0], 77);
    a = shp(3, 2, 3, 4);
    b = shp(2, 2, 4);
    assert_int_equal(vram__broadcast_shape(&a, &b, &out), VRAM_EINVAL);
    assert_contains(vram_last_error(), "[2,3,4]");
    assert_contains(vram_last_error(), "[2,4]");
    a.rank = 9;
    assert_int_equal(vram__broadcast_shape(&a, &b, &out), VRAM_EINVAL);
}

static float ref_binf(int op, float a, float b)
{
    switch (op) {
    case VRAM__BIN_ADD: return a + b;
    case VRAM__BIN_SUB: return a - b;
    case VRAM__BIN_MUL: return a * b;
    default: return a / b;
    }
}

static void test_binary_patterns(void **state)
{
    (void)state;
    struct {
        vram__shape a, b;
    } pat[] = {
        {shp(2, 3, 4), shp(2, 3, 4)},          /* same shape */
        {shp(0), shp(2, 3, 4)},                /* scalar left */
        {shp(2, 3, 4), shp(0)},                /* scalar right */
        {shp(2, 3, 4), shp(1, 1)},             /* [1] scalar-like */
        {shp(2, 3, 4), shp(1, 4)},             /* row */
        {shp(2, 3, 4), shp(2, 3, 1)},          /* column */
        {shp(4, 2, 3, 4, 5), shp(2, 4, 1)},    /* rank mismatch */
        {shp(2, 3, 1), shp(2, 1, 4)},          /* both sides broadcast */
        {shp(3, 2, 1, 4), shp(2, 3, 1)},       /* both sides, rank mismatch */
        {shp(4, 1, 3, 1, 5), shp(4, 2, 1, 4, 1)},
        {shp(0), shp(0)},
        {shp(2, 0, 3), shp(1, 3)},             /* empty */
    };
    for (size_t p = 0; p < sizeof pat / sizeof pat[0]; p++) {
        vram__shape ys;
        assert_int_equal(vram__broadcast_shape(&pat[p].a, &pat[p].b, &ys), 0);
        int64_t na = vram__cpu_elems(&pat[p].a), nb = vram__cpu_elems(&pat[p].b), ny = vram__cpu_elems(&ys);
        float *a = rand_floats(na), *b = rand_floats(nb), *y = rand_floats(ny);
        for (int64_t i = 0; i < nb; i++)
            if (b[i] == 0.0f)
                b[i] = 0.5f;
        for (int op = VRAM__BIN_ADD; op <= VRAM__BIN_DIV; op++) {
            assert_int_equal(vram__cpu_binary(op, &pat[p].a, a, &pat[p].b, b, &ys, y), 0);
            int64_t idx[VRAM__MAX_RANK];
            for (int64_t o = 0; o < ny; o++) {
                unravel(o, &ys, idx);
                float want = ref_binf(op, a[bcast_index(&pat[p].a, &ys, idx)], b[bcast_index(&pat[p].b, &ys, idx)]);
                if (y[o] != want)
                    fail_msg("pattern %zu op %d element %lld: %g != %g", p, op, (long long)o, y[o], want);
            }
            /* In place over whichever operand has the output's shape. */
            if (na == ny) {
                float *c = malloc((size_t)(ny ? ny : 1) * sizeof *c);
                memcpy(c, a, (size_t)na * sizeof *a);
                assert_int_equal(vram__cpu_binary(op, &pat[p].a, c, &pat[p].b, b, &ys, c), 0);
                assert_memory_equal(c, y, (size_t)ny * sizeof *y);
                free(c);
            }
            if (nb == ny && pat[p].b.rank == ys.rank) {
                float *c = malloc((size_t)(ny ? ny : 1) * sizeof *c);
                memcpy(c, b, (size_t)nb * sizeof *b);
                assert_int_equal(vram__cpu_binary(op, &pat[p].a, a, &pat[p].b, c, &ys, c), 0);
                assert_memory_equal(c, y, (size_t)ny * sizeof *y);
                free(c);
            }
        }
        free(a);
        free(b);
        free(y);
    }
}

static void test_binary_errors(void **state)
{
    (void)state;
    float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {1, 2, 3, 4}, y[8];
    float keep[8];
    for (int i = 0; i < 8; i++)
        keep[i] = y[i] = -7.0f;
    vram__shape as = shp(2, 2, 3), bs = shp(1, 4), ys = shp(2, 2, 4);
    assert_int_equal(vram__cpu_binary(VRAM__BIN_ADD, &as, a, &bs, b, &ys, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "Add");
    assert_contains(vram_last_error(), "[2,3]");
    assert_contains(vram_last_error(), "[4]");
    assert_memory_equal(y, keep, sizeof y);

    /* Compatible operands but the wrong output shape. */
    bs = shp(1, 3);
    ys = shp(2, 3, 2);
    assert_int_equal(vram__cpu_binary(VRAM__BIN_MUL, &as, a, &bs, b, &ys, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "[3,2]");
    assert_contains(vram_last_error(), "[2,3]");
    assert_memory_equal(y, keep, sizeof y);
    ys = shp(3, 1, 2, 3);
    assert_int_equal(vram__cpu_binary(VRAM__BIN_MUL, &as, a, &bs, b, &ys, y), VRAM_EINVAL);
    ys = shp(2, 2, 3);
    assert_int_equal(vram__cpu_binary(17, &as, a, &bs, b, &ys, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "17");
    assert_memory_equal(y, keep, sizeof y);

    /* Float division by zero is IEEE. */
    float one = 1.0f, zero = 0.0f, q;
    vram__shape sc = shp(0);
    assert_int_equal(vram__cpu_binary(VRAM__BIN_DIV, &sc, &one, &sc, &zero, &sc, &q), 0);
    assert_true(isinf(q) && q > 0);
}

static void test_binary_i64(void **state)
{
    (void)state;
    vram__shape s6 = shp(1, 6);
    int64_t a[6] = {7, -7, 7, -7, INT64_MIN, 0}, b[6] = {2, 2, -2, -2, -1, 5}, y[6];
    assert_int_equal(vram__cpu_binary_i64(VRAM__BIN_DIV, &s6, a, &s6, b, &s6, y), 0);
    const int64_t div_want[6] = {3, -3, -3, 3, INT64_MIN, 0}; /* toward zero, not floor */
    assert_memory_equal(y, div_want, sizeof y);

    int64_t p[3] = {INT64_MAX, INT64_MIN, INT64_MAX}, q[3] = {1, 1, 2}, r[3];
    vram__shape s3 = shp(1, 3);
    assert_int_equal(vram__cpu_binary_i64(VRAM__BIN_ADD, &s3, p, &s3, q, &s3, r), 0);
    assert_true(r[0] == INT64_MIN && r[1] == INT64_MIN + 1);
    assert_int_equal(vram__cpu_binary_i64(VRAM__BIN_SUB, &s3, p, &s3, q, &s3, r), 0);
    assert_true(r[0] == INT64_MAX - 1 && r[1] == INT64_MAX);
    assert_int_equal(vram__cpu_binary_i64(VRAM__BIN_MUL, &s3, p, &s3, q, &s3, r), 0);
    assert_true(r[0] == INT64_MAX && r[2] == -2);

    /* Broadcast: column [3,1] against row [4] (Shape arithmetic style). */
    int64_t col[3] = {10, -20, 30}, row[4] = {1, 2, -3, 4}, out[12];
    vram__shape cs = shp(2, 3, 1), rs = shp(1, 4), os = shp(2, 3, 4);
    for (int op = VRAM__BIN_ADD; op <= VRAM__BIN_DIV; op++) {
        assert_int_equal(vram__cpu_binary_i64(op, &cs, col, &rs, row, &os, out), 0);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                int64_t u = col[i], v = row[j];
                int64_t want = op == 0 ? u + v : op == 1 ? u - v : op == 2 ? u * v : u / v;
                assert_int_equal(out[i * 4 + j], want);
            }
    }
    assert_int_equal(out[1 * 4 + 2], 6); /* -20 / -3 */

    /* In place on a. */
    int64_t c[3] = {10, -20, 30};
    vram__shape ss = shp(0);
    int64_t three = 3;
    assert_int_equal(vram__cpu_binary_i64(VRAM__BIN_DIV, &s3, c, &ss, &three, &s3, c), 0);
    assert_true(c[0] == 3 && c[1] == -6 && c[2] == 10);

    /* Division by zero anywhere in b: refused before anything is written. */
    int64_t bz[4] = {1, 2, 0, 4}, keep[12];
    for (int i = 0; i < 12; i++)
        keep[i] = out[i] = 99;
    assert_int_equal(vram__cpu_binary_i64(VRAM__BIN_DIV, &cs, col, &rs, bz, &os, out), VRAM_EINVAL);
    assert_contains(vram_last_error(), "division by zero");
    assert_memory_equal(out, keep, sizeof out);
    /* A zero divisor is fine for the other ops. */
    assert_int_equal(vram__cpu_binary_i64(VRAM__BIN_MUL, &cs, col, &rs, bz, &os, out), 0);
    assert_int_equal(out[2], 0);
    /* Incompatible shapes. */
    vram__shape bad = shp(1, 5);
    assert_int_equal(vram__cpu_binary_i64(VRAM__BIN_ADD, &cs, col, &bad, bz, &os, out), VRAM_EINVAL);
    assert_contains(vram_last_error(), "[5]");
}

static void test_prelu(void **state)
{
    (void)state;
    vram__shape xs = shp(4, 2, 3, 2, 2), ss = shp(3, 3, 1, 1);
    int64_t n = vram__cpu_elems(&xs);
    float *x = rand_floats(n), *y = rand_floats(n), slope[3] = {0.1f, -2.0f, 0.0f};
    assert_int_equal(vram__cpu_prelu(&xs, x, &ss, slope, y), 0);
    int64_t idx[VRAM__MAX_RANK];
    for (int64_t o = 0; o < n; o++) {
        unravel(o, &xs, idx);
        float want = x[o] < 0 ? slope[idx[1]] * x[o] : x[o];
        assert_true(y[o] == want);
    }
    /* Scalar slope, in place. */
    vram__shape sc = shp(0);
    float s1 = 0.25f;
    float *z = malloc((size_t)n * sizeof *z);
    memcpy(z, x, (size_t)n * sizeof *z);
    assert_int_equal(vram__cpu_prelu(&xs, z, &sc, &s1, z), 0);
    for (int64_t o = 0; o < n; o++)
        assert_true(z[o] == (x[o] < 0 ? 0.25f * x[o] : x[o]));
    /* The slope must broadcast to x, not the other way. */
    vram__shape big = shp(5, 2, 2, 3, 2, 2);
    memcpy(z, y, (size_t)n * sizeof *z);
    assert_int_equal(vram__cpu_prelu(&xs, x, &big, slope, y), VRAM_EINVAL);
    assert_memory_equal(z, y, (size_t)n * sizeof *y);
    vram__shape wrong = shp(1, 3);
    assert_int_equal(vram__cpu_prelu(&xs, x, &wrong, slope, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "PRelu");
    free(x);
    free(y);
    free(z);
}

/* ---- softmax ----------------------------------------------------------- */

static void test_softmax(void **state)
{
    (void)state;
    vram__shape s = shp(3, 2, 3, 4);
    int64_t n = vram__cpu_elems(&s), idx[VRAM__MAX_RANK], jdx[VRAM__MAX_RANK];
    float *x = rand_floats(n), *y = rand_floats(n);
    for (int64_t i = 0; i < n; i++)
        x[i] *= 5.0f;
    for (int axis = -3; axis < 3; axis++) {
        int ax = axis < 0 ? axis + 3 : axis;
        vram__cpu_softmax(&s, axis, x, y);
        for (int64_t o = 0; o < n; o++) {
            unravel(o, &s, idx);
            memcpy(jdx, idx, sizeof jdx);
            double den = 0.0, sum = 0.0;
            for (int64_t k = 0; k < s.dim[ax]; k++) {
                jdx[ax] = k;
                den += exp((double)x[ravel(jdx, &s)]);
                sum += y[ravel(jdx, &s)];
            }
            assert_close(y[o], exp((double)x[o]) / den, 1e-5);
            assert_close(sum, 1.0, 1e-5);
        }
    }
    /* Stable: huge inputs do not overflow, and shifting changes nothing. */
    float big[4] = {1000.0f, 1001.0f, 1002.0f, 1003.0f}, small[4] = {0.0f, 1.0f, 2.0f, 3.0f}, yb[4], ys[4];
    vram__shape s4 = shp(1, 4);
    vram__cpu_softmax(&s4, 0, big, yb);
    vram__cpu_softmax(&s4, -1, small, ys);
    for (int i = 0; i < 4; i++) {
        assert_true(isfinite(yb[i]));
        assert_close(yb[i], ys[i], 1e-6);
    }
    float low[4] = {-1000.0f, -999.0f, -998.0f, -997.0f}; /* all negative: exp underflows without the max */
    vram__cpu_softmax(&s4, 0, low, yb);
    for (int i = 0; i < 4; i++)
        assert_close(yb[i], ys[i], 1e-6);
    float neg[2] = {-1e30f, 0.0f};
    vram__shape s2 = shp(1, 2);
    vram__cpu_softmax(&s2, 0, neg, neg); /* in place */
    assert_true(neg[0] == 0.0f && neg[1] == 1.0f);
    free(x);
    free(y);
}

/* ---- transpose, concat, split, slice ------------------------------------ */

static void test_transpose(void **state)
{
    (void)state;
    const size_t elems[] = {1, 2, 3, 4, 8};
    for (int rank = 1; rank <= 5; rank++) {
        for (size_t e = 0; e < sizeof elems / sizeof elems[0]; e++) {
            for (int trial = 0; trial < 6; trial++) {
                size_t el = elems[e];
                vram__shape xs, ys;
                memset(&xs, 0, sizeof xs);
                xs.rank = ys.rank = rank;
                for (int d = 0; d < rank; d++)
                    xs.dim[d] = rnd_int(1, 4);
                int perm[VRAM__MAX_RANK];
                for (int d = 0; d < rank; d++)
                    perm[d] = d;
                for (int d = rank - 1; d > 0; d--) { /* Fisher-Yates */
                    int j = rnd_int(0, d), t = perm[d];
                    perm[d] = perm[j];
                    perm[j] = t;
                }
                for (int d = 0; d < rank; d++)
                    ys.dim[d] = xs.dim[perm[d]];
                int64_t n = vram__cpu_elems(&xs);
                unsigned char *x = malloc((size_t)n * el), *y = malloc((size_t)n * el);
                for (size_t i = 0; i < (size_t)n * el; i++)
                    x[i] = (unsigned char)rnd();
                vram__cpu_transpose(el, &xs, perm, x, y);
                int64_t oi[VRAM__MAX_RANK], ii[VRAM__MAX_RANK];
                for (int64_t o = 0; o < n; o++) {
                    unravel(o, &ys, oi);
                    for (int d = 0; d < rank; d++)
                        ii[perm[d]] = oi[d];
                    if (memcmp(y + o * (int64_t)el, x + ravel(ii, &xs) * (int64_t)el, el))
                        fail_msg("rank %d elem %zu: element %lld differs", rank, el, (long long)o);
                }
                free(x);
                free(y);
            }
        }
    }
    /* Rank 0 and a hand-checked 2-D case. */
    float s = 3.5f, t = 0.0f;
    vram__shape s0 = shp(0), s23 = shp(2, 2, 3);
    vram__cpu_transpose(4, &s0, NULL, &s, &t);
    assert_true(t == 3.5f);
    const int32_t m[6] = {1, 2, 3, 4, 5, 6}, mt_want[6] = {1, 4, 2, 5, 3, 6};
    int32_t mt[6];
    const int p10[2] = {1, 0};
    vram__cpu_transpose(4, &s23, p10, m, mt);
    assert_memory_equal(mt, mt_want, sizeof mt);
}

static void test_concat_split(void **state)
{
    (void)state;
    vram__shape xs = shp(3, 3, 5, 4);
    int64_t n = vram__cpu_elems(&xs);
    int16_t *x = malloc((size_t)n * sizeof *x), *back = malloc((size_t)n * sizeof *back);
    for (int64_t i = 0; i < n; i++)
        x[i] = (int16_t)(i * 7 + 1);
    for (int axis = -3; axis < 3; axis++) {
        int ax = axis < 0 ? axis + 3 : axis;
        int64_t ext = xs.dim[ax];
        int64_t sizes[3] = {1, 0, ext - 1}; /* includes an empty part */
        if (ax == 1) {
            sizes[0] = 2;
            sizes[1] = 2;
            sizes[2] = 1;
        }
        vram__shape ps[3];
        const vram__shape *pp[3];
        void *parts[3];
        for (int i = 0; i < 3; i++) {
            ps[i] = xs;
            ps[i].dim[ax] = sizes[i];
            pp[i] = &ps[i];
            parts[i] = malloc((size_t)(vram__cpu_elems(&ps[i]) + 1) * sizeof(int16_t));
        }
        vram__cpu_split(sizeof(int16_t), axis, &xs, x, 3, sizes, parts);
        /* Each part is the slab of x it should be. */
        int64_t idx[VRAM__MAX_RANK];
        int64_t off = 0;
        for (int i = 0; i < 3; i++) {
            const int16_t *pv = parts[i];
            for (int64_t o = 0; o < vram__cpu_elems(&ps[i]); o++) {
                unravel(o, &ps[i], idx);
                idx[ax] += off;
                assert_int_equal(pv[o], x[ravel(idx, &xs)]);
            }
            off += sizes[i];
        }
        memset(back, 0, (size_t)n * sizeof *back);
        const void *cparts[3] = {parts[0], parts[1], parts[2]};
        vram__cpu_concat(sizeof(int16_t), axis, 3, pp, cparts, &xs, back);
        assert_memory_equal(back, x, (size_t)n * sizeof *x);
        for (int i = 0; i < 3; i++)
            free(parts[i]);
    }
    free(x);
    free(back);
    /* Hand-checked concat along axis 1 of 8-byte elements. */
    const int64_t a[4] = {1, 2, 3, 4}, b[2] = {5, 6}, want[6] = {1, 2, 5, 3, 4, 6};
    vram__shape as = shp(2, 2, 2), bs = shp(2, 2, 1), cs = shp(2, 2, 3);
    const vram__shape *ss[2] = {&as, &bs};
    const void *xx[2] = {a, b};
    int64_t c[6];
    vram__cpu_concat(8, 1, 2, ss, xx, &cs, c);
    assert_memory_equal(c, want, sizeof c);
}

static void test_slice(void **state)
{
    (void)state;
    float v[10];
    for (int i = 0; i < 10; i++)
        v[i] = (float)i;
    /* x[8::-3] = 8, 5, 2 */
    float y[10];
    int64_t st1 = 8, sp1 = -3;
    vram__shape s10 = shp(1, 10), y3 = shp(1, 3);
    vram__cpu_slice(4, &s10, v, &st1, &sp1, &y3, y);
    assert_true(y[0] == 8 && y[1] == 5 && y[2] == 2);
    /* x[::-1] */
    int64_t st2 = 9, sp2 = -1;
    vram__cpu_slice(4, &s10, v, &st2, &sp2, &s10, y);
    for (int i = 0; i < 10; i++)
        assert_true(y[i] == 9 - i);
    /* 2-D: rows 2,1,0 and columns 3,1 of a 3x4 matrix. */
    int8_t m[12], out[6];
    for (int i = 0; i < 12; i++)
        m[i] = (int8_t)i;
    int64_t st[2] = {2, 3}, sp[2] = {-1, -2};
    vram__shape ms = shp(2, 3, 4), os = shp(2, 3, 2);
    vram__cpu_slice(1, &ms, m, st, sp, &os, out);
    const int8_t want[6] = {11, 9, 7, 5, 3, 1};
    assert_memory_equal(out, want, sizeof out);
    /* Random 4-D slices with mixed steps against the formula. */
    vram__shape xs = shp(4, 3, 5, 6, 4);
    int64_t n = vram__cpu_elems(&xs);
    double *x = malloc((size_t)n * sizeof *x), *r = malloc((size_t)n * sizeof *r);
    for (int64_t i = 0; i < n; i++)
        x[i] = (double)i;
    for (int trial = 0; trial < 50; trial++) {
        int64_t starts[4], steps[4];
        vram__shape ys;
        ys.rank = 4;
        for (int d = 0; d < 4; d++) {
            steps[d] = rnd_int(1, 3) * (rnd() & 1 ? 1 : -1);
            starts[d] = rnd_int(0, (int)xs.dim[d] - 1);
            int64_t room = steps[d] > 0 ? (xs.dim[d] - 1 - starts[d]) / steps[d] : starts[d] / -steps[d];
            ys.dim[d] = rnd_int(0, (int)room) + 1;
        }
        vram__cpu_slice(8, &xs, x, starts, steps, &ys, r);
        int64_t oi[4], ii[4];
        for (int64_t o = 0; o < vram__cpu_elems(&ys); o++) {
            unravel(o, &ys, oi);
            for (int d = 0; d < 4; d++)
                ii[d] = starts[d] + oi[d] * steps[d];
            assert_true(r[o] == x[ravel(ii, &xs)]);
        }
    }
    free(x);
    free(r);
}

/* ---- pad ----------------------------------------------------------------- */

static void test_pad(void **state)
{
    (void)state;
    /* ONNX's examples: x 3x2, pads [0,2,0,0]. */
    const float x[6] = {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f};
    vram__shape xs = shp(2, 3, 2), ys = shp(2, 3, 4);
    const int64_t pads[4] = {0, 2, 0, 0};
    float y[12];
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_CONSTANT, &xs, x, pads, NULL, &ys, y), 0);
    const float c_want[12] = {0, 0, 1.0f, 1.2f, 0, 0, 2.3f, 3.4f, 0, 0, 4.5f, 5.7f};
    assert_memory_equal(y, c_want, sizeof y);
    float v = -1.5f;
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_CONSTANT, &xs, x, pads, &v, &ys, y), 0);
    assert_true(y[0] == -1.5f && y[1] == -1.5f && y[2] == 1.0f && y[5] == -1.5f);
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_REFLECT, &xs, x, pads, NULL, &ys, y), 0);
    const float r_want[12] = {1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f, 4.5f, 5.7f};
    assert_memory_equal(y, r_want, sizeof y);
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_EDGE, &xs, x, pads, NULL, &ys, y), 0);
    const float e_want[12] = {1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f, 4.5f, 4.5f, 4.5f, 5.7f};
    assert_memory_equal(y, e_want, sizeof y);

    /* 1-D [a b c d]: reflect with pads longer than the axis, as NumPy. */
    const uint8_t a[4] = {10, 11, 12, 13};
    uint8_t o[16];
    vram__shape as = shp(1, 4), os = shp(1, 15);
    const int64_t p1[2] = {5, 6};
    assert_int_equal(vram__cpu_pad(1, VRAM__PAD_REFLECT, &as, a, p1, NULL, &os, o), 0);
    /* np.pad([10,11,12,13], (5,6), 'reflect') */
    const uint8_t rw[15] = {11, 12, 13, 12, 11, 10, 11, 12, 13, 12, 11, 10, 11, 12, 13};
    assert_memory_equal(o, rw, sizeof rw);
    assert_int_equal(vram__cpu_pad(1, VRAM__PAD_EDGE, &as, a, p1, NULL, &os, o), 0);
    const uint8_t ew[15] = {10, 10, 10, 10, 10, 10, 11, 12, 13, 13, 13, 13, 13, 13, 13};
    assert_memory_equal(o, ew, sizeof ew);
    uint8_t seven = 7;
    assert_int_equal(vram__cpu_pad(1, VRAM__PAD_CONSTANT, &as, a, p1, &seven, &os, o), 0);
    assert_true(o[0] == 7 && o[4] == 7 && o[5] == 10 && o[8] == 13 && o[9] == 7 && o[14] == 7);
    /* An axis of one element repeats it in reflect mode. */
    vram__shape one = shp(1, 1), three = shp(1, 3);
    const int64_t p11[2] = {1, 1};
    assert_int_equal(vram__cpu_pad(1, VRAM__PAD_REFLECT, &one, a, p11, NULL, &three, o), 0);
    assert_true(o[0] == 10 && o[1] == 10 && o[2] == 10);

    /* Negative pads crop, alone or combined with positive ones, in every mode. */
    int32_t m[12], mo[16];
    for (int i = 0; i < 12; i++)
        m[i] = i; /* 3x4 */
    vram__shape ms = shp(2, 3, 4), crop = shp(2, 1, 3);
    const int64_t pc[4] = {-1, 0, -1, -1};
    for (int mode = 0; mode < 3; mode++) {
        assert_int_equal(vram__cpu_pad(4, mode, &ms, m, pc, NULL, &crop, mo), 0);
        assert_true(mo[0] == 4 && mo[1] == 5 && mo[2] == 6);
    }
    /* Rows cropped by one at the start, columns padded by 2 before and cut by 3 after. */
    vram__shape mix = shp(2, 2, 3);
    const int64_t pm[4] = {-1, 2, 0, -3};
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_REFLECT, &ms, m, pm, NULL, &mix, mo), 0);
    /* row 1 reflected: [6 5 | 4 5 6 7 | 6 5] cropped to the first 3 -> 6 5 4 */
    assert_true(mo[0] == 6 && mo[1] == 5 && mo[2] == 4 && mo[3] == 10 && mo[4] == 9 && mo[5] == 8);
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_CONSTANT, &ms, m, pm, NULL, &mix, mo), 0);
    assert_true(mo[0] == 0 && mo[1] == 0 && mo[2] == 4 && mo[5] == 8);

    /* Random 3-D pads in each mode against a reference. */
    vram__shape rs = shp(3, 3, 2, 4);
    int64_t rn = vram__cpu_elems(&rs), idx[3], ii[3];
    int16_t rx[24], *ry = malloc(4000 * sizeof *ry);
    for (int i = 0; i < rn; i++)
        rx[i] = (int16_t)(i + 100);
    for (int trial = 0; trial < 60; trial++) {
        int mode = trial % 3;
        int64_t pp[6];
        vram__shape out = rs;
        for (int d = 0; d < 3; d++) {
            pp[d] = rnd_int(-1, 5);
            pp[3 + d] = rnd_int(-1, 5);
            out.dim[d] = rs.dim[d] + pp[d] + pp[3 + d];
        }
        int16_t val = -9;
        assert_int_equal(vram__cpu_pad(2, mode, &rs, rx, pp, &val, &out, ry), 0);
        for (int64_t q = 0; q < vram__cpu_elems(&out); q++) {
            unravel(q, &out, idx);
            int outside = 0;
            for (int d = 0; d < 3; d++) {
                int64_t i = idx[d] - pp[d], nd = rs.dim[d];
                if (i < 0 || i >= nd) {
                    if (mode == VRAM__PAD_CONSTANT)
                        outside = 1;
                    else if (mode == VRAM__PAD_EDGE || nd == 1)
                        i = i < 0 ? 0 : nd - 1;
                    else
                        while (i < 0 || i >= nd) /* reflect step by step */
                            i = i < 0 ? -i : 2 * (nd - 1) - i;
                }
                ii[d] = i;
            }
            int16_t want = outside ? val : rx[ravel(ii, &rs)];
            if (ry[q] != want)
                fail_msg("mode %d trial %d element %lld: %d != %d", mode, trial, (long long)q, ry[q], want);
        }
    }
    free(ry);

    /* Errors: nothing written. */
    float keep[12];
    for (int i = 0; i < 12; i++)
        keep[i] = y[i] = 42.0f;
    vram__shape wrong = shp(2, 3, 5);
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_CONSTANT, &xs, x, pads, NULL, &wrong, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "[3,5]");
    assert_int_equal(vram__cpu_pad(4, 3, &xs, x, pads, NULL, &ys, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "mode 3");
    vram__shape r1 = shp(1, 12);
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_CONSTANT, &xs, x, pads, NULL, &r1, y), VRAM_EINVAL);
    vram__shape empty = shp(1, 0), two = shp(1, 2);
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_REFLECT, &empty, x, p11, NULL, &two, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "no elements");
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_EDGE, &empty, x, p11, NULL, &two, y), VRAM_EINVAL);
    assert_memory_equal(y, keep, sizeof y);
    assert_int_equal(vram__cpu_pad(4, VRAM__PAD_CONSTANT, &empty, x, p11, &v, &two, y), 0);
    assert_true(y[0] == -1.5f && y[1] == -1.5f);
}

/* ---- resize ------------------------------------------------------------------ */

static void resize1(int mode, int ctm, int nm, int in, int out, float scale, const float *x, float *y)
{
    vram__shape xs = shp(1, in), ys = shp(1, out);
    assert_int_equal(vram__cpu_resize(mode, ctm, nm, &xs, x, &scale, &ys, y, NULL), 0);
}

static void expect(const float *got, const float *want, int n, double tol)
{
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol))
            fail_msg("element %d: got %.7g, want %.7g", i, got[i], want[i]);
}

static void test_resize_nearest(void **state)
{
    (void)state;
    const float x4[4] = {1, 2, 3, 4};
    float y[16];
    /* Upsample 4 -> 8. */
    resize1(0, 0, 0, 4, 8, 2.0f, x4, y); /* half_pixel: c = o/2 - 0.25 */
    expect(y, (const float[]){1, 1, 2, 2, 3, 3, 4, 4}, 8, 0);
    resize1(0, 1, 0, 4, 8, 2.0f, x4, y); /* asymmetric, ties 0.5, 1.5 ... to floor */
    expect(y, (const float[]){1, 1, 2, 2, 3, 3, 4, 4}, 8, 0);
    resize1(0, 1, 1, 4, 8, 2.0f, x4, y); /* ... to ceil, 3.5 -> 4 clamped to 3 */
    expect(y, (const float[]){1, 2, 2, 3, 3, 4, 4, 4}, 8, 0);
    resize1(0, 1, 2, 4, 8, 2.0f, x4, y); /* floor */
    expect(y, (const float[]){1, 1, 2, 2, 3, 3, 4, 4}, 8, 0);
    resize1(0, 1, 3, 4, 8, 2.0f, x4, y); /* ceil */
    expect(y, (const float[]){1, 2, 2, 3, 3, 4, 4, 4}, 8, 0);
    resize1(0, 4, 0, 4, 8, 2.0f, x4, y); /* tf_half_pixel_for_nearest: c = (o + 0.5)/2 */
    expect(y, (const float[]){1, 2, 2, 3, 3, 4, 4, 4}, 8, 0);
    resize1(0, 4, 2, 4, 8, 2.0f, x4, y);
    expect(y, (const float[]){1, 1, 2, 2, 3, 3, 4, 4}, 8, 0);
    resize1(0, 2, 0, 4, 8, 2.0f, x4, y); /* align_corners: c = 3o/7 */
    expect(y, (const float[]){1, 1, 2, 2, 3, 3, 4, 4}, 8, 0);
    resize1(0, 2, 3, 4, 8, 2.0f, x4, y);
    expect(y, (const float[]){1, 2, 2, 3, 3, 4, 4, 4}, 8, 0);

    /* Downsample 8 -> 3, scale 0.375: half_pixel gives 0.833, 3.5, 6.167. */
    const float x8[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    resize1(0, 0, 0, 8, 3, 0.375f, x8, y);
    expect(y, (const float[]){1, 3, 6}, 3, 0);
    resize1(0, 0, 1, 8, 3, 0.375f, x8, y);
    expect(y, (const float[]){1, 4, 6}, 3, 0);
    resize1(0, 0, 2, 8, 3, 0.375f, x8, y);
    expect(y, (const float[]){0, 3, 6}, 3, 0);
    resize1(0, 0, 3, 8, 3, 0.375f, x8, y);
    expect(y, (const float[]){1, 4, 7}, 3, 0);
    resize1(0, 1, 0, 8, 3, 0.375f, x8, y); /* asymmetric: 0, 2.667, 5.333 */
    expect(y, (const float[]){0, 3, 5}, 3, 0);
    resize1(0, 2, 0, 8, 3, 0.375f, x8, y); /* align_corners: 0, 3.5, 7 */
    expect(y, (const float[]){0, 3, 7}, 3, 0);
    resize1(0, 3, 0, 8, 3, 0.375f, x8, y); /* pytorch_half_pixel = half_pixel for out > 1 */
    expect(y, (const float[]){1, 3, 6}, 3, 0);
    /* Output of one element: pytorch_half_pixel takes 0, half_pixel the middle. */
    resize1(0, 3, 0, 8, 1, 0.125f, x8, y);
    assert_true(y[0] == 0);
    resize1(0, 0, 0, 8, 1, 0.125f, x8, y); /* c = 0.5*8 - 0.5 = 3.5 */
    assert_true(y[0] == 3);
    resize1(0, 0, 1, 8, 1, 0.125f, x8, y);
    assert_true(y[0] == 4);

    /* Scales derived from sizes carry float rounding: 3 -> 5 with scale
     * 5/3f must still put align_corners' c = o/2 exactly on the ties. */
    const float x3[3] = {10, 20, 30};
    resize1(0, 2, 0, 3, 5, 5.0f / 3.0f, x3, y);
    expect(y, (const float[]){10, 10, 20, 20, 30}, 5, 0);
    resize1(0, 2, 1, 3, 5, 5.0f / 3.0f, x3, y);
    expect(y, (const float[]){10, 20, 20, 30, 30}, 5, 0);

    /* 2-D inside 4-D: [1,1,2,2] -> [1,1,4,4] (ONNX's nearest example) and [1,1,2,3] from [1,1,2,4]. */
    const float m[4] = {1, 2, 3, 4};
    vram__shape xs = shp(4, 1, 1, 2, 2), ys = shp(4, 1, 1, 4, 4);
    const float sc[4] = {1, 1, 2, 2};
    assert_int_equal(vram__cpu_resize(0, 0, 0, &xs, m, sc, &ys, y, NULL), 0);
    expect(y, (const float[]){1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}, 16, 0);
    const float m8[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    vram__shape xs2 = shp(4, 1, 1, 2, 4), ys2 = shp(4, 1, 1, 1, 2);
    const float sc2[4] = {1, 1, 0.6f, 0.6f}; /* ONNX's resize_downsample_scales_nearest */
    assert_int_equal(vram__cpu_resize(0, 0, 0, &xs2, m8, sc2, &ys2, y, NULL), 0);
    expect(y, (const float[]){1, 3}, 2, 0);
}

static void test_resize_linear_hand(void **state)
{
    (void)state;
    const float x4[4] = {1, 2, 3, 4};
    float y[16];
    resize1(1, 0, 0, 4, 8, 2.0f, x4, y);
    expect(y, (const float[]){1, 1.25f, 1.75f, 2.25f, 2.75f, 3.25f, 3.75f, 4}, 8, 1e-6);
    resize1(1, 3, 0, 4, 8, 2.0f, x4, y);
    expect(y, (const float[]){1, 1.25f, 1.75f, 2.25f, 2.75f, 3.25f, 3.75f, 4}, 8, 1e-6);
    resize1(1, 1, 0, 4, 8, 2.0f, x4, y);
    expect(y, (const float[]){1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4}, 8, 1e-6);
    resize1(1, 2, 0, 4, 8, 2.0f, x4, y);
    for (int o = 0; o < 8; o++)
        assert_close(y[o], 1.0 + 3.0 * o / 7.0, 1e-6);
    /* One output: pytorch_half_pixel takes element 0, half_pixel c = 1.5. */
    resize1(1, 3, 0, 4, 1, 0.25f, x4, y);
    assert_true(y[0] == 1.0f);
    resize1(1, 0, 0, 4, 1, 0.25f, x4, y);
    assert_close(y[0], 2.5, 1e-6);

    /* ONNX's resize_upsample_scales_linear and ..._align_corners. */
    const float m[4] = {1, 2, 3, 4};
    vram__shape xs = shp(4, 1, 1, 2, 2), ys = shp(4, 1, 1, 4, 4);
    const float sc[4] = {1, 1, 2, 2};
    assert_int_equal(vram__cpu_resize(1, 0, 0, &xs, m, sc, &ys, y, NULL), 0);
    expect(y, (const float[]){1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4},
           16, 1e-6);
    assert_int_equal(vram__cpu_resize(1, 2, 0, &xs, m, sc, &ys, y, NULL), 0);
    expect(y, (const float[]){1, 1.333333f, 1.666667f, 2, 1.666667f, 2, 2.333333f, 2.666667f, 2.333333f, 2.666667f, 3,
                              3.333333f, 3, 3.333333f, 3.666667f, 4},
           16, 1e-5);
    /* ONNX's resize_downsample_scales_linear: [[2.6666665, 4.3333331]]. */
    const float m8[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    vram__shape xs2 = shp(4, 1, 1, 2, 4), ys2 = shp(4, 1, 1, 1, 2);
    const float sc2[4] = {1, 1, 0.6f, 0.6f};
    assert_int_equal(vram__cpu_resize(1, 0, 0, &xs2, m8, sc2, &ys2, y, NULL), 0);
    expect(y, (const float[]){2.6666665f, 4.3333331f}, 2, 1e-5);
    /* ... and its align_corners variant: ONNX's reference divides by the
     * resized length in * scale - 1 = 1.4 ([[1, 3.142857]]); ONNX Runtime,
     * the engine's reference, by the output extent - 1 = 1 ([[1, 4]]). */
    assert_int_equal(vram__cpu_resize(1, 2, 0, &xs2, m8, sc2, &ys2, y, NULL), 0);
    expect(y, (const float[]){1.0f, 4.0f}, 2, 1e-5);
}

/* Naive bilinear over the last two axes of NCHW, written from the ONNX
 * formulas with no tables. */
static double ref_coord(int ctm, int o, float scale, int in, int out)
{
    double s = scale;
    if (ctm == 0)
        return (o + 0.5) / s - 0.5;
    if (ctm == 1)
        return o / s;
    if (ctm == 2) /* ONNX Runtime: over the output extent */
        return out > 1 ? o * (in - 1.0) / (out - 1.0) : 0.0;
    return out > 1 ? (o + 0.5) / s - 0.5 : 0.0;
}

static void test_resize_linear_random(void **state)
{
    (void)state;
    const float scales[] = {0.5f, 0.6f, 0.75f, 1.5f, 1.7f, 2.0f, 3.0f};
    for (int trial = 0; trial < 40; trial++) {
        int N = rnd_int(1, 2), C = rnd_int(1, 3), H = rnd_int(1, 6), W = rnd_int(1, 6);
        float sh = scales[rnd() % 7], sw = scales[rnd() % 7];
        int OH = (int)floor(H * (double)sh), OW = (int)floor(W * (double)sw);
        if (OH < 1)
            OH = 1;
        if (OW < 1)
            OW = 1;
        vram__shape xs = shp(4, N, C, H, W), ys = shp(4, N, C, OH, OW);
        float sc[4] = {1, 1, sh, sw};
        float *x = rand_floats(vram__cpu_elems(&xs)), *y = rand_floats(vram__cpu_elems(&ys));
        /* The caller's table scratch, as an executor passes its workspace;
         * garbage in it must not matter. */
        size_t sb = (size_t)vram__cpu_resize_scratch(&ys);
        unsigned char *scratch = malloc(sb ? sb : 1);
        assert_non_null(scratch);
        memset(scratch, 0xA5, sb);
        for (int ctm = 0; ctm < 4; ctm++) {
            assert_int_equal(vram__cpu_resize(1, ctm, 0, &xs, x, sc, &ys, y, ctm & 1 ? scratch : NULL), 0);
            for (int n = 0; n < N; n++)
                for (int c = 0; c < C; c++)
                    for (int oh = 0; oh < OH; oh++)
                        for (int ow = 0; ow < OW; ow++) {
                            double h = ref_coord(ctm, oh, sh, H, OH), w = ref_coord(ctm, ow, sw, W, OW);
                            h = fmin(fmax(h, 0.0), H - 1.0);
                            w = fmin(fmax(w, 0.0), W - 1.0);
                            int h0 = (int)floor(h), w0 = (int)floor(w);
                            int h1 = h0 + 1 < H ? h0 + 1 : H - 1, w1 = w0 + 1 < W ? w0 + 1 : W - 1;
                            double dh = h - h0, dw = w - w0;
                            const float *p = x + ((int64_t)n * C + c) * H * W;
                            double want = (1 - dh) * ((1 - dw) * p[h0 * W + w0] + dw * p[h0 * W + w1]) +
                                          dh * ((1 - dw) * p[h1 * W + w0] + dw * p[h1 * W + w1]);
                            float got = y[(((int64_t)n * C + c) * OH + oh) * OW + ow];
                            if (!(fabs(got - want) <= 1e-5))
                                fail_msg("trial %d ctm %d %dx%d->%dx%d at (%d,%d,%d,%d): %g != %g", trial, ctm, H,
                                         W, OH, OW, n, c, oh, ow, got, want);
                        }
        }
        free(scratch);
        free(x);
        free(y);
    }
}

static void test_resize_errors(void **state)
{
    (void)state;
    const float x[4] = {1, 2, 3, 4};
    float y[8], keep[8];
    for (int i = 0; i < 8; i++)
        keep[i] = y[i] = 5.0f;
    vram__shape xs = shp(1, 4), ys = shp(1, 8), y2 = shp(2, 1, 8), e = shp(1, 0);
    float s2 = 2.0f, s0 = 0.0f, sinf_ = INFINITY, snan = NAN;
    assert_int_equal(vram__cpu_resize(2, 0, 0, &xs, x, &s2, &ys, y, NULL), VRAM_ENOSYS);
    assert_contains(vram_last_error(), "cubic");
    assert_int_equal(vram__cpu_resize(5, 0, 0, &xs, x, &s2, &ys, y, NULL), VRAM_EINVAL);
    assert_int_equal(vram__cpu_resize(0, 5, 0, &xs, x, &s2, &ys, y, NULL), VRAM_EINVAL);
    assert_contains(vram_last_error(), "coordinate_transformation_mode 5");
    assert_int_equal(vram__cpu_resize(0, 0, 4, &xs, x, &s2, &ys, y, NULL), VRAM_EINVAL);
    assert_contains(vram_last_error(), "nearest_mode 4");
    assert_int_equal(vram__cpu_resize(1, 0, 0, &xs, x, &s2, &y2, y, NULL), VRAM_EINVAL);
    assert_contains(vram_last_error(), "rank");
    assert_int_equal(vram__cpu_resize(1, 0, 0, &xs, x, &s0, &ys, y, NULL), VRAM_EINVAL);
    assert_contains(vram_last_error(), "scale 0");
    assert_int_equal(vram__cpu_resize(1, 0, 0, &xs, x, &sinf_, &ys, y, NULL), VRAM_EINVAL);
    assert_int_equal(vram__cpu_resize(1, 0, 0, &xs, x, &snan, &ys, y, NULL), VRAM_EINVAL);
    assert_int_equal(vram__cpu_resize(1, 0, 0, &e, x, &s2, &ys, y, NULL), VRAM_EINVAL);
    assert_contains(vram_last_error(), "from 0 to 8");
    assert_memory_equal(y, keep, sizeof y);
    /* Scale 1 everywhere copies, in both modes and every ctm. */
    for (int mode = 0; mode < 2; mode++)
        for (int ctm = 0; ctm < 4; ctm++) {
            float one = 1.0f;
            assert_int_equal(vram__cpu_resize(mode, ctm, 0, &xs, x, &one, &xs, y, NULL), 0);
            assert_memory_equal(y, x, sizeof x);
        }
}

/* ---- gather ------------------------------------------------------------------ */

static void test_gather(void **state)
{
    (void)state;
    int64_t x[12]; /* 3x4 */
    for (int i = 0; i < 12; i++)
        x[i] = 100 + i;
    vram__shape xs = shp(2, 3, 4);
    int64_t y[32], keep[32];
    /* axis 0, indices [2,-1,0] -> rows 2, 2, 0 */
    const int64_t i0[3] = {2, -1, 0};
    vram__shape is0 = shp(1, 3), ys0 = shp(2, 3, 4);
    assert_int_equal(vram__cpu_gather(8, 0, &xs, x, &is0, i0, &ys0, y), 0);
    const int64_t w0[12] = {108, 109, 110, 111, 108, 109, 110, 111, 100, 101, 102, 103};
    assert_memory_equal(y, w0, sizeof w0);
    /* axis 1 (and -1), indices [[0,-4],[3,1]] -> shape [3,2,2] */
    const int64_t i1[4] = {0, -4, 3, 1};
    vram__shape is1 = shp(2, 2, 2), ys1 = shp(3, 3, 2, 2);
    const int64_t w1[12] = {100, 100, 103, 101, 104, 104, 107, 105, 108, 108, 111, 109};
    assert_int_equal(vram__cpu_gather(8, 1, &xs, x, &is1, i1, &ys1, y), 0);
    assert_memory_equal(y, w1, sizeof w1);
    assert_int_equal(vram__cpu_gather(8, -1, &xs, x, &is1, i1, &ys1, y), 0);
    assert_memory_equal(y, w1, sizeof w1);
    /* A scalar index drops the axis. */
    const int64_t is_ = -2;
    vram__shape sc = shp(0), ysc = shp(1, 3);
    assert_int_equal(vram__cpu_gather(8, 1, &xs, x, &sc, &is_, &ysc, y), 0);
    assert_true(y[0] == 102 && y[1] == 106 && y[2] == 110);

    /* Random 3-D gathers of 2-byte elements on each axis against a reference. */
    vram__shape rs = shp(3, 3, 4, 5);
    uint16_t rx[60], ry[400];
    for (int i = 0; i < 60; i++)
        rx[i] = (uint16_t)(i * 3 + 1);
    for (int axis = 0; axis < 3; axis++) {
        int64_t n = rs.dim[axis], idx[6];
        for (int j = 0; j < 6; j++)
            idx[j] = rnd_int(-(int)n, (int)n - 1);
        vram__shape is = shp(2, 2, 3), ys;
        ys.rank = 4;
        for (int d = 0, k = 0; d < 3; d++) {
            if (d == axis) {
                ys.dim[k++] = 2;
                ys.dim[k++] = 3;
            } else {
                ys.dim[k++] = rs.dim[d];
            }
        }
        assert_int_equal(vram__cpu_gather(2, axis, &rs, rx, &is, idx, &ys, ry), 0);
        int64_t oi[4], xi[3];
        for (int64_t o = 0; o < vram__cpu_elems(&ys); o++) {
            unravel(o, &ys, oi);
            for (int d = 0, k = 0; d < 3; d++) {
                if (d == axis) {
                    int64_t v = idx[oi[k] * 3 + oi[k + 1]];
                    xi[d] = v < 0 ? v + n : v;
                    k += 2;
                } else {
                    xi[d] = oi[k++];
                }
            }
            assert_int_equal(ry[o], rx[ravel(xi, &rs)]);
        }
    }

    /* Out of range, either side: the index and the bound in the message, nothing written. */
    for (int i = 0; i < 32; i++)
        keep[i] = y[i] = -1;
    const int64_t bad_hi[3] = {0, 3, 1}, bad_lo[3] = {0, 1, -4};
    assert_int_equal(vram__cpu_gather(8, 0, &xs, x, &is0, bad_hi, &ys0, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "index 3");
    assert_contains(vram_last_error(), "[-3, 3)");
    assert_int_equal(vram__cpu_gather(8, 0, &xs, x, &is0, bad_lo, &ys0, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "index -4");
    assert_memory_equal(y, keep, sizeof y);
    /* Bad axis and a mismatched output shape. */
    assert_int_equal(vram__cpu_gather(8, 2, &xs, x, &is0, i0, &ys0, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "axis 2");
    assert_int_equal(vram__cpu_gather(8, -3, &xs, x, &is0, i0, &ys0, y), VRAM_EINVAL);
    vram__shape wrong = shp(2, 4, 3);
    assert_int_equal(vram__cpu_gather(8, 0, &xs, x, &is0, i0, &wrong, y), VRAM_EINVAL);
    assert_contains(vram_last_error(), "[4,3]");
    assert_memory_equal(y, keep, sizeof y);
}

/* ---- cast --------------------------------------------------------------------- */

static uint16_t to_half(float f)
{
    uint16_t h;
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, VRAM_DTYPE_FLOAT16, 1, &f, &h), 0);
    return h;
}

static float from_half(uint16_t h)
{
    float f;
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT16, VRAM_DTYPE_FLOAT, 1, &h, &f), 0);
    return f;
}

static void test_cast_float16(void **state)
{
    (void)state;
    /* Every half value decodes and encodes back to itself (NaNs stay NaN),
     * through float and through double. */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = from_half((uint16_t)h);
        int is_nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
        assert_int_equal(isnan(f) != 0, is_nan);
        uint16_t back = to_half(f);
        if (is_nan) {
            assert_true((back & 0x7c00) == 0x7c00 && (back & 0x3ff));
        } else {
            if (back != h)
                fail_msg("half 0x%04x -> %g -> 0x%04x", h, f, back);
            double d;
            uint16_t hb = (uint16_t)h, b2;
            assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT16, VRAM_DTYPE_DOUBLE, 1, &hb, &d), 0);
            assert_true(d == (double)f);
            assert_int_equal(vram__cpu_cast(VRAM_DTYPE_DOUBLE, VRAM_DTYPE_FLOAT16, 1, &d, &b2), 0);
            assert_int_equal(b2, h);
        }
    }
    /* Round to nearest even at every midpoint between neighbouring finite
     * positive halves (subnormals included), and just either side of it. */
    for (uint16_t h = 0; h < 0x7bff; h++) {
        float lo = from_half(h), hi = from_half((uint16_t)(h + 1));
        float mid = (lo + hi) / 2; /* exact: 12 significant bits */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : h;
        assert_int_equal(to_half(mid), even);
        assert_int_equal(to_half(nextafterf(mid, 0.0f)), h);
        assert_int_equal(to_half(nextafterf(mid, INFINITY)), h + 1);
        assert_int_equal(to_half(-mid), even | 0x8000);
    }
    /* Named cases. */
    assert_int_equal(to_half(1.0f), 0x3c00);
    assert_int_equal(to_half(-2.0f), 0xc000);
    assert_int_equal(to_half(0.0f), 0x0000);
    assert_int_equal(to_half(-0.0f), 0x8000);
    assert_int_equal(to_half(65504.0f), 0x7bff);
    assert_int_equal(to_half(65519.0f), 0x7bff);
    assert_int_equal(to_half(65520.0f), 0x7c00); /* the midpoint to 65536 rounds to inf */
    assert_int_equal(to_half(1e10f), 0x7c00);
    assert_int_equal(to_half(-1e10f), 0xfc00);
    assert_int_equal(to_half(INFINITY), 0x7c00);
    assert_int_equal(to_half(-INFINITY), 0xfc00);
    assert_int_equal(to_half(0x1p-24f), 0x0001);  /* smallest subnormal */
    assert_int_equal(to_half(0x1p-25f), 0x0000);  /* half of it: tie to even 0 */
    assert_int_equal(to_half(0x1.8p-24f), 0x0002); /* 1.5 units: tie to even 2 */
    assert_int_equal(to_half(0x1p-26f), 0x0000);
    assert_int_equal(to_half(1023 * 0x1p-24f), 0x03ff); /* largest subnormal */
    assert_int_equal(to_half(0x1p-14f), 0x0400);        /* smallest normal */
    assert_int_equal(to_half(0x1.ffcp-15f), 0x0400);    /* rounds up out of the subnormals */
    assert_int_equal(to_half(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(to_half(1.0f + 3 * 0x1p-11f), 0x3c02);
    assert_true(from_half(0x0001) == 0x1p-24f);
    assert_true(from_half(0x03ff) == 1023 * 0x1p-24f);
    assert_true(from_half(0x7bff) == 65504.0f);
    float nz = from_half(0x8000);
    assert_true(nz == 0.0f && signbit(nz));
    assert_true(isinf(from_half(0x7c00)) && from_half(0xfc00) < 0);
    uint16_t nh = to_half(NAN);
    assert_true(isnan(from_half(nh)));
    /* Integers to float16: exact while representable, inf beyond. */
    const int64_t iv[4] = {2048, 2049, 65504, 70000};
    uint16_t hv[4];
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_INT64, VRAM_DTYPE_FLOAT16, 4, iv, hv), 0);
    assert_true(from_half(hv[0]) == 2048.0f && from_half(hv[1]) == 2048.0f && from_half(hv[2]) == 65504.0f);
    assert_true(isinf(from_half(hv[3])));
}

static void test_cast(void **state)
{
    (void)state;
    /* Float to integers: truncation toward zero; NaN -> 0; out of range saturates. */
    const float f[] = {2.7f, -2.7f, 0.5f, -0.5f, 3e9f, -3e9f, NAN, INFINITY, -INFINITY, 1e20f, 2147483520.0f, -2147483648.0f};
    const int nf = (int)(sizeof f / sizeof f[0]);
    int32_t i32[16];
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, VRAM_DTYPE_INT32, nf, f, i32), 0);
    const int32_t w32[] = {2, -2, 0, 0, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, INT32_MAX, 2147483520, INT32_MIN};
    assert_memory_equal(i32, w32, sizeof w32);
    int64_t i64[16];
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, VRAM_DTYPE_INT64, nf, f, i64), 0);
    assert_true(i64[0] == 2 && i64[1] == -2 && i64[4] == 3000000000ll && i64[5] == -3000000000ll);
    assert_true(i64[6] == 0 && i64[7] == INT64_MAX && i64[8] == INT64_MIN && i64[9] == INT64_MAX);
    const double dbig[3] = {9.3e18, -9.3e18, -9223372036854775808.0};
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_DOUBLE, VRAM_DTYPE_INT64, 3, dbig, i64), 0);
    assert_true(i64[0] == INT64_MAX && i64[1] == INT64_MIN && i64[2] == INT64_MIN);
    const float f8[] = {127.9f, 128.0f, -128.9f, -129.0f, 255.5f, 256.0f, -1.0f, -0.9f};
    int8_t s8[8];
    uint8_t u8[8];
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, VRAM_DTYPE_INT8, 8, f8, s8), 0);
    const int8_t ws8[8] = {127, 127, -128, -128, 127, 127, -1, 0};
    assert_memory_equal(s8, ws8, sizeof s8);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, VRAM_DTYPE_UINT8, 8, f8, u8), 0);
    const uint8_t wu8[8] = {127, 128, 0, 0, 255, 255, 0, 0};
    assert_memory_equal(u8, wu8, sizeof u8);

    /* To bool: x != 0, so NaN is true and -0 false. */
    const float fb[5] = {0.0f, -0.0f, NAN, 1e-30f, -3.0f};
    uint8_t b[5];
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, VRAM_DTYPE_BOOL, 5, fb, b), 0);
    const uint8_t wb[5] = {0, 0, 1, 1, 1};
    assert_memory_equal(b, wb, sizeof b);
    const int64_t ib[3] = {0, -5, 1ll << 40};
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_INT64, VRAM_DTYPE_BOOL, 3, ib, b), 0);
    assert_true(b[0] == 0 && b[1] == 1 && b[2] == 1);
    /* From bool: any non-zero byte is 1. */
    const uint8_t bb[3] = {0, 1, 7};
    float fbo[3];
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_BOOL, VRAM_DTYPE_FLOAT, 3, bb, fbo), 0);
    assert_true(fbo[0] == 0.0f && fbo[1] == 1.0f && fbo[2] == 1.0f);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_BOOL, VRAM_DTYPE_INT32, 3, bb, i32), 0);
    assert_true(i32[2] == 1);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_BOOL, VRAM_DTYPE_BOOL, 3, bb, b), 0);
    assert_true(b[0] == 0 && b[1] == 1 && b[2] == 1);

    /* Integer narrowing wraps. */
    const int64_t wide[6] = {300, -1, 0x100000001ll, 2147483648ll, -129, 255};
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_INT64, VRAM_DTYPE_UINT8, 6, wide, u8), 0);
    assert_true(u8[0] == 44 && u8[1] == 255 && u8[2] == 1 && u8[3] == 0 && u8[4] == 127 && u8[5] == 255);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_INT64, VRAM_DTYPE_INT8, 6, wide, s8), 0);
    assert_true(s8[0] == 44 && s8[1] == -1 && s8[4] == 127 && s8[5] == -1);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_INT64, VRAM_DTYPE_INT32, 6, wide, i32), 0);
    assert_true(i32[0] == 300 && i32[1] == -1 && i32[2] == 1 && i32[3] == INT32_MIN && i32[4] == -129);
    const uint8_t ub[2] = {200, 255};
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_UINT8, VRAM_DTYPE_INT8, 2, ub, s8), 0);
    assert_true(s8[0] == -56 && s8[1] == -1);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_UINT8, VRAM_DTYPE_INT64, 2, ub, i64), 0);
    assert_true(i64[0] == 200 && i64[1] == 255);

    /* Round trips. */
    float rf[64], rf2[64];
    double rd[64];
    for (int i = 0; i < 64; i++)
        rf[i] = rnd_float() * 1e6f;
    rf[0] = FLT_MIN / 4; /* a float subnormal survives double */
    rf[1] = FLT_MAX;
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, VRAM_DTYPE_DOUBLE, 64, rf, rd), 0);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_DOUBLE, VRAM_DTYPE_FLOAT, 64, rd, rf2), 0);
    assert_memory_equal(rf, rf2, sizeof rf);
    int32_t ri[64], ri2[64];
    int64_t rl[64];
    for (int i = 0; i < 64; i++)
        ri[i] = (int32_t)rnd() - (int32_t)(rnd() & 0x7fffffff);
    ri[0] = INT32_MIN;
    ri[1] = INT32_MAX;
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_INT32, VRAM_DTYPE_INT64, 64, ri, rl), 0);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_INT64, VRAM_DTYPE_INT32, 64, rl, ri2), 0);
    assert_memory_equal(ri, ri2, sizeof ri);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_INT32, VRAM_DTYPE_DOUBLE, 64, ri, rd), 0);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_DOUBLE, VRAM_DTYPE_INT32, 64, rd, ri2), 0);
    assert_memory_equal(ri, ri2, sizeof ri);
    uint8_t all[256], all2[256];
    float af[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_UINT8, VRAM_DTYPE_FLOAT, 256, all, af), 0);
    assert_true(af[255] == 255.0f);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, VRAM_DTYPE_UINT8, 256, af, all2), 0);
    assert_memory_equal(all, all2, sizeof all);
    /* int64 -> float rounds once to nearest: 2^24 + 1 -> 2^24, 2^53 + 1 -> double 2^53. */
    const int64_t l2[2] = {(1ll << 24) + 1, (1ll << 53) + 1};
    float lf[2];
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_INT64, VRAM_DTYPE_FLOAT, 2, l2, lf), 0);
    assert_true(lf[0] == 16777216.0f);
    /* In place when the sizes match. */
    union {
        float f[3];
        int32_t i[3];
    } u = {.f = {1.9f, -1.9f, 40.0f}};
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, VRAM_DTYPE_INT32, 3, u.f, u.i), 0);
    assert_true(u.i[0] == 1 && u.i[1] == -1 && u.i[2] == 40);
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_INT32, VRAM_DTYPE_FLOAT, 3, u.i, u.f), 0);
    assert_true(u.f[0] == 1.0f && u.f[1] == -1.0f && u.f[2] == 40.0f);
    /* Same type copies. */
    float cp[3];
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, VRAM_DTYPE_FLOAT, 3, u.f, cp), 0);
    assert_memory_equal(cp, u.f, sizeof cp);

    /* Unsupported types: ENOSYS naming them, nothing written. */
    float keep[3] = {9, 9, 9}, out[3] = {9, 9, 9};
    assert_int_equal(vram__cpu_cast(13, VRAM_DTYPE_FLOAT, 3, ib, out), VRAM_ENOSYS);
    assert_contains(vram_last_error(), "type 13");
    assert_contains(vram_last_error(), "float");
    assert_int_equal(vram__cpu_cast(VRAM_DTYPE_FLOAT, 8, 3, fb, out), VRAM_ENOSYS);
    assert_contains(vram_last_error(), "type 8");
    assert_memory_equal(out, keep, sizeof out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary),
        cmocka_unit_test(test_broadcast_shape),
        cmocka_unit_test(test_binary_patterns),
        cmocka_unit_test(test_binary_errors),
        cmocka_unit_test(test_binary_i64),
        cmocka_unit_test(test_prelu),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_concat_split),
        cmocka_unit_test(test_slice),
        cmocka_unit_test(test_pad),
        cmocka_unit_test(test_resize_nearest),
        cmocka_unit_test(test_resize_linear_hand),
        cmocka_unit_test(test_resize_linear_random),
        cmocka_unit_test(test_resize_errors),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_cast_float16),
        cmocka_unit_test(test_cast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
