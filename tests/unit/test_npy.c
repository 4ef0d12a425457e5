/* tests/unit/test_npy.c - the .npy reader and writer of src/engine/npy.c:
 * write/read round trips for every supported dtype over a scalar, 1-D, 4-D
 * and zero-size shapes; the exact header form NumPy itself writes; files
 * written by real NumPy (versions 1.0, 2.0, 3.0, big-endian, Fortran order,
 * complex, unicode) read here and our files read back by NumPy, when
 * /usr/bin/python3 has numpy; hand-made headers with spacing, key order,
 * quotes, trailing commas and Python 2 'L' suffixes; every malformed input
 * with its error code and message, the output struct left zeroed; I/O
 * failures of reading and writing (missing directory, a directory, a full
 * device, a file size limit, after which no half-written file remains); and
 * the tensor-name-to-file-name rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/internal.h"
#include "engine/graph.h"
#include "vramkit/npy.h"

/* ---- helpers --------------------------------------------------------- */

static char tmpdir[256];

static int setup_dir(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/vram_npy_XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
    (void)state;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *tpath(const char *name)
{
    static char buf[4][512];
    static int next;
    char *p = buf[next++ & 3];
    snprintf(p, 512, "%s/%s", tmpdir, name);
    return p;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (!strstr(hay, needle))
        fail_msg("expected \"%s\" in \"%s\"", needle, hay);
}

static int have_numpy(void)
{
    static int known = -1;
    if (known < 0) {
        known = access("/usr/bin/python3", X_OK) == 0 &&
                system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
        if (!known)
            print_message("/usr/bin/python3 with numpy not found: skipping the NumPy cases\n");
    }
    return known;
}

static void run_python(const char *script)
{
    const char *py = tpath("script.py");
    FILE *f = fopen(py, "w");
    assert_non_null(f);
    fputs(script, f);
    assert_int_equal(fclose(f), 0);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' '%s'", py, tmpdir);
    assert_int_equal(system(cmd), 0);
}

static const int all_dtypes[] = {VRAM_DTYPE_FLOAT, VRAM_DTYPE_DOUBLE, VRAM_DTYPE_INT64, VRAM_DTYPE_INT32,
                                 VRAM_DTYPE_UINT8, VRAM_DTYPE_INT8,   VRAM_DTYPE_BOOL,  VRAM_DTYPE_FLOAT16};
static const size_t all_sizes[] = {4, 8, 8, 4, 1, 1, 1, 2};
static const char *const all_descrs[] = {"<f4", "<f8", "<i8", "<i4", "|u1", "|i1", "|b1", "<f2"};

/* Byte k of test data: an irregular pattern; booleans get 0 and 1. The
 * Python checks below compute the same. */
static unsigned char pattern(int dtype, size_t k)
{
    return dtype == VRAM_DTYPE_BOOL ? (unsigned char)(k % 3 == 0) : (unsigned char)((k * 31 + 7) & 0xff);
}

static vram__shape mkshape(int rank, ...)
{
    vram__shape s;
    memset(&s, 0, sizeof s);
    s.rank = rank;
    va_list ap;
    va_start(ap, rank);
    for (int i = 0; i < rank; i++)
        s.dim[i] = va_arg(ap, long long);
    va_end(ap);
    return s;
}

static void *read_whole(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *buf = malloc(1 << 20);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

/* A .npy image with a raw header text (no padding added) and `dlen` data
 * bytes of the pattern. Caller frees. */
static unsigned char *build(unsigned major, unsigned minor, const char *header, size_t dlen,
                            size_t *len)
{
    size_t hl = strlen(header), pre = major == 1 ? 10 : 12;
    unsigned char *b = malloc(pre + hl + dlen + 1);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = (unsigned char)minor;
    b[8] = (unsigned char)(hl & 0xff);
    b[9] = (unsigned char)(hl >> 8);
    if (pre == 12) {
        b[10] = (unsigned char)(hl >> 16);
        b[11] = (unsigned char)(hl >> 24);
    }
    memcpy(b + pre, header, hl);
    for (size_t k = 0; k < dlen; k++)
        b[pre + hl + k] = pattern(VRAM_DTYPE_FLOAT, k);
    *len = pre + hl + dlen;
    return b;
}

static void assert_zeroed(const vram_npy *a)
{
    assert_null(a->data);
    assert_int_equal(a->nbytes, 0);
    assert_int_equal(a->dtype, 0);
    assert_int_equal(a->rank, 0);
}

/* Parse must fail with `code`, a message holding the name and `needle`, and
 * *out zeroed although it was filled with garbage before. */
static void expect_fail(const void *bytes, size_t len, int code, const char *needle)
{
    vram_npy a;
    memset(&a, 0xab, sizeof a);
    vram_clear_error();
    int rc = vram_npy_parse(bytes, len, "case.npy", &a);
    if (rc != code)
        fail_msg("expected %s, got %s (%s) for \"%s\"", vram_err_name(code), vram_err_name(rc),
                 vram_last_error(), needle);
    assert_contains(vram_last_error(), "case.npy: ");
    assert_contains(vram_last_error(), needle);
    assert_zeroed(&a);
}

static void expect_header_fail(const char *header, size_t dlen, int code, const char *needle)
{
    size_t len;
    unsigned char *b = build(1, 0, header, dlen, &len);
    expect_fail(b, len, code, needle);
    free(b);
}

static void expect_header_ok(unsigned major, const char *header, size_t dlen, int dtype, int rank,
                             const int64_t *dims)
{
    size_t len;
    unsigned char *b = build(major, 0, header, dlen, &len);
    vram_npy a;
    int rc = vram_npy_parse(b, len, "ok.npy", &a);
    if (rc != 0)
        fail_msg("header %s: %s", header, vram_last_error());
    assert_int_equal(a.dtype, dtype);
    assert_int_equal(a.rank, rank);
    for (int i = 0; i < rank; i++)
        assert_int_equal(a.dims[i], dims[i]);
    assert_int_equal(a.nbytes, dlen);
    assert_non_null(a.data);
    assert_memory_equal(a.data, b + len - dlen, dlen);
    vram_npy_free(&a);
    assert_zeroed(&a);
    vram_npy_free(&a); /* twice is harmless */
    free(b);
}

/* ---- round trips ------------------------------------------------------- */

static const vram__shape *test_shapes(int *n)
{
    static vram__shape s[5];
    s[0] = mkshape(0);
    s[1] = mkshape(1, 7LL);
    s[2] = mkshape(4, 2LL, 3LL, 4LL, 5LL);
    s[3] = mkshape(3, 3LL, 0LL, 2LL);
    s[4] = mkshape(1, 0LL);
    *n = 5;
    return s;
}

static void test_round_trip_every_dtype(void **state)
{
    (void)state;
    int nshapes;
    const vram__shape *shapes = test_shapes(&nshapes);
    for (size_t t = 0; t < VRAM__ARRAY_LEN(all_dtypes); t++) {
        for (int s = 0; s < nshapes; s++) {
            size_t elems = 1;
            for (int i = 0; i < shapes[s].rank; i++)
                elems *= (size_t)shapes[s].dim[i];
            size_t nbytes = elems * all_sizes[t];
            unsigned char *data = malloc(nbytes + 1);
            for (size_t k = 0; k < nbytes; k++)
                data[k] = pattern(all_dtypes[t], k);
            const char *p = tpath("rt.npy");
            int rc = vram_npy_write(p, all_dtypes[t], shapes[s].rank, shapes[s].dim, nbytes ? data : NULL);
            if (rc)
                fail_msg("write %s rank %d: %s", all_descrs[t], shapes[s].rank, vram_last_error());
            vram_npy a;
            rc = vram_npy_read(p, &a);
            if (rc)
                fail_msg("read %s rank %d: %s", all_descrs[t], shapes[s].rank, vram_last_error());
            assert_int_equal(a.dtype, all_dtypes[t]);
            assert_int_equal(a.rank, shapes[s].rank);
            for (int i = 0; i < a.rank; i++)
                assert_int_equal(a.dims[i], shapes[s].dim[i]);
            assert_int_equal(a.nbytes, nbytes);
            assert_non_null(a.data);
            assert_memory_equal(a.data, data, nbytes);

            /* The same bytes parsed from memory give the same array. */
            size_t len;
            void *whole = read_whole(p, &len);
            vram_npy b;
            assert_int_equal(vram_npy_parse(whole, len, p, &b), 0);
            assert_int_equal(b.dtype, a.dtype);
            assert_int_equal(b.nbytes, a.nbytes);
            assert_memory_equal(b.data, data, nbytes);
            vram_npy_free(&b);
            free(whole);
            vram_npy_free(&a);
            free(data);
        }
    }
}

/* The header is NumPy's: version 1.0, the dict as NumPy prints it, padded
 * with spaces to a multiple of 64 bytes and ending in '\n'. */
static void test_written_header_form(void **state)
{
    (void)state;
    struct {
        int dtype;
        vram__shape shape;
        const char *dict;
    } cases[] = {
        {VRAM_DTYPE_FLOAT, mkshape(2, 2LL, 3LL), "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"},
        {VRAM_DTYPE_BOOL, mkshape(1, 5LL), "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }"},
        {VRAM_DTYPE_INT64, mkshape(0), "{'descr': '<i8', 'fortran_order': False, 'shape': (), }"},
        {VRAM_DTYPE_UINT8, mkshape(8, 1LL, 1LL, 1LL, 1LL, 1LL, 1LL, 1LL, 0LL),
         "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 0), }"},
        {VRAM_DTYPE_FLOAT16, mkshape(8, 0LL, 9223372036854775807LL, 9223372036854775807LL,
                                   9223372036854775807LL, 9223372036854775807LL,
                                   9223372036854775807LL, 9223372036854775807LL,
                                   9223372036854775807LL),
         "{'descr': '<f2', 'fortran_order': False, 'shape': (0, 9223372036854775807, "
         "9223372036854775807, 9223372036854775807, 9223372036854775807, 9223372036854775807, "
         "9223372036854775807, 9223372036854775807), }"},
    };
    unsigned char zeros[64] = {0};
    for (size_t i = 0; i < VRAM__ARRAY_LEN(cases); i++) {
        const char *p = tpath("form.npy");
        assert_int_equal(vram_npy_write(p, cases[i].dtype, cases[i].shape.rank, cases[i].shape.dim, zeros), 0);
        size_t len;
        unsigned char *b = read_whole(p, &len);
        assert_memory_equal(b, "\x93NUMPY\x01\x00", 8);
        size_t hlen = (size_t)b[8] | (size_t)b[9] << 8;
        assert_int_equal((10 + hlen) % 64, 0);
        assert_true(10 + hlen <= len);
        assert_int_equal(b[10 + hlen - 1], '\n');
        size_t dl = strlen(cases[i].dict);
        assert_memory_equal(b + 10, cases[i].dict, dl);
        for (size_t k = 10 + dl; k < 10 + hlen - 1; k++)
            assert_int_equal(b[k], ' ');
        free(b);
    }
}

/* Writing over a longer file truncates it. */
static void test_overwrite(void **state)
{
    (void)state;
    const char *p = tpath("over.npy");
    float big[100] = {0}, small[2] = {1.5f, -2.0f};
    vram__shape s100 = mkshape(1, 100LL), s2 = mkshape(1, 2LL);
    assert_int_equal(vram_npy_write(p, VRAM_DTYPE_FLOAT, s100.rank, s100.dim, big), 0);
    assert_int_equal(vram_npy_write(p, VRAM_DTYPE_FLOAT, s2.rank, s2.dim, small), 0);
    vram_npy a;
    assert_int_equal(vram_npy_read(p, &a), 0);
    assert_int_equal(a.nbytes, 8);
    assert_memory_equal(a.data, small, 8);
    vram_npy_free(&a);
}

/* ---- NumPy interoperation --------------------------------------------- */

static void test_numpy_reads_ours(void **state)
{
    (void)state;
    if (!have_numpy())
        skip();
    int nshapes;
    const vram__shape *shapes = test_shapes(&nshapes);
    char list[4096] = "";
    size_t used = 0;
    for (size_t t = 0; t < VRAM__ARRAY_LEN(all_dtypes); t++) {
        for (int s = 0; s < nshapes; s++) {
            size_t elems = 1;
            char shape_py[128] = "(";
            for (int i = 0; i < shapes[s].rank; i++) {
                elems *= (size_t)shapes[s].dim[i];
                snprintf(shape_py + strlen(shape_py), sizeof shape_py - strlen(shape_py), "%lld,",
                         (long long)shapes[s].dim[i]);
            }
            strcat(shape_py, ")");
            size_t nbytes = elems * all_sizes[t];
            unsigned char *data = malloc(nbytes + 1);
            for (size_t k = 0; k < nbytes; k++)
                data[k] = pattern(all_dtypes[t], k);
            char name[64];
            snprintf(name, sizeof name, "ours_%zu_%d.npy", t, s);
            assert_int_equal(vram_npy_write(tpath(name), all_dtypes[t], shapes[s].rank, shapes[s].dim, data), 0);
            free(data);
            used += (size_t)snprintf(list + used, sizeof list - used, "    ('%s', '%s', %s),\n", name,
                                     all_descrs[t], shape_py);
            assert_true(used < sizeof list);
        }
    }
    char script[6000];
    snprintf(script, sizeof script,
             "import sys, os, numpy as np\n"
             "d = sys.argv[1]\n"
             "cases = [\n%s]\n"
             "for name, descr, shape in cases:\n"
             "    a = np.load(os.path.join(d, name))\n"
             "    assert a.dtype == np.dtype(descr), (name, a.dtype)\n"
             "    assert a.shape == shape, (name, a.shape)\n"
             "    n = a.nbytes\n"
             "    if descr == '|b1':\n"
             "        want = bytes(1 if k %% 3 == 0 else 0 for k in range(n))\n"
             "    else:\n"
             "        want = bytes((k * 31 + 7) & 255 for k in range(n))\n"
             "    assert a.tobytes() == want, name\n",
             list);
    run_python(script);
}

static void test_reads_numpy_files(void **state)
{
    (void)state;
    if (!have_numpy())
        skip();
    run_python("import sys, os, numpy as np\n"
               "d = sys.argv[1]\n"
               "p = lambda n: os.path.join(d, n)\n"
               "np.save(p('np_f4.npy'), np.arange(24, dtype=np.float32).reshape(2, 3, 4))\n"
               "np.save(p('np_f8.npy'), np.arange(5, dtype=np.float64) * 0.5)\n"
               "np.save(p('np_i8.npy'), np.array([-1, 2**40, 3], dtype=np.int64))\n"
               "np.save(p('np_i4.npy'), np.array(-7, dtype=np.int32))\n"
               "np.save(p('np_u1.npy'), np.arange(6, dtype=np.uint8).reshape(1, 2, 3, 1))\n"
               "np.save(p('np_i1.npy'), np.array([-128, 127], dtype=np.int8))\n"
               "np.save(p('np_b1.npy'), np.array([True, False, True]))\n"
               "np.save(p('np_f2.npy'), np.arange(6, dtype=np.float16))\n"
               "np.save(p('np_zero.npy'), np.zeros((3, 0, 2), dtype=np.float32))\n"
               "from numpy.lib import format as F\n"
               "for v in [(2, 0), (3, 0)]:\n"
               "    with open(p('np_v%d.npy' % v[0]), 'wb') as f:\n"
               "        F.write_array(f, np.arange(6, dtype=np.int32).reshape(3, 2), version=v)\n"
               "np.save(p('np_be.npy'), np.arange(4, dtype='>f4'))\n"
               "np.save(p('np_be1.npy'), np.arange(4, dtype='>u1'))\n"
               "np.save(p('np_fortran.npy'), np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))\n"
               "np.save(p('np_c8.npy'), np.zeros(3, dtype=np.complex64))\n"
               "np.save(p('np_u16.npy'), np.zeros(3, dtype=np.uint16))\n"
               "np.save(p('np_str.npy'), np.array(['ab', 'cde']))\n"
               "np.save(p('np_struct.npy'), np.zeros(2, dtype=[('a', '<f4'), ('b', '<i8')]))\n");
    vram_npy a;

    assert_int_equal(vram_npy_read(tpath("np_f4.npy"), &a), 0);
    assert_int_equal(a.dtype, VRAM_DTYPE_FLOAT);
    assert_int_equal(a.rank, 3);
    assert_int_equal(a.dims[0], 2);
    assert_int_equal(a.dims[1], 3);
    assert_int_equal(a.dims[2], 4);
    for (int i = 0; i < 24; i++)
        assert_true(((float *)a.data)[i] == (float)i);
    vram_npy_free(&a);

    assert_int_equal(vram_npy_read(tpath("np_f8.npy"), &a), 0);
    assert_int_equal(a.dtype, VRAM_DTYPE_DOUBLE);
    assert_int_equal(a.rank, 1);
    assert_true(((double *)a.data)[3] == 1.5);
    vram_npy_free(&a);

    assert_int_equal(vram_npy_read(tpath("np_i8.npy"), &a), 0);
    assert_int_equal(a.dtype, VRAM_DTYPE_INT64);
    assert_int_equal(((int64_t *)a.data)[0], -1);
    assert_int_equal(((int64_t *)a.data)[1], 1LL << 40);
    vram_npy_free(&a);

    assert_int_equal(vram_npy_read(tpath("np_i4.npy"), &a), 0);
    assert_int_equal(a.dtype, VRAM_DTYPE_INT32);
    assert_int_equal(a.rank, 0);
    assert_int_equal(a.nbytes, 4);
    assert_int_equal(((int32_t *)a.data)[0], -7);
    vram_npy_free(&a);

    assert_int_equal(vram_npy_read(tpath("np_u1.npy"), &a), 0);
    assert_int_equal(a.dtype, VRAM_DTYPE_UINT8);
    assert_int_equal(a.rank, 4);
    assert_int_equal(a.dims[3], 1);
    assert_memory_equal(a.data, "\0\1\2\3\4\5", 6);
    vram_npy_free(&a);

    assert_int_equal(vram_npy_read(tpath("np_i1.npy"), &a), 0);
    assert_int_equal(a.dtype, VRAM_DTYPE_INT8);
    assert_int_equal(((int8_t *)a.data)[0], -128);
    assert_int_equal(((int8_t *)a.data)[1], 127);
    vram_npy_free(&a);

    assert_int_equal(vram_npy_read(tpath("np_b1.npy"), &a), 0);
    assert_int_equal(a.dtype, VRAM_DTYPE_BOOL);
    assert_memory_equal(a.data, "\1\0\1", 3);
    vram_npy_free(&a);

    assert_int_equal(vram_npy_read(tpath("np_f2.npy"), &a), 0);
    assert_int_equal(a.dtype, VRAM_DTYPE_FLOAT16);
    {
        static const uint16_t half[6] = {0x0000, 0x3c00, 0x4000, 0x4200, 0x4400, 0x4500};
        assert_memory_equal(a.data, half, sizeof half);
    }
    vram_npy_free(&a);

    assert_int_equal(vram_npy_read(tpath("np_zero.npy"), &a), 0);
    assert_int_equal(a.rank, 3);
    assert_int_equal(a.dims[1], 0);
    assert_int_equal(a.nbytes, 0);
    assert_non_null(a.data);
    vram_npy_free(&a);

    for (int v = 2; v <= 3; v++) {
        char name[32];
        snprintf(name, sizeof name, "np_v%d.npy", v);
        size_t len;
        unsigned char *raw = read_whole(tpath(name), &len);
        assert_int_equal(raw[6], v); /* NumPy did write that version */
        free(raw);
        assert_int_equal(vram_npy_read(tpath(name), &a), 0);
        assert_int_equal(a.dtype, VRAM_DTYPE_INT32);
        assert_int_equal(a.rank, 2);
        assert_int_equal(a.dims[0], 3);
        assert_int_equal(((int32_t *)a.data)[5], 5);
        vram_npy_free(&a);
    }

    /* One-byte types have no byte order: '>u1' is fine... */
    assert_int_equal(vram_npy_read(tpath("np_be1.npy"), &a), 0);
    assert_int_equal(a.dtype, VRAM_DTYPE_UINT8);
    vram_npy_free(&a);

    /* ...but the rest is refused, each with its reason. */
    struct {
        const char *file, *needle;
    } refused[] = {
        {"np_be.npy", "'>f4' is big-endian float32"},
        {"np_fortran.npy", "Fortran-order"},
        {"np_c8.npy", "'<c8' (complex64) is not supported"},
        {"np_u16.npy", "'<u2' (uint16) is not supported"},
        {"np_str.npy", "'<U3' (unicode string) is not supported"},
        {"np_struct.npy", "structured dtypes"},
    };
    for (size_t i = 0; i < VRAM__ARRAY_LEN(refused); i++) {
        memset(&a, 0xab, sizeof a);
        assert_int_equal(vram_npy_read(tpath(refused[i].file), &a), VRAM_ENOSYS);
        assert_contains(vram_last_error(), tpath(refused[i].file));
        assert_contains(vram_last_error(), refused[i].needle);
        assert_zeroed(&a);
    }
}

/* ---- hand-made headers that are fine ---------------------------------- */

static void test_header_variants(void **state)
{
    (void)state;
    const int64_t d23[] = {2, 3}, d3[] = {3}, d0big[] = {0, INT64_MAX, INT64_MAX};
    /* NumPy's own form, then every liberty Python's syntax allows. */
    expect_header_ok(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }      \n", 24,
                     VRAM_DTYPE_FLOAT, 2, d23);
    expect_header_ok(1, "{'descr':'<f4','fortran_order':False,'shape':(2,3)}", 24, VRAM_DTYPE_FLOAT, 2,
                     d23);
    expect_header_ok(1, "  {\n\t'shape' : ( 2 , 3 , ) ,\r\n 'fortran_order':False , 'descr' : \"<f4\" ,}\n",
                     24, VRAM_DTYPE_FLOAT, 2, d23);
    expect_header_ok(1, "{\"descr\": \"=f4\", \"fortran_order\": False, \"shape\": (2L, 3L)}", 24,
                     VRAM_DTYPE_FLOAT, 2, d23);
    expect_header_ok(1, "{'descr': '|f4', 'fortran_order': False, 'shape': (3,)}", 12, VRAM_DTYPE_FLOAT, 1,
                     d3);
    expect_header_ok(1, "{'descr': '<u1', 'fortran_order': False, 'shape': (3,)}", 3, VRAM_DTYPE_UINT8, 1,
                     d3);
    expect_header_ok(1, "{'descr': '>i1', 'fortran_order': False, 'shape': (3,)}", 3, VRAM_DTYPE_INT8, 1,
                     d3);
    expect_header_ok(1, "{'descr': '<b1', 'fortran_order': False, 'shape': (3,)}", 3, VRAM_DTYPE_BOOL, 1,
                     d3);
    expect_header_ok(1, "{'descr': 'i8', 'fortran_order': False, 'shape': ()}", 8, VRAM_DTYPE_INT64, 0,
                     NULL);
    expect_header_ok(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0, 9223372036854775807, "
                        "9223372036854775807)}",
                     0, VRAM_DTYPE_DOUBLE, 3, d0big);
    /* Versions 2.0 and 3.0 have a 4-byte header length. */
    expect_header_ok(2, "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }\n", 24,
                     VRAM_DTYPE_INT32, 2, d23);
    expect_header_ok(3, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }\n", 6,
                     VRAM_DTYPE_FLOAT16, 1, d3);
    /* A version 2.0 header longer than 65535 bytes (padding) and the data
     * right after it, unaligned. */
    {
        size_t n = 70000;
        char *h = malloc(n + 1);
        const char *dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
        memset(h, ' ', n);
        memcpy(h, dict, strlen(dict));
        h[n - 1] = '\n';
        h[n] = '\0';
        expect_header_ok(2, h, 12, VRAM_DTYPE_FLOAT, 1, d3);
        free(h);
    }
}

