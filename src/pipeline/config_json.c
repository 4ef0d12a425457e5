/* src/pipeline/config_json.c - the stream file and the control API's JSON:
 * one stream object (id, url, realtime, loop, budget, frames) and the
 * file's service settings around a list of them, read with cJSON and
 * checked member by member, so that every refusal names the member, the
 * stream and the reason. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "service_internal.h"

typedef struct config_impl {
    vram_service_config pub; /* first: the public pointer is this */
    char **strings;
    size_t n_strings;
} config_impl;

int vram_stream_opts_init(vram_stream_opts *o)
{
    if (!o)
        return vram__fail(VRAM_EINVAL, "vram_stream_opts_init: opts is NULL");
    *o = (vram_stream_opts){.size = sizeof *o};
    return 0;
}

static int bad(const char *where, const char *member, const char *why)
{
    return vram__fail(VRAM_EPARSE, "%s%s\"%s\": %s", where, *where ? " " : "", member, why);
}

static int get_bool(const cJSON *v, const char *where, const char *member, int *out)
{
    if (!cJSON_IsBool(v))
        return bad(where, member, "must be true or false");
    *out = cJSON_IsTrue(v);
    return 0;
}

/* A whole number within [lo, hi]. */
static int get_uint(const cJSON *v, const char *where, const char *member, double lo, double hi,
                    uint64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi) {
        char why[96];
        snprintf(why, sizeof why, "must be a whole number from %.0f to %.0f", lo, hi);
        return bad(where, member, why);
    }
    *out = (uint64_t)v->valuedouble;
    return 0;
}

/* Bytes, or a string with a unit ("64M"). */
static int get_size(const cJSON *v, const char *where, const char *member, uint64_t *out)
{
    if (cJSON_IsString(v)) {
        if (vram__parse_size(v->valuestring, out)) {
            char why[300];
            snprintf(why, sizeof why, "\"%.200s\" is not a size (bytes, or 64M, 1.5G)",
                     v->valuestring);
            return bad(where, member, why);
        }
        return 0;
    }
    return get_uint(v, where, member, 0, 9007199254740992.0, out);
}

static int get_string(const cJSON *v, const char *where, const char *member, size_t max,
                      const char **out)
{
    if (!cJSON_IsString(v) || !*v->valuestring)
        return bad(where, member, "must be a non-empty string");
    if (strlen(v->valuestring) > max) {
        char why[64];
        snprintf(why, sizeof why, "is longer than %zu bytes", max);
        return bad(where, member, why);
    }
    *out = v->valuestring;
    return 0;
}

/* A stream object into *o; its strings point into the cJSON tree. */
static int parse_stream(const cJSON *obj, const char *where, vram_stream_opts *o)
{
    if (!cJSON_IsObject(obj))
        return vram__fail(VRAM_EPARSE, "%s%sis not a JSON object", where, *where ? " " : "");
    vram_stream_opts_init(o);
    int rc = 0;
    for (const cJSON *m = obj->child; m && !rc; m = m->next) {
        const char *k = m->string;
        uint64_t u = 0;
        if (!strcmp(k, "id")) {
            rc = get_string(m, where, k, 63, &o->id);
            for (const char *c = o->id; !rc && *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.'))
                    rc = bad(where, k, "may hold only letters, digits, '-', '_' and '.'");
        } else if (!strcmp(k, "url")) {
            rc = get_string(m, where, k, 255, &o->url);
        } else if (!strcmp(k, "realtime")) {
            rc = get_bool(m, where, k, &o->realtime);
        } else if (!strcmp(k, "loop")) {
            rc = get_bool(m, where, k, &o->loop);
        } else if (!strcmp(k, "budget")) {
            rc = get_size(m, where, k, &o->budget);
        } else if (!strcmp(k, "frames")) {
            rc = get_uint(m, where, k, 0, 1e15, &u);
            o->max_frames = u;
        } else {
            rc = bad(where, k, "is not a stream setting (id, url, realtime, loop, budget, "
                               "frames)");
        }
    }
    if (!rc && !o->url)
        rc = vram__fail(VRAM_EPARSE, "%s%sneeds a \"url\"", where, *where ? " " : "");
    return rc;
}

static cJSON *parse_text(const char *text, size_t len, const char *what)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        vram__fail(VRAM_EPARSE, "%s is not valid JSON (at byte %zu of %zu)", what, at, len);
    }
    return root;
}

