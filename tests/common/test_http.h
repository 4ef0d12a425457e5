/* tests/common/test_http.h - a plain HTTP/1.1 client for the tests that
 * drive a server over a socket on loopback: connect with a timeout, send
 * a request (Connection: close) and read the whole answer, its status,
 * body and headers. Each program includes it once; the functions are its
 * own (static). */
#ifndef VRAM_TEST_HTTP_H
#define VRAM_TEST_HTTP_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static __attribute__((unused)) int connect_to(unsigned port, double timeout_s)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = (time_t)timeout_s,
                         .tv_usec = (suseconds_t)((timeout_s - (double)(time_t)timeout_s) * 1e6)};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static __attribute__((unused)) int send_all(int fd, const char *d, size_t n)
{
    while (n) {
        ssize_t k = send(fd, d, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        d += k;
        n -= (size_t)k;
    }
    return 0;
}

typedef struct resp {
    int status;     /* 0: no status line came back (closed, or timed out) */
    int timed_out;  /* the read timed out rather than reaching the end */
    char *raw;      /* everything read, NUL-terminated */
    size_t len;
    const char *body;
    size_t body_len;
} resp;

/* Read until the server closes (every request says Connection: close). */
static __attribute__((unused)) void read_resp(int fd, resp *r)
{
    memset(r, 0, sizeof *r);
    size_t cap = 8192;
    r->raw = malloc(cap);
    for (;;) {
        if (r->len + 4096 + 1 > cap)
            r->raw = realloc(r->raw, cap *= 2);
        ssize_t k = recv(fd, r->raw + r->len, 4096, 0);
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            r->timed_out = 1;
        if (k <= 0)
            break;
        r->len += (size_t)k;
    }
    r->raw[r->len] = '\0';
    if (sscanf(r->raw, "HTTP/1.%*d %d", &r->status) != 1)
        r->status = 0;
    const char *sep = strstr(r->raw, "\r\n\r\n");
    r->body = sep ? sep + 4 : r->raw + r->len;
    r->body_len = (size_t)(r->raw + r->len - r->body);
}

static __attribute__((unused)) resp raw_request(unsigned port, const char *req, size_t len)
{
    resp r;
    int fd = connect_to(port, 20);
    if (fd < 0) {
        memset(&r, 0, sizeof r);
        r.raw = calloc(1, 1);
        r.body = r.raw;
        return r;
    }
    send_all(fd, req, len); /* the server may close before taking it all */
    shutdown(fd, SHUT_WR);
    read_resp(fd, &r);
    close(fd);
    return r;
}

static __attribute__((unused)) resp request(unsigned port, const char *method, const char *path)
{
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", method, path);
    return raw_request(port, req, (size_t)n);
}

/* The value of header `name` in r (a static copy), or NULL. */
static __attribute__((unused)) const char *header(const resp *r, const char *name)
{
    static char value[512];
    size_t n = strlen(name);
    for (const char *l = strstr(r->raw, "\r\n"); l && l < r->body; l = strstr(l + 2, "\r\n")) {
        const char *h = l + 2;
        if (strncasecmp(h, name, n) == 0 && h[n] == ':') {
            h += n + 1;
            while (*h == ' ')
                h++;
            const char *end = strstr(h, "\r\n");
            snprintf(value, sizeof value, "%.*s", (int)(end - h), h);
            return value;
        }
    }
    return NULL;
}

static __attribute__((unused)) void resp_free(resp *r) { free(r->raw); }

#endif