/* ---- malformed input ---------------------------------------------------- */

static void test_bad_preamble(void **state)
{
    (void)state;
    size_t len;
    unsigned char *b = build(1, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, &len);
    expect_fail(b, 0, VRAM_EPARSE, "truncated: 0 bytes");
    expect_fail(NULL, 0, VRAM_EPARSE, "truncated: 0 bytes");
    expect_fail(b, 4, VRAM_EPARSE, "truncated: 4 bytes, shorter than the 6-byte magic");
    expect_fail(b, 7, VRAM_EPARSE, "truncated: 7 bytes");
    expect_fail(b, 9, VRAM_EPARSE, "9 bytes, shorter than the 10-byte preamble of a version 1.0");
    expect_fail(b, 20, VRAM_EPARSE, "header of 57 bytes runs past the end of the file (10 bytes after");
    expect_fail(b, len - 1, VRAM_EPARSE, "data too short: shape (2,) of float32 needs 8 data bytes, the file holds 7");

    unsigned char *c = malloc(len);
    memcpy(c, b, len);
    c[5] = 'X';
    expect_fail(c, len, VRAM_EPARSE, "not a .npy file: it does not start with \\x93NUMPY");
    memcpy(c, "PK\3\4", 4); /* a .npz (zip) is no .npy */
    expect_fail(c, len, VRAM_EPARSE, "not a .npy file");
    memcpy(c, b, len);
    c[6] = 4;
    expect_fail(c, len, VRAM_ENOSYS, "format version 4.0 is not supported");
    c[6] = 0;
    expect_fail(c, len, VRAM_ENOSYS, "format version 0.0");
    c[6] = 1;
    c[7] = 1;
    expect_fail(c, len, VRAM_ENOSYS, "format version 1.1");
    free(c);
    free(b);

    /* Version 2.0: 12-byte preamble, 32-bit length. */
    b = build(2, 0, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, &len);
    expect_fail(b, 11, VRAM_EPARSE, "shorter than the 12-byte preamble of a version 2.0");
    b[11] = 0x80; /* a length of 2 GiB and more */
    expect_fail(b, len, VRAM_EPARSE, "header of 2147483705 bytes runs past the end");
    free(b);

    /* Not even a header: 0 bytes of it. */
    expect_header_fail("", 0, VRAM_EPARSE, "header byte 0: the header ends where '{' to open the header dict was expected");
}

