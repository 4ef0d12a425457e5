/* tests/common/test_host.h - what the video tests share: a shell command
 * formatted like printf (sh), and a host pool on its own host backend
 * (host_pool_make). Each program includes it once; the functions are its
 * own (static). */
#ifndef VRAM_TEST_HOST_H
#define VRAM_TEST_HOST_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "vramkit.h"

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
static int sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    return system(cmd);
}

/* A pool of `capacity` bytes of host memory, with no listeners: 0, or -1
 * (the error is vram_last_error()). */
static int host_pool_make(uint64_t capacity, vram_backend **backend, vram_pool **pool)
    __attribute__((unused));
static int host_pool_make(uint64_t capacity, vram_backend **backend, vram_pool **pool)
{
    if (vram_backend_create("host", &(vram_backend_opts){.capacity = capacity}, backend))
        return -1;
    vram_pool_opts o;
    vram_pool_opts_init(&o);
    o.backend = *backend;
    o.configured_listeners = 0;
    return vram_pool_create(&o, pool) ? -1 : 0;
}

#endif
