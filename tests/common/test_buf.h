/* tests/common/test_buf.h - a growing text buffer for the tests and fuzzers
 * that collect what a vram_write_fn writer (configuration, snapshots,
 * metrics, reports) produces: test_buf_write appends and keeps the text
 * NUL-terminated, test_buf_free releases it. */
#ifndef VRAM_TESTS_TEST_BUF_H
#define VRAM_TESTS_TEST_BUF_H

#include <stddef.h>

typedef struct test_buf {
    char *data; /* NUL-terminated once anything was written; NULL before */
    size_t len, cap;
} test_buf;

/* A vram_write_fn: appends `len` bytes to the test_buf `buf`. Returns 0, or
 * VRAM_EHOSTMEM (nothing appended) when memory runs out. */
int test_buf_write(void *buf, const char *data, size_t len);

/* Frees the text and empties the buffer for reuse. */
void test_buf_free(test_buf *b);

#endif