static void test_bad_headers(void **state)
{
    (void)state;
    struct {
        const char *header;
        size_t dlen;
        int code;
        const char *needle;
    } cases[] = {
        /* the dict itself */
        {"'descr': '<f4'", 0, VRAM_EPARSE, "header byte 0: expected '{' to open the header dict, found '''"},
        {"{'descr': '<f4', ", 0, VRAM_EPARSE, "header byte 17: the header ends before the dict's closing '}'"},
        {"{'descr': '<f4', 'fortr", 0, VRAM_EPARSE, "a key is not closed before the header ends"},
        {"{'descr': '<f4' 'fortran_order': False}", 0, VRAM_EPARSE, "expected ',' or '}' after a value, found '''"},
        {"{'descr' '<f4'}", 0, VRAM_EPARSE, "expected ':' after a key, found '''"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", 8, VRAM_EPARSE, "unexpected 'x' after the header dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}}", 8, VRAM_EPARSE, "unexpected '}' after"},
        {"{descr: '<f4'}", 0, VRAM_EPARSE, "expected a key (a quoted string), found 'd'"},
        {"{'descr': '<f\\x34'}", 0, VRAM_EPARSE, "escape sequences are not supported in the 'descr' value"},
        {"{'descr': '<f4\n'}", 0, VRAM_EPARSE, "the 'descr' value is not closed on its line"},
        /* keys */
        {"{'descr': '<f4', 'shape': (2,)}", 8, VRAM_EPARSE, "the header dict lacks 'fortran_order'"},
        {"{'fortran_order': False, 'shape': (2,)}", 8, VRAM_EPARSE, "lacks 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False}", 8, VRAM_EPARSE, "lacks 'shape'"},
        {"{}", 0, VRAM_EPARSE, "lacks 'descr', 'fortran_order', 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'order': 'C'}", 8, VRAM_EPARSE,
         "header byte 56: unexpected key 'order'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8, VRAM_EPARSE,
         "key 'descr' appears twice"},
        /* fortran_order */
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2,)}", 8, VRAM_ENOSYS, "Fortran-order"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}", 8, VRAM_EPARSE, "'fortran_order' must be True or False"},
        {"{'descr': '<f4', 'fortran_order': Trueish, 'shape': (2,)}", 8, VRAM_EPARSE, "must be True or False"},
        {"{'descr': '<f4', 'fortran_order': 'False', 'shape': (2,)}", 8, VRAM_EPARSE, "must be True or False"},
        /* shape */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", 24, VRAM_EPARSE, "'shape' must be a tuple such as (2, 3), found '['"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': 6}", 24, VRAM_EPARSE, "'shape' must be a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", 24, VRAM_EPARSE, "'shape' (6) is an integer, not a tuple: write (6,)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", 24, VRAM_EPARSE, "expected ',' or ')' in 'shape', found '3'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,,3)}", 24, VRAM_EPARSE, "dimension 1 of 'shape' is not an integer (found ',')"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (,)}", 0, VRAM_EPARSE, "dimension 0 of 'shape' is not an integer (found ',')"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x)}", 8, VRAM_EPARSE, "dimension 1 of 'shape' is not an integer (found 'x')"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,)}", 8, VRAM_EPARSE, "expected ',' or ')' in 'shape', found '.'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3", 24, VRAM_EPARSE, "the header ends inside 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, ", 24, VRAM_EPARSE, "the header ends inside 'shape'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': ", 24, VRAM_EPARSE, "the header ends where the 'shape' tuple was expected"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3)}", 0, VRAM_EPARSE, "header byte 54: dimension 1 of 'shape' is negative (-3)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 0, VRAM_EPARSE, "dimension 0 of 'shape' is negative (-1)"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 0, VRAM_EPARSE,
         "dimension 0 of 'shape' (99999999999999999999, 20 digits) does not fit in 64 bits"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,)}", 0, VRAM_EPARSE,
         "(9223372036854775808, 19 digits) does not fit in 64 bits"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 0, VRAM_EPARSE,
         "shape (4294967296, 4294967296) of float32 is too large: its size overflows 64 bits"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,)}", 0, VRAM_EPARSE,
         "shape (2305843009213693952,) of float64 is too large"},
        {"{'descr': '|u1', 'fortran_order': False, 'shape': (9223372036854775807, 2)}", 0, VRAM_EPARSE,
         "is too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1)}", 4, VRAM_ENOSYS,
         "the array has 9 dimensions, at most 8 are supported"},
        /* data length */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 20, VRAM_EPARSE,
         "data too short: shape (2, 3) of float32 needs 24 data bytes, the file holds 20"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 28, VRAM_EPARSE,
         "trailing bytes after the data: shape (2, 3) of float32 needs 24 data bytes, the file holds 28"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': ()}", 0, VRAM_EPARSE,
         "shape () of float32 needs 4 data bytes, the file holds 0"},
        {"{'descr': '<i8', 'fortran_order': False, 'shape': (3, 0)}", 1, VRAM_EPARSE,
         "shape (3, 0) of int64 needs 0 data bytes, the file holds 1"},
        /* descr */
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2,)}", 8, VRAM_ENOSYS,
         "'>f4' is big-endian float32; only little-endian data is supported (save it with .astype('<f4'))"},
        {"{'descr': '>i8', 'fortran_order': False, 'shape': (2,)}", 16, VRAM_ENOSYS, "'>i8' is big-endian int64"},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (2,)}", 16, VRAM_ENOSYS, "'<c8' (complex64) is not supported"},
        {"{'descr': '<c16', 'fortran_order': False, 'shape': (2,)}", 32, VRAM_ENOSYS, "'<c16' (complex128) is not supported"},
        {"{'descr': '<u8', 'fortran_order': False, 'shape': (2,)}", 16, VRAM_ENOSYS, "(uint64) is not supported"},
        {"{'descr': '<i2', 'fortran_order': False, 'shape': (2,)}", 4, VRAM_ENOSYS, "(int16) is not supported"},
        {"{'descr': '|S7', 'fortran_order': False, 'shape': (2,)}", 14, VRAM_ENOSYS, "'|S7' (byte string) is not supported"},
        {"{'descr': '|O', 'fortran_order': False, 'shape': (2,)}", 16, VRAM_ENOSYS, "'|O' (Python object)"},
        {"{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (2,)}", 16, VRAM_ENOSYS, "(datetime64) is not supported"},
        {"{'descr': '|V16', 'fortran_order': False, 'shape': (2,)}", 32, VRAM_ENOSYS, "(raw bytes)"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}", 8, VRAM_ENOSYS, "structured dtypes"},
        {"{'descr': '<f3', 'fortran_order': False, 'shape': (2,)}", 6, VRAM_EPARSE,
         "descr '<f3' is not a NumPy type string (no 3-byte 'f' type)"},
        {"{'descr': '<x4', 'fortran_order': False, 'shape': (2,)}", 8, VRAM_EPARSE, "descr '<x4' is not a NumPy type string"},
        {"{'descr': '<f4 ', 'fortran_order': False, 'shape': (2,)}", 8, VRAM_EPARSE, "descr '<f4 ' is not a NumPy type string"},
        {"{'descr': '<f99999999999', 'fortran_order': False, 'shape': (2,)}", 8, VRAM_EPARSE, "is not a NumPy type string"},
        {"{'descr': '<f9999999999', 'fortran_order': False, 'shape': (2,)}", 8, VRAM_EPARSE, "(no 9999999999-byte 'f' type)"},
        {"{'descr': '', 'fortran_order': False, 'shape': (2,)}", 8, VRAM_EPARSE, "descr '' is not a NumPy type string"},
        {"{'descr': '<', 'fortran_order': False, 'shape': (2,)}", 8, VRAM_EPARSE, "descr '<' is not"},
        {"{'descr': '|U', 'fortran_order': False, 'shape': (2,)}", 8, VRAM_EPARSE, "descr '|U' is not"},
        {"{'descr': 4, 'fortran_order': False, 'shape': (2,)}", 8, VRAM_EPARSE,
         "expected the 'descr' value (a quoted string), found '4'"},
    };
    for (size_t i = 0; i < VRAM__ARRAY_LEN(cases); i++)
        expect_header_fail(cases[i].header, cases[i].dlen, cases[i].code, cases[i].needle);

    /* A NUL inside the header is just a wrong byte, not an end. */
    static const char with_nul[] = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}\0";
    size_t len;
    unsigned char *b = build(1, 0, "", 0, &len);
    unsigned char *c = malloc(10 + sizeof with_nul + 8);
    memcpy(c, b, 10);
    c[8] = (unsigned char)sizeof with_nul;
    memcpy(c + 10, with_nul, sizeof with_nul);
    memset(c + 10 + sizeof with_nul, 0, 8);
    expect_fail(c, 10 + sizeof with_nul + 8, VRAM_EPARSE, "unexpected '\\x00' after the header dict");
    free(c);
    free(b);
}