int vram_stream_opts_parse(const char *text, size_t len, vram_stream_opts *opts, char *strings,
                           size_t cap)
{
    if (!text || !opts || !strings)
        return vram__fail(VRAM_EINVAL, "vram_stream_opts_parse: NULL argument");
    cJSON *root = parse_text(text, len, "the stream");
    if (!root)
        return VRAM_EPARSE;
    int rc = parse_stream(root, "", opts);
    size_t need = 0;
    if (!rc)
        need = (opts->id ? strlen(opts->id) + 1 : 0) + strlen(opts->url) + 1;
    if (!rc && need > cap)
        rc = vram__fail(VRAM_EPARSE, "the stream's id and url take %zu bytes, more than %zu",
                        need, cap);
    if (!rc) {
        char *p = strings;
        if (opts->id) {
            strcpy(p, opts->id);
            opts->id = p;
            p += strlen(p) + 1;
        }
        strcpy(p, opts->url);
        opts->url = p;
    }
    cJSON_Delete(root);
    return rc;
}

static const char *keep(config_impl *c, const char *s, int *rc)
{
    if (!s || *rc)
        return s;
    char **a = realloc(c->strings, (c->n_strings + 1) * sizeof *a);
    char *d = strdup(s);
    if (a)
        c->strings = a;
    if (!a || !d) {
        free(d);
        *rc = VRAM_EHOSTMEM;
        return NULL;
    }
    c->strings[c->n_strings++] = d;
    return d;
}

/* The service settings of the file's top level. */
static int parse_service_member(config_impl *c, const cJSON *m, int *realtime, int *loop)
{
    vram_service_opts *s = &c->pub.service;
    const char *k = m->string;
    uint64_t u = 0;
    int rc = 0;
    const char *str;
    if (!strcmp(k, "model")) {
        if (!(rc = get_string(m, "", k, 4096, &str)))
            s->model = keep(c, str, &rc);
        c->pub.service_set |= VRAM_CONFIG_MODEL;
    } else if (!strcmp(k, "backend")) {
        if (!(rc = get_string(m, "", k, 16, &str)) && strcmp(str, "cpu") && strcmp(str, "cuda"))
            rc = bad("", k, "must be \"cpu\" or \"cuda\"");
        if (!rc)
            s->executor = keep(c, str, &rc);
        c->pub.service_set |= VRAM_CONFIG_BACKEND;
    } else if (!strcmp(k, "workers")) {
        rc = get_uint(m, "", k, 1, 64, &u);
        s->workers = (unsigned)u;
        c->pub.service_set |= VRAM_CONFIG_WORKERS;
    } else if (!strcmp(k, "batch")) {
        rc = get_uint(m, "", k, 1, VRAM__BATCH_MAX, &u);
        s->batch = (unsigned)u;
        c->pub.service_set |= VRAM_CONFIG_BATCH;
    } else if (!strcmp(k, "budget")) {
        rc = get_size(m, "", k, &s->budget);
        c->pub.service_set |= VRAM_CONFIG_BUDGET;
    } else if (!strcmp(k, "stream_budget")) {
        rc = get_size(m, "", k, &s->stream_budget);
    } else if (!strcmp(k, "queue")) {
        rc = get_uint(m, "", k, 1, 1024, &u);
        s->queue_frames = (uint32_t)u;
    } else if (!strcmp(k, "decoder_threads")) {
        rc = get_uint(m, "", k, 1, 64, &u);
        s->decoder_threads = (int)u;
    } else if (!strcmp(k, "decode")) {
        vram_decode d = VRAM_DECODE_CPU;
        if (!(rc = get_string(m, "", k, 16, &str)) && vram_decode_parse(str, &d))
            rc = bad("", k, "must be \"cpu\", \"nvdec\" or \"auto\"");
        s->decode = d;
    } else if (!strcmp(k, "surfaces")) {
        rc = get_uint(m, "", k, 0, 32, &u);
        s->extra_surfaces = (uint32_t)u;
    } else if (!strcmp(k, "graphs")) {
        rc = get_bool(m, "", k, &s->graphs);
    } else if (!strcmp(k, "in_flight")) {
        rc = get_uint(m, "", k, 1, 64, &u);
        s->stream_in_flight = (uint32_t)u;
    } else if (!strcmp(k, "frames")) {
        rc = get_uint(m, "", k, 0, 1e15, &s->max_frames);
    } else if (!strcmp(k, "realtime")) {
        rc = get_bool(m, "", k, realtime);
    } else if (!strcmp(k, "loop")) {
        rc = get_bool(m, "", k, loop);
    } else if (!strcmp(k, "jsonl")) {
        if (!(rc = get_string(m, "", k, 4096, &str)))
            s->jsonl_path = keep(c, str, &rc);
        c->pub.service_set |= VRAM_CONFIG_JSONL;
    } else if (!strcmp(k, "snapshots")) {
        if (!(rc = get_string(m, "", k, 4096, &str)))
            s->snapshots_dir = keep(c, str, &rc);
        c->pub.service_set |= VRAM_CONFIG_SNAPSHOTS;
    } else if (!strcmp(k, "every")) {
        if (!cJSON_IsNumber(m) || !(m->valuedouble > 0) || m->valuedouble > 86400)
            rc = bad("", k, "must be a number of seconds above 0 and at most 86400");
        else
            s->snapshot_every_s = m->valuedouble;
    } else if (strcmp(k, "streams")) {
        rc = bad("", k, "is not a setting of the stream file (model, backend, workers, batch, "
                        "budget, stream_budget, queue, in_flight, decoder_threads, decode, "
                        "surfaces, graphs, frames, realtime, loop, jsonl, snapshots, every, "
                        "streams)");
    }
    return rc;
}

