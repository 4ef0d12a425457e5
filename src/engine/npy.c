/* src/engine/npy.c - reads and writes NumPy .npy files (vramkit/npy.h).
 *
 * The layout: the magic "\x93NUMPY", a major and a minor version byte, the
 * header length (uint16 little-endian in 1.0, uint32 in 2.0 and 3.0), the
 * header - a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and a newline - and then the elements, C order. The
 * header parser below understands exactly the literals NumPy writes (and
 * Python would accept for them): single- or double-quoted strings without
 * escapes, True/False, tuples of non-negative integers (with Python 2's 'L'
 * suffix, which old NumPy wrote), any whitespace, any key order, trailing
 * commas. It never reads outside the bytes it is given. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/internal.h"
#include "engine/graph.h"
#include "vramkit/npy.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "npy.c reads and writes little-endian data as is: it needs a little-endian host"
#endif

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ---- element types ---------------------------------------------------- */

/* NumPy's numeric type codes: kind letter and size. dtype 0 marks a valid
 * NumPy type the engine does not handle (refused with VRAM_ENOSYS). */
typedef struct npy_type {
    char kind;
    unsigned size;
    int dtype;
    const char *name;
} npy_type;

static const npy_type npy_types[] = {
    {'f', 4, VRAM_DTYPE_FLOAT, "float32"},   {'f', 8, VRAM_DTYPE_DOUBLE, "float64"},
    {'f', 2, VRAM_DTYPE_FLOAT16, "float16"}, {'i', 8, VRAM_DTYPE_INT64, "int64"},
    {'i', 4, VRAM_DTYPE_INT32, "int32"},     {'i', 1, VRAM_DTYPE_INT8, "int8"},
    {'u', 1, VRAM_DTYPE_UINT8, "uint8"},     {'b', 1, VRAM_DTYPE_BOOL, "bool"},
    {'i', 2, 0, "int16"},                  {'u', 2, 0, "uint16"},
    {'u', 4, 0, "uint32"},                 {'u', 8, 0, "uint64"},
    {'f', 12, 0, "float96"},               {'f', 16, 0, "float128"},
    {'c', 8, 0, "complex64"},              {'c', 16, 0, "complex128"},
    {'c', 24, 0, "complex192"},            {'c', 32, 0, "complex256"},
};

static const npy_type *type_of_dtype(int dtype)
{
    for (size_t i = 0; i < VRAM__ARRAY_LEN(npy_types); i++)
        if (npy_types[i].dtype && npy_types[i].dtype == dtype)
            return &npy_types[i];
    return NULL;
}

/* Map a descr string (not NUL-terminated) to a supported dtype, or fail:
 * VRAM_ENOSYS for valid NumPy types we do not handle, VRAM_EPARSE for text
 * that is no NumPy type string at all. */
static int parse_descr(const char *s, size_t n, const npy_type **out)
{
    int show = n > 40 ? 40 : (int)n;
    size_t i = 0;
    char order = '=';
    if (i < n && s[i] && strchr("<>|=", s[i]))
        order = s[i++];
    if (i >= n)
        return vram__fail(VRAM_EPARSE, "descr '%.*s' is not a NumPy type string", show, s);
    char kind = s[i++];
    /* The element size in decimal (at most 10 digits are read: no numeric
     * type is wider than 32 bytes, and the rest is refused below). */
    uint64_t size = 0;
    size_t digits = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9' && digits < 10) {
        size = size * 10 + (uint64_t)(s[i++] - '0');
        digits++;
    }
    const char *rest = s + i;
    size_t rest_n = n - i;

    if (kind && strchr("biufc", kind) && digits && !rest_n) {
        for (size_t t = 0; t < VRAM__ARRAY_LEN(npy_types); t++) {
            const npy_type *ty = &npy_types[t];
            if (ty->kind != kind || ty->size != size)
                continue;
            if (!ty->dtype)
                return vram__fail(VRAM_ENOSYS, "'%.*s' (%s) is not supported", show, s,
                                  ty->name);
            if (order == '>' && ty->size > 1)
                return vram__fail(VRAM_ENOSYS,
                                  "'%.*s' is big-endian %s; only little-endian data is "
                                  "supported (save it with .astype('<%c%u'))",
                                  show, s, ty->name, kind, ty->size);
            *out = ty;
            return 0;
        }
        return vram__fail(VRAM_EPARSE, "descr '%.*s' is not a NumPy type string (no %llu-byte '%c' type)",
                          show, s, (unsigned long long)size, kind);
    }
    const char *what = NULL;
    switch (kind) {
    case 'U': what = "unicode string"; break;
    case 'S':
    case 'a': what = "byte string"; break;
    case 'V': what = "raw bytes"; break;
    case 'O': what = "Python object"; break;
    case 'M': what = "datetime64"; break;
    case 'm': what = "timedelta64"; break;
    default: break;
    }
    /* 'O' takes no size; datetimes may carry a unit such as "[ns]". */
    int ok = what && ((kind == 'O' && (!digits || size == 8) && !rest_n) ||
                      (kind && strchr("USaV", kind) && digits && !rest_n) ||
                      ((kind == 'M' || kind == 'm') && (!rest_n || rest[0] == '[')));
    if (ok)
        return vram__fail(VRAM_ENOSYS, "'%.*s' (%s) is not supported", show, s, what);
    return vram__fail(VRAM_EPARSE, "descr '%.*s' is not a NumPy type string", show, s);
}