/* Every truncation of a valid file fails cleanly, never reads past its end
 * (checked under ASan) and never succeeds. */
static void test_every_truncation(void **state)
{
    (void)state;
    vram__shape s = mkshape(2, 2LL, 3LL);
    int32_t v[6] = {1, 2, 3, 4, 5, 6};
    const char *p = tpath("trunc.npy");
    assert_int_equal(vram_npy_write(p, VRAM_DTYPE_INT32, s.rank, s.dim, v), 0);
    size_t len;
    unsigned char *whole = read_whole(p, &len);
    for (size_t n = 0; n < len; n++) {
        unsigned char *cut = malloc(n ? n : 1);
        memcpy(cut, whole, n);
        vram_npy a;
        memset(&a, 0xab, sizeof a);
        assert_int_equal(vram_npy_parse(cut, n, "cut", &a), VRAM_EPARSE);
        assert_zeroed(&a);
        free(cut);
    }
    free(whole);
}

/* ---- I/O errors and arguments ----------------------------------------- */

static void test_read_errors(void **state)
{
    (void)state;
    vram_npy a;
    memset(&a, 0xab, sizeof a);
    assert_int_equal(vram_npy_read(tpath("missing.npy"), &a), VRAM_EIO);
    assert_contains(vram_last_error(), "cannot open ");
    assert_contains(vram_last_error(), tpath("missing.npy"));
    assert_contains(vram_last_error(), "No such file or directory");
    assert_zeroed(&a);

    memset(&a, 0xab, sizeof a);
    assert_int_equal(vram_npy_read(tmpdir, &a), VRAM_EIO);
    assert_contains(vram_last_error(), "cannot read ");
    assert_contains(vram_last_error(), "Is a directory");
    assert_zeroed(&a);

    /* A malformed file names itself. */
    FILE *f = fopen(tpath("junk.npy"), "wb");
    fputs("hello, world\n", f);
    fclose(f);
    assert_int_equal(vram_npy_read(tpath("junk.npy"), &a), VRAM_EPARSE);
    char want[600];
    snprintf(want, sizeof want, "%s: not a .npy file", tpath("junk.npy"));
    assert_contains(vram_last_error(), want);
    assert_zeroed(&a);

    /* Not a regular file: a pipe's bytes are read to its end. */
    if (access("/dev/null", R_OK) == 0) {
        assert_int_equal(vram_npy_read("/dev/null", &a), VRAM_EPARSE);
        assert_contains(vram_last_error(), "/dev/null: truncated: 0 bytes");
    }

    assert_int_equal(vram_npy_read(NULL, &a), VRAM_EINVAL);
    assert_int_equal(vram_npy_read("", &a), VRAM_EINVAL);
    assert_int_equal(vram_npy_read("x.npy", NULL), VRAM_EINVAL);
    assert_int_equal(vram_npy_parse("x", 1, "x", NULL), VRAM_EINVAL);
    assert_int_equal(vram_npy_parse(NULL, 5, "x", &a), VRAM_EINVAL);
    assert_zeroed(&a);
    /* NULL `what` reads as "npy data". */
    assert_int_equal(vram_npy_parse("abc", 3, NULL, &a), VRAM_EPARSE);
    assert_contains(vram_last_error(), "npy data: ");
    vram_npy_free(NULL);
}

