/* tests/common/test_buf.c - the growing text buffer of test_buf.h. */
#include "test_buf.h"

#include <stdlib.h>
#include <string.h>

#include "vramkit/error.h"

int test_buf_write(void *buf, const char *data, size_t len)
{
    test_buf *b = buf;
    if (b->len + len + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + len + 1)
            cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p)
            return VRAM_EHOSTMEM;
        b->data = p;
        b->cap = cap;
    }
    memcpy(b->data + b->len, data, len);
    b->len += len;
    b->data[b->len] = '\0';
    return 0;
}

void test_buf_free(test_buf *b)
{
    free(b->data);
    *b = (test_buf){0};
}