static int parse_config(config_impl *c, const cJSON *root)
{
    if (!cJSON_IsObject(root))
        return vram__fail(VRAM_EPARSE, "the stream file is not a JSON object");
    int realtime = 0, loop = 0, rc = 0;
    const cJSON *streams = NULL;
    for (const cJSON *m = root->child; m && !rc; m = m->next) {
        if (!strcmp(m->string, "streams"))
            streams = m;
        rc = parse_service_member(c, m, &realtime, &loop);
    }
    if (rc || !streams)
        return rc;
    if (!cJSON_IsArray(streams))
        return bad("", "streams", "must be an array of stream objects");
    size_t n = (size_t)cJSON_GetArraySize(streams);
    if (n > VRAM__STREAMS_MAX)
        return vram__fail(VRAM_EPARSE, "the stream file lists %zu streams; at most %u", n,
                          VRAM__STREAMS_MAX);
    c->pub.streams = n ? vram__calloc(n, sizeof *c->pub.streams) : NULL;
    if (n && !c->pub.streams)
        return VRAM_EHOSTMEM;
    size_t i = 0;
    for (const cJSON *s = streams->child; s && !rc; s = s->next, i++) {
        char where[48];
        snprintf(where, sizeof where, "stream %zu:", i);
        vram_stream_opts *o = &c->pub.streams[i];
        if (cJSON_IsObject(s)) {
            /* The file's pacing unless the stream says. */
            rc = parse_stream(s, where, o);
            if (!rc && !cJSON_GetObjectItemCaseSensitive(s, "realtime"))
                o->realtime = realtime;
            if (!rc && !cJSON_GetObjectItemCaseSensitive(s, "loop"))
                o->loop = loop;
        } else {
            rc = parse_stream(s, where, o);
        }
        if (!rc) {
            o->id = keep(c, o->id, &rc);
            o->url = keep(c, o->url, &rc);
        }
        for (size_t j = 0; !rc && o->id && j < i; j++)
            if (c->pub.streams[j].id && !strcmp(c->pub.streams[j].id, o->id))
                rc = vram__fail(VRAM_EPARSE, "%s the id \"%s\" is stream %zu's too", where,
                                o->id, j);
        c->pub.n_streams = i + 1;
    }
    return rc;
}

int vram_service_config_parse(const char *text, size_t len, vram_service_config **out)
{
    if (!out)
        return vram__fail(VRAM_EINVAL, "vram_service_config_parse: out is NULL");
    *out = NULL;
    if (!text)
        return vram__fail(VRAM_EINVAL, "vram_service_config_parse: text is NULL");
    config_impl *c = vram__calloc(1, sizeof *c);
    if (!c)
        return VRAM_EHOSTMEM;
    vram_service_opts_init(&c->pub.service);
    cJSON *root = parse_text(text, len, "the stream file");
    int rc = root ? parse_config(c, root) : VRAM_EPARSE;
    cJSON_Delete(root);
    if (rc) {
        vram__saved_error e;
        vram__error_save(&e);
        vram_service_config_free(&c->pub);
        return vram__error_restore(&e, rc);
    }
    *out = &c->pub;
    return 0;
}

void vram_service_config_free(vram_service_config *config)
{
    if (!config)
        return;
    config_impl *c = (config_impl *)config;
    for (size_t i = 0; i < c->n_strings; i++)
        free(c->strings[i]);
    free(c->strings);
    free(c->pub.streams);
    free(c);
}