static void test_write_errors(void **state)
{
    (void)state;
    float v[4] = {0};
    vram__shape s = mkshape(1, 4LL);

    assert_int_equal(vram_npy_write(tpath("nodir/x.npy"), VRAM_DTYPE_FLOAT, s.rank, s.dim, v), VRAM_EIO);
    assert_contains(vram_last_error(), "cannot create ");
    assert_contains(vram_last_error(), "nodir/x.npy: No such file or directory");

    assert_int_equal(vram_npy_write(tmpdir, VRAM_DTYPE_FLOAT, s.rank, s.dim, v), VRAM_EIO);
    assert_contains(vram_last_error(), "Is a directory");

    if (access("/dev/full", W_OK) == 0) {
        assert_int_equal(vram_npy_write("/dev/full", VRAM_DTYPE_FLOAT, s.rank, s.dim, v), VRAM_EIO);
        assert_contains(vram_last_error(), "cannot write /dev/full: No space left on device");
        assert_int_equal(access("/dev/full", F_OK), 0); /* a device is never removed */
    }

    /* A file cut short by a size limit is removed, not left truncated. */
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    if (old.rlim_max != RLIM_INFINITY && old.rlim_max < 1000) {
        print_message("file size limit below 1000 bytes: skipping the size-limit case\n");
    } else {
        void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
        lim = old;
        lim.rlim_cur = 1000;
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
        static float big[4096];
        vram__shape sb = mkshape(2, 64LL, 64LL);
        int rc = vram_npy_write(tpath("limited.npy"), VRAM_DTYPE_FLOAT, sb.rank, sb.dim, big);
        assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
        signal(SIGXFSZ, prev);
        assert_int_equal(rc, VRAM_EIO);
        assert_contains(vram_last_error(), "cannot write ");
        assert_contains(vram_last_error(), "File too large");
        assert_int_equal(access(tpath("limited.npy"), F_OK), -1);
    }

    const char *p = tpath("bad.npy");
    vram__shape neg = mkshape(2, 2LL, -1LL);
    assert_int_equal(vram_npy_write(p, VRAM_DTYPE_FLOAT, neg.rank, neg.dim, v), VRAM_EINVAL);
    assert_contains(vram_last_error(), "dimension 1 is -1 (unknown)");
    vram__shape r9 = mkshape(0);
    r9.rank = 9;
    assert_int_equal(vram_npy_write(p, VRAM_DTYPE_FLOAT, r9.rank, r9.dim, v), VRAM_EINVAL);
    assert_contains(vram_last_error(), "rank 9 is outside 0..8");
    r9.rank = -1;
    assert_int_equal(vram_npy_write(p, VRAM_DTYPE_FLOAT, r9.rank, r9.dim, v), VRAM_EINVAL);
    assert_int_equal(vram_npy_write(p, VRAM_DTYPE_UNDEFINED, s.rank, s.dim, v), VRAM_EINVAL);
    assert_contains(vram_last_error(), "element type 0 has no .npy form");
    assert_int_equal(vram_npy_write(p, 13, s.rank, s.dim, v), VRAM_EINVAL);
    vram__shape huge = mkshape(2, 4294967296LL, 4294967296LL);
    assert_int_equal(vram_npy_write(p, VRAM_DTYPE_UINT8, huge.rank, huge.dim, v), VRAM_EINVAL);
    assert_contains(vram_last_error(), "shape (4294967296, 4294967296) of uint8 overflows");
    assert_int_equal(vram_npy_write(p, VRAM_DTYPE_FLOAT, s.rank, s.dim, NULL), VRAM_EINVAL);
    assert_contains(vram_last_error(), "no data for 16 bytes");
    assert_int_equal(vram_npy_write(NULL, VRAM_DTYPE_FLOAT, s.rank, s.dim, v), VRAM_EINVAL);
    assert_int_equal(vram_npy_write(p, VRAM_DTYPE_FLOAT, 2, NULL, v), VRAM_EINVAL);
    /* None of these created the file. */
    assert_int_equal(access(p, F_OK), -1);
}