/* "(2, 3)", "(5,)" or "()" like Python prints tuples. */
static const char *fmt_shape(char *buf, size_t cap, const int64_t *dim, int rank)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)dim[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, rank == 1 ? ",)" : ")");
    return buf;
}

/* Elements times element size, checked against size_t and int64 overflow. A
 * zero dimension makes the product 0 whatever the other dimensions are.
 * Returns 0, or -1 on overflow. */
static int checked_bytes(const int64_t *dim, int rank, size_t itemsize, size_t *bytes_out)
{
    for (int i = 0; i < rank; i++)
        if (dim[i] == 0) {
            *bytes_out = 0;
            return 0;
        }
    uint64_t elems = 1;
    for (int i = 0; i < rank; i++) {
        uint64_t d = (uint64_t)dim[i];
        if (elems > (uint64_t)INT64_MAX / d)
            return -1;
        elems *= d;
    }
    if (elems > SIZE_MAX / itemsize || elems * itemsize > (uint64_t)INT64_MAX)
        return -1;
    *bytes_out = (size_t)elems * itemsize;
    return 0;
}

/* ---- the header dict -------------------------------------------------- */

typedef struct hdr {
    const char *begin, *p, *end;
} hdr;

typedef struct hdr_fields {
    const char *descr; /* points into the header */
    size_t descr_len;
    int have_descr, have_fortran, have_shape;
    int fortran;
    int rank;          /* may exceed VRAM__MAX_RANK: dims past it are not kept */
    int64_t dim[VRAM__MAX_RANK];
} hdr_fields;

static int hdr_fail(const hdr *h, const char *fmt, ...) VRAM__PRINTF(2, 3);

static int hdr_fail(const hdr *h, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vram__fail(VRAM_EPARSE, "header byte %zu: %s", (size_t)(h->p - h->begin), msg);
}

/* The byte at h->p for a message: 'x', or '\x00' when not printable. The
 * text lives in a per-thread buffer until the next call. */
static const char *shown(const hdr *h)
{
    static _Thread_local char buf[8];
    unsigned char c = (unsigned char)*h->p;
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, sizeof buf, "'%c'", c);
    else
        snprintf(buf, sizeof buf, "'\\x%02x'", c);
    return buf;
}

static void skip_ws(hdr *h)
{
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
        h->p++;
}

static int peek(const hdr *h, char c) { return h->p < h->end && *h->p == c; }

static int expect(hdr *h, char c, const char *where)
{
    skip_ws(h);
    if (h->p >= h->end)
        return hdr_fail(h, "the header ends where '%c' %s was expected", c, where);
    if (*h->p != c)
        return hdr_fail(h, "expected '%c' %s, found %s", c, where, shown(h));
    h->p++;
    return 0;
}

