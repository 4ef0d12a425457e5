/* tests/fuzz/fuzz_service_config.c - libFuzzer target for the service's
 * JSON readers: the stream file (vram_service_config_parse) and one stream
 * object, the body of POST /streams (vram_stream_opts_parse). Any bytes must
 * give 0 or VRAM_EPARSE (with a sentence), never a crash or a leak; what is
 * accepted must keep the contract of vramkit/service.h, checked here: every
 * stream has a URL of at most 255 bytes, ids are unique, of allowed
 * characters and at most 63 bytes, and settings are in their ranges. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vramkit/error.h"
#include "vramkit/service.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_stream(const vram_stream_opts *o)
{
    if (!o->url || !*o->url || strlen(o->url) > 255)
        abort();
    if (o->id) {
        size_t n = strlen(o->id);
        if (!n || n > 63)
            abort();
        for (const char *c = o->id; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                  *c == '-' || *c == '_' || *c == '.'))
                abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    vram_service_config *c = NULL;
    int rc = vram_service_config_parse(text, size, &c);
    if (rc) {
        if (c || (rc != VRAM_EPARSE && rc != VRAM_EHOSTMEM) || !vram_last_error()[0])
            abort();
    } else {
        if (!c || c->n_streams > 1024)
            abort();
        const vram_service_opts *s = &c->service;
        if (s->workers > 64 || s->batch > 256 || s->queue_frames > 1024)
            abort();
        for (size_t i = 0; i < c->n_streams; i++) {
            check_stream(&c->streams[i]);
            for (size_t j = 0; j < i; j++)
                if (c->streams[i].id && c->streams[j].id &&
                    !strcmp(c->streams[i].id, c->streams[j].id))
                    abort();
        }
        vram_service_config_free(c);
    }
    vram_stream_opts o;
    char strings[320];
    rc = vram_stream_opts_parse(text, size, &o, strings, sizeof strings);
    if (rc) {
        if (rc != VRAM_EPARSE && rc != VRAM_EHOSTMEM)
            abort();
    } else {
        check_stream(&o);
        if (o.url < strings || o.url >= strings + sizeof strings)
            abort();
    }
    return 0;
}