/* ---- file names --------------------------------------------------------- */

static void expect_name(const char *in, const char *want)
{
    char out[64];
    memset(out, 'z', sizeof out);
    assert_int_equal(vram_npy_file_name(in, out, sizeof out), 0);
    assert_string_equal(out, want);
}

static void test_sanitize_name(void **state)
{
    (void)state;
    expect_name("input", "input");
    expect_name("input:0", "input_0");
    expect_name("a/b", "a_b");
    expect_name("../../etc/passwd", ".._.._etc_passwd");
    expect_name("Conv_1.out-2", "Conv_1.out-2");
    expect_name("with space\t", "with_space_");
    expect_name("caf\xc3\xa9", "caf__");
    expect_name("", "_");
    expect_name(".", "_");
    expect_name("..", "_.");
    expect_name("...", "...");
    expect_name(".hidden", ".hidden");
    expect_name("/", "_");
    expect_name("a\\b*?\"<>|", "a_b______");

    /* The buffer must hold the name and its NUL. */
    char out[6];
    assert_int_equal(vram_npy_file_name("abcde", out, 6), 0);
    assert_string_equal(out, "abcde");
    memset(out, 'z', sizeof out);
    assert_int_equal(vram_npy_file_name("abcdef", out, 6), VRAM_EINVAL);
    assert_contains(vram_last_error(), "needs 7 bytes, the buffer holds 6");
    assert_string_equal(out, "");
    assert_int_equal(vram_npy_file_name("", out, 1), VRAM_EINVAL);
    assert_int_equal(vram_npy_file_name("", out, 2), 0);
    assert_string_equal(out, "_");
    assert_int_equal(vram_npy_file_name("a", out, 0), VRAM_EINVAL);
    assert_int_equal(vram_npy_file_name(NULL, out, sizeof out), VRAM_EINVAL);
    assert_int_equal(vram_npy_file_name("a", NULL, 4), VRAM_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_dtype),
        cmocka_unit_test(test_written_header_form),
        cmocka_unit_test(test_overwrite),
        cmocka_unit_test(test_numpy_reads_ours),
        cmocka_unit_test(test_reads_numpy_files),
        cmocka_unit_test(test_header_variants),
        cmocka_unit_test(test_bad_preamble),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_read_errors),
        cmocka_unit_test(test_write_errors),
        cmocka_unit_test(test_sanitize_name),
    };
    return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}