/* A quoted string without escapes; *s, *n point into the header. */
static int parse_string(hdr *h, const char **s, size_t *n, const char *what)
{
    skip_ws(h);
    if (h->p >= h->end)
        return hdr_fail(h, "the header ends where %s was expected", what);
    char q = *h->p;
    if (q != '\'' && q != '"')
        return hdr_fail(h, "expected %s (a quoted string), found %s", what, shown(h));
    const char *start = ++h->p;
    while (h->p < h->end && *h->p != q) {
        if (*h->p == '\\')
            return hdr_fail(h, "escape sequences are not supported in %s", what);
        if (*h->p == '\n')
            return hdr_fail(h, "%s is not closed on its line", what);
        h->p++;
    }
    if (h->p >= h->end) {
        h->p = start - 1;
        return hdr_fail(h, "%s is not closed before the header ends", what);
    }
    *s = start;
    *n = (size_t)(h->p - start);
    h->p++;
    return 0;
}

static int word_at(const hdr *h, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(h->end - h->p) < n || memcmp(h->p, w, n) != 0)
        return 0;
    const char *after = h->p + n;
    /* "Trueish" is not True. */
    return after == h->end || !((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                                (*after >= '0' && *after <= '9') || *after == '_');
}

static int parse_bool(hdr *h, int *out)
{
    skip_ws(h);
    if (word_at(h, "True")) {
        h->p += 4;
        *out = 1;
        return 0;
    }
    if (word_at(h, "False")) {
        h->p += 5;
        *out = 0;
        return 0;
    }
    return hdr_fail(h, "'fortran_order' must be True or False");
}

/* One dimension: a non-negative decimal integer that fits int64, with an
 * optional Python 2 long suffix. */
static int parse_dim(hdr *h, int index, int64_t *out)
{
    skip_ws(h);
    const char *start = h->p;
    int neg = 0;
    if (peek(h, '-')) {
        neg = 1;
        h->p++;
        skip_ws(h);
    }
    const char *digits = h->p;
    uint64_t v = 0;
    int overflow = 0;
    while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
        unsigned d = (unsigned)(*h->p - '0');
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            overflow = 1;
        else
            v = v * 10 + d;
        h->p++;
    }
    size_t ndig = (size_t)(h->p - digits);
    if (!ndig) {
        h->p = start;
        if (h->p >= h->end)
            return hdr_fail(h, "the header ends inside 'shape'");
        return hdr_fail(h, "dimension %d of 'shape' is not an integer (found %s)", index, shown(h));
    }
    int shown = ndig > 30 ? 30 : (int)ndig;
    if (neg) {
        h->p = start;
        return hdr_fail(h, "dimension %d of 'shape' is negative (-%.*s%s)", index, shown, digits,
                        ndig > 30 ? "..." : "");
    }
    if (overflow) {
        h->p = digits;
        return hdr_fail(h, "dimension %d of 'shape' (%.*s%s, %zu digits) does not fit in 64 bits",
                        index, shown, digits, ndig > 30 ? "..." : "", ndig);
    }
    if (peek(h, 'L') || peek(h, 'l'))
        h->p++;
    *out = (int64_t)v;
    return 0;
}

/* A tuple of dimensions. "()" is a scalar; a one-element tuple needs its
 * comma, as in Python: "(3)" is the integer 3, not a shape. */
static int parse_shape(hdr *h, hdr_fields *f)
{
    skip_ws(h);
    if (!peek(h, '('))
        return h->p >= h->end ? hdr_fail(h, "the header ends where the 'shape' tuple was expected")
                              : hdr_fail(h, "'shape' must be a tuple such as (2, 3), found %s", shown(h));
    h->p++;
    f->rank = 0;
    int commas = 0;
    for (;;) {
        skip_ws(h);
        if (peek(h, ')'))
            break;
        if (f->rank > commas)
            return h->p >= h->end ? hdr_fail(h, "the header ends inside 'shape'")
                                  : hdr_fail(h, "expected ',' or ')' in 'shape', found %s", shown(h));
        int64_t d = 0;
        int rc = parse_dim(h, f->rank, &d);
        if (rc < 0)
            return rc;
        if (f->rank < VRAM__MAX_RANK)
            f->dim[f->rank] = d;
        f->rank++;
        skip_ws(h);
        if (peek(h, ',')) {
            h->p++;
            commas++;
        }
    }
    if (f->rank == 1 && commas == 0)
        return hdr_fail(h, "'shape' (%lld) is an integer, not a tuple: write (%lld,)",
                        (long long)f->dim[0], (long long)f->dim[0]);
    h->p++;
    return 0;
}

/* The whole dict, and nothing but whitespace after it. */
static int parse_dict(hdr *h, hdr_fields *f)
{
    int rc = expect(h, '{', "to open the header dict");
    if (rc < 0)
        return rc;
    for (;;) {
        skip_ws(h);
        if (peek(h, '}'))
            break;
        if (h->p >= h->end)
            return hdr_fail(h, "the header ends before the dict's closing '}'");
        const char *key;
        size_t key_n;
        const char *key_at = h->p;
        if ((rc = parse_string(h, &key, &key_n, "a key")) < 0)
            return rc;
        int *seen;
        if (key_n == 5 && !memcmp(key, "descr", 5))
            seen = &f->have_descr;
        else if (key_n == 13 && !memcmp(key, "fortran_order", 13))
            seen = &f->have_fortran;
        else if (key_n == 5 && !memcmp(key, "shape", 5))
            seen = &f->have_shape;
        else {
            h->p = key_at;
            return hdr_fail(h, "unexpected key '%.*s' (a .npy header holds 'descr', "
                               "'fortran_order' and 'shape')",
                            key_n > 40 ? 40 : (int)key_n, key);
        }
        if (*seen) {
            h->p = key_at;
            return hdr_fail(h, "key '%.*s' appears twice", (int)key_n, key);
        }
        *seen = 1;
        if ((rc = expect(h, ':', "after a key")) < 0)
            return rc;
        if (seen == &f->have_descr) {
            skip_ws(h);
            if (peek(h, '['))
                return vram__fail(VRAM_ENOSYS, "structured dtypes (a list as 'descr') are not supported");
            rc = parse_string(h, &f->descr, &f->descr_len, "the 'descr' value");
        } else if (seen == &f->have_fortran) {
            rc = parse_bool(h, &f->fortran);
        } else {
            rc = parse_shape(h, f);
        }
        if (rc < 0)
            return rc;
        skip_ws(h);
        if (peek(h, ','))
            h->p++;
        else if (!peek(h, '}'))
            return h->p >= h->end ? hdr_fail(h, "the header ends before the dict's closing '}'")
                                  : hdr_fail(h, "expected ',' or '}' after a value, found %s", shown(h));
    }
    h->p++;
    skip_ws(h);
    if (h->p < h->end)
        return hdr_fail(h, "unexpected %s after the header dict", shown(h));
    if (!f->have_descr || !f->have_fortran || !f->have_shape)
        return vram__fail(VRAM_EPARSE, "the header dict lacks %s%s%s%s%s",
                          f->have_descr ? "" : "'descr'",
                          !f->have_descr && (!f->have_fortran || !f->have_shape) ? ", " : "",
                          f->have_fortran ? "" : "'fortran_order'",
                          !f->have_fortran && !f->have_shape ? ", " : "",
                          f->have_shape ? "" : "'shape'");
    return 0;
}

/* ---- reading ------------------------------------------------------------ */

/* Validate a whole .npy image and describe it: dtype and shape in *out
 * (data left NULL), the data's offset in *data_off. */
static int parse_meta(const unsigned char *b, size_t len, vram_npy *out, size_t *data_off)
{
    if (len < sizeof npy_magic || memcmp(b, npy_magic, sizeof npy_magic) != 0) {
        if (len < sizeof npy_magic && memcmp(b, npy_magic, len) == 0)
            return vram__fail(VRAM_EPARSE, "truncated: %zu bytes, shorter than the 6-byte magic", len);
        return vram__fail(VRAM_EPARSE, "not a .npy file: it does not start with \\x93NUMPY");
    }
    if (len < 8)
        return vram__fail(VRAM_EPARSE, "truncated: %zu bytes, the version bytes are missing", len);
    unsigned major = b[6], minor = b[7];
    if ((major < 1 || major > 3) || minor != 0)
        return vram__fail(VRAM_ENOSYS, "format version %u.%u is not supported (1.0, 2.0 and 3.0 are)",
                          major, minor);
    size_t pre = major == 1 ? 10 : 12;
    if (len < pre)
        return vram__fail(VRAM_EPARSE,
                          "truncated: %zu bytes, shorter than the %zu-byte preamble of a version %u.0 file",
                          len, pre, major);
    size_t hlen = major == 1 ? (size_t)b[8] | (size_t)b[9] << 8
                             : (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 |
                                   (size_t)b[11] << 24;
    if (hlen > len - pre)
        return vram__fail(VRAM_EPARSE,
                          "header of %zu bytes runs past the end of the file (%zu bytes after the "
                          "%zu-byte preamble)",
                          hlen, len - pre, pre);

    hdr h = {(const char *)b + pre, (const char *)b + pre, (const char *)b + pre + hlen};
    hdr_fields f;
    memset(&f, 0, sizeof f);
    int rc = parse_dict(&h, &f);
    if (rc < 0)
        return rc;
    const npy_type *ty = NULL;
    if ((rc = parse_descr(f.descr, f.descr_len, &ty)) < 0)
        return rc;
    if (f.fortran)
        return vram__fail(VRAM_ENOSYS, "Fortran-order (column-major) arrays are not supported: "
                                       "save it with np.ascontiguousarray()");
    if (f.rank > VRAM__MAX_RANK)
        return vram__fail(VRAM_ENOSYS, "the array has %d dimensions, at most %d are supported", f.rank,
                          VRAM__MAX_RANK);

    char shape_txt[256];
    fmt_shape(shape_txt, sizeof shape_txt, f.dim, f.rank);
    size_t need;
    if (checked_bytes(f.dim, f.rank, ty->size, &need) < 0)
        return vram__fail(VRAM_EPARSE, "shape %s of %s is too large: its size overflows 64 bits",
                          shape_txt, ty->name);
    size_t have = len - pre - hlen;
    if (have != need)
        return vram__fail(VRAM_EPARSE, "%s: shape %s of %s needs %zu data bytes, the file holds %zu",
                          have < need ? "data too short" : "trailing bytes after the data", shape_txt,
                          ty->name, need, have);
    out->dtype = ty->dtype;
    out->rank = f.rank;
    for (int i = 0; i < f.rank; i++)
        out->dims[i] = f.dim[i];
    out->nbytes = need;
    *data_off = pre + hlen;
    return 0;
}

int vram_npy_parse(const void *bytes, size_t len, const char *what, vram_npy *out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_npy_parse: out is NULL");
    memset(out, 0, sizeof *out);
    if (!what)
        what = "npy data";
    if (!bytes && len)
        return vram__fail(VRAM_EINVAL, "%s: no bytes given for a length of %zu", what, len);
    size_t off = 0;
    vram_npy meta;
    memset(&meta, 0, sizeof meta);
    int rc = parse_meta(bytes ? bytes : (const void *)"", len, &meta, &off);
    if (rc < 0)
        return vram__fail_prefix(rc, "%s: ", what);
    meta.data = vram__realloc_array(NULL, meta.nbytes ? meta.nbytes : 1, 1);
    if (!meta.data)
        return vram__fail_prefix(VRAM_EHOSTMEM, "%s: ", what);
    if (meta.nbytes)
        memcpy(meta.data, (const unsigned char *)bytes + off, meta.nbytes);
    *out = meta;
    return 0;
}

int vram_npy_read(const char *path, vram_npy *out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_npy_read: out is NULL");
    memset(out, 0, sizeof *out);
    if (!path || !*path)
        return vram__fail(VRAM_EINVAL, "vram_npy_read: no path");
    void *bytes;
    size_t n;
    int rc = vram__read_file(path, path, &bytes, &n);
    if (rc)
        return rc;
    unsigned char *buf = bytes;

    size_t off = 0;
    vram_npy meta;
    memset(&meta, 0, sizeof meta);
    rc = parse_meta(buf, n, &meta, &off);
    if (rc < 0) {
        free(buf);
        return vram__fail_prefix(rc, "%s: ", path);
    }
    /* Keep the file's buffer: slide the data to its front and trim it. */
    memmove(buf, buf + off, meta.nbytes);
    unsigned char *trimmed = realloc(buf, meta.nbytes ? meta.nbytes : 1);
    meta.data = trimmed ? trimmed : buf;
    *out = meta;
    return 0;
}

void vram_npy_free(vram_npy *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

/* ---- writing ------------------------------------------------------------ */

/* The longest header: the fixed text (under 80 bytes) and 8 dimensions of at
 * most 19 digits with their separators, padded to 64. It always fits the
 * 16-bit length of format 1.0, so the writer never needs 2.0. */
#define NPY_HEADER_CAP 512
_Static_assert(80 + VRAM__MAX_RANK * 21 + 64 < NPY_HEADER_CAP, "header buffer too small");
_Static_assert(NPY_HEADER_CAP <= 65535, "a version 1.0 header holds at most 65535 bytes");

int vram_npy_write(const char *path, int dtype, int rank, const int64_t *dims, const void *data)
{
    if (!path || !*path || (rank > 0 && !dims))
        return vram__fail(VRAM_EINVAL, "vram_npy_write: path and dims are required");
    const npy_type *ty = type_of_dtype(dtype);
    if (!ty)
        return vram__fail(VRAM_EINVAL, "cannot write %s: element type %d has no .npy form here", path,
                          dtype);
    if (rank < 0 || rank > VRAM__MAX_RANK)
        return vram__fail(VRAM_EINVAL, "cannot write %s: rank %d is outside 0..%d", path, rank,
                          VRAM__MAX_RANK);
    for (int i = 0; i < rank; i++)
        if (dims[i] < 0)
            return vram__fail(VRAM_EINVAL, "cannot write %s: dimension %d is %lld (unknown)", path, i,
                              (long long)dims[i]);
    static const int64_t no_dims[1];
    if (!dims)
        dims = no_dims;
    char shape_txt[256];
    fmt_shape(shape_txt, sizeof shape_txt, dims, rank);
    size_t nbytes;
    if (checked_bytes(dims, rank, ty->size, &nbytes) < 0)
        return vram__fail(VRAM_EINVAL, "cannot write %s: shape %s of %s overflows 64 bits", path,
                          shape_txt, ty->name);
    if (nbytes && !data)
        return vram__fail(VRAM_EINVAL, "cannot write %s: no data for %zu bytes", path, nbytes);

    /* NumPy's own layout: preamble and dict padded with spaces so the data
     * starts at a multiple of 64, the header ending in '\n'. */
    unsigned char head[NPY_HEADER_CAP];
    memcpy(head, npy_magic, sizeof npy_magic);
    head[6] = 1;
    head[7] = 0;
    int dict = snprintf((char *)head + 10, sizeof head - 10,
                        "{'descr': '%c%c%u', 'fortran_order': False, 'shape': %s, }",
                        ty->size == 1 ? '|' : '<', ty->kind, ty->size, shape_txt);
    size_t total = 10 + (size_t)dict + 1;
    size_t padded = (total + 63) / 64 * 64;
    memset(head + 10 + dict, ' ', padded - total);
    head[padded - 1] = '\n';
    size_t hlen = padded - 10;
    head[8] = (unsigned char)(hlen & 0xff);
    head[9] = (unsigned char)(hlen >> 8);

    FILE *f = fopen(path, "wb");
    if (!f)
        return vram__fail(VRAM_EIO, "cannot create %s: %s", path, strerror(errno));
    struct stat st;
    int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    int err = 0;
    errno = 0;
    if (fwrite(head, 1, padded, f) != padded || (nbytes && fwrite(data, 1, nbytes, f) != nbytes) ||
        fflush(f) != 0)
        err = errno ? errno : EIO;
    if (fclose(f) != 0 && !err)
        err = errno ? errno : EIO;
    if (err) {
        if (regular)
            remove(path);
        return vram__fail(VRAM_EIO, "cannot write %s: %s", path, strerror(err));
    }
    return 0;
}

/* ---- file names --------------------------------------------------------- */

int vram_npy_file_name(const char *name, char *out, size_t cap)
{
    if (!name || !out)
        return vram__fail(VRAM_EINVAL, "vram_npy_file_name: name and out are required");
    size_t n = strlen(name);
    size_t need = (n ? n : 1) + 1;
    if (cap < need) {
        if (cap)
            out[0] = '\0';
        return vram__fail(VRAM_EINVAL, "file name for '%.64s%s' needs %zu bytes, the buffer holds %zu",
                          name, n > 64 ? "..." : "", need, cap);
    }
    if (!n) {
        memcpy(out, "_", 2);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '.' || c == '-' || c == '_';
        out[i] = keep ? c : '_';
    }
    out[n] = '\0';
    if (!strcmp(out, ".") || !strcmp(out, ".."))
        out[0] = '_';
    return 0;
}
