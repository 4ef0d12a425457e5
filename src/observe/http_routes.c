/* src/observe/http_routes.c - what a library built on the metrics server
 * adds to it: paths of its own (the route table, and the requests it
 * answers: their bodies gathered up to the server's limit, the handler's
 * answer checked and queued), families of its own written after the
 * server's on /metrics, and the escaping of a label value for them.
 *
 * Each table holds at most 16 entries, each allocated on its own and kept
 * in the order added, under one mutex. A request takes the entries it uses
 * under the mutex (counting the calls running on each) and calls them
 * without it. Removing an entry takes it out of its table at once, so that
 * no new call starts, then waits on a condition variable until its count
 * of running calls is zero: its ctx is the caller's again. A thread-local
 * pointer names the entry running on the thread, so that an entry removing
 * itself is refused rather than waiting for ever.
 *
 * A routed request is looked up twice: when its header arrives (to read
 * its body rather than refuse it), and once its body is complete, when the
 * route is taken for the handler's call. A route removed in between
 * answers 404, and a client slow to send its body holds no route. A body
 * declared larger than the limit is refused before it is read; one sent
 * in chunks that grows past it is dropped from there on and refused at its
 * end. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"
#include "prom.h"
#include "vramkit/log.h"

enum { HTTP_CONTENT_TOO_LARGE = 413, PREFIX_MAX = 127 };

typedef struct hook {
    uint32_t id;
    unsigned running; /* calls in flight (under the set's lock) */
    void *ctx;
    /* A route: its handler and prefix. */
    vram_metrics_route_fn route;
    char prefix[PREFIX_MAX + 1];
    size_t prefix_len;
    /* A families writer. */
    vram_metrics_families_fn families;
    /* A health check. */
    vram_metrics_health_fn health;
} hook;

struct vram__http_hooks {
    pthread_mutex_t lock;
    pthread_cond_t idle; /* some entry's running count fell to zero */
    uint32_t last_id;    /* routes and families share the ids */
    hook *routes[VRAM_METRICS_ROUTES_MAX];
    size_t n_routes;
    hook *families[VRAM_METRICS_FAMILIES_MAX];
    size_t n_families;
    hook *health[VRAM_METRICS_HEALTH_MAX];
    size_t n_health;
};

/* The tables, by what their entries are. */
enum { ROUTES, FAMILIES, HEALTH };
static const char *const kind_names[] = {"route", "families writer", "health check"};

/* The entry whose handler or writer runs on this thread, if one does. */
static _Thread_local const hook *running_here;

vram__http_hooks *vram__http_hooks_create(void)
{
    vram__http_hooks *h = vram__calloc(1, sizeof *h);
    if (!h)
        return NULL;
    pthread_mutex_init(&h->lock, NULL);
    pthread_cond_init(&h->idle, NULL);
    return h;
}

void vram__http_hooks_destroy(vram__http_hooks *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->n_routes; i++)
        free(h->routes[i]);
    for (size_t i = 0; i < h->n_families; i++)
        free(h->families[i]);
    for (size_t i = 0; i < h->n_health; i++)
        free(h->health[i]);
    pthread_cond_destroy(&h->idle);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

/* ---- the tables ---- */

/* `path` (n bytes) is `prefix` (pn bytes) or lies under it. */
static int at_or_under(const char *path, size_t n, const char *prefix, size_t pn)
{
    return n >= pn && memcmp(path, prefix, pn) == 0 && (n == pn || path[pn] == '/');
}

static const char *const own_paths[] = {"/metrics", "/snapshot", "/healthz"};

static int check_prefix(const char *prefix)
{
    size_t n = strlen(prefix);
    if (prefix[0] != '/')
        return vram__fail(VRAM_EINVAL, "metrics server: route prefix \"%.200s\" does not start "
                                       "with '/'", prefix);
    if (n == 1)
        return vram__fail(VRAM_EINVAL, "metrics server: route prefix \"/\" is the server's own "
                                       "index; a route takes a path such as \"/streams\"");
    if (n > PREFIX_MAX)
        return vram__fail(VRAM_EINVAL, "metrics server: route prefix \"%.60s...\" is %zu bytes "
                                       "long; at most %d", prefix, n, PREFIX_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)prefix[i];
        if (ch <= ' ' || ch == 0x7f || ch == '?' || ch == '#' || ch == '%')
            return vram__fail(VRAM_EINVAL, "metrics server: route prefix \"%s\" has %s at byte %zu "
                              "(a prefix is a decoded path: no '?', '#', '%%', space or control "
                              "character)", prefix, ch == ' ' ? "a space" : ch < ' ' || ch == 0x7f
                              ? "a control character" : "a reserved character", i);
        if (ch == '/' && (i + 1 == n || prefix[i + 1] == '/'))
            return vram__fail(VRAM_EINVAL, "metrics server: route prefix \"%s\" has %s", prefix,
                              i + 1 == n ? "a final slash (\"/a\", not \"/a/\")"
                                         : "an empty segment (\"//\")");
    }
    for (size_t i = 0; i < VRAM__ARRAY_LEN(own_paths); i++)
        if (at_or_under(prefix, n, own_paths[i], strlen(own_paths[i])))
            return vram__fail(VRAM_EINVAL, "metrics server: route prefix \"%s\" %s the server's "
                              "own path %s", prefix,
                              n == strlen(own_paths[i]) ? "is" : "lies under", own_paths[i]);
    return 0;
}

static uint32_t next_id(vram__http_hooks *h)
{
    if (!++h->last_id) /* after 2^32 entries; the first ones are long gone */
        ++h->last_id;
    return h->last_id;
}

/* Take entry i of `table` out and wait until none of its calls runs; the
 * lock is held, and waited on. */
static hook *take_out(vram__http_hooks *h, hook **table, size_t *n, size_t i)
{
    hook *e = table[i];
    memmove(&table[i], &table[i + 1], (*n - i - 1) * sizeof *table);
    (*n)--;
    while (e->running)
        pthread_cond_wait(&h->idle, &h->lock);
    return e;
}

/* The table of `kind`, its count and its most entries. */
static hook **table_of(vram__http_hooks *h, int kind, size_t **n, size_t *max)
{
    switch (kind) {
    case ROUTES:
        *n = &h->n_routes;
        *max = VRAM__ARRAY_LEN(h->routes);
        return h->routes;
    case FAMILIES:
        *n = &h->n_families;
        *max = VRAM__ARRAY_LEN(h->families);
        return h->families;
    default:
        *n = &h->n_health;
        *max = VRAM__ARRAY_LEN(h->health);
        return h->health;
    }
}

static int remove_hook(vram_metrics *m, uint32_t id, int kind, const char *fn)
{
    if (!m)
        return vram__fail(VRAM_EINVAL, "%s: server is NULL", fn);
    vram__http_hooks *h = vram__metrics_hooks(m);
    size_t *n, max;
    hook **table = table_of(h, kind, &n, &max);
    const char *what = kind_names[kind];
    pthread_mutex_lock(&h->lock);
    size_t i = 0;
    while (i < *n && table[i]->id != id)
        i++;
    if (i == *n) {
        pthread_mutex_unlock(&h->lock);
        return vram__fail(VRAM_EINVAL, "%s: %u is no %s of this server (removed already?)", fn, id,
                          what);
    }
    if (table[i] == running_here) {
        pthread_mutex_unlock(&h->lock);
        return vram__fail(VRAM_EBUSY, "%s: %s %u is running on this thread: removing it from its "
                          "own call would wait for itself", fn, what, id);
    }
    hook *e = take_out(h, table, n, i);
    pthread_mutex_unlock(&h->lock);
    free(e);
    return 0;
}

/* One call of e ends. */
static void release(vram__http_hooks *h, hook *const *e, size_t n)
{
    int idle = 0;
    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < n; i++)
        idle |= --e[i]->running == 0;
    if (idle)
        pthread_cond_broadcast(&h->idle);
    pthread_mutex_unlock(&h->lock);
}

/* The route answering `path`, taken (released by release()), or NULL. At
 * most one matches: prefixes do not nest. */
static hook *find_route(vram__http_hooks *h, const char *path, int take)
{
    size_t n = strlen(path);
    hook *found = NULL;
    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < h->n_routes && !found; i++)
        if (at_or_under(path, n, h->routes[i]->prefix, h->routes[i]->prefix_len))
            found = h->routes[i];
    if (found && take)
        found->running++;
    pthread_mutex_unlock(&h->lock);
    return found;
}

int vram__http_routed(vram__http_hooks *h, const char *path)
{
    return find_route(h, path, 0) != NULL;
}

int vram_metrics_route(vram_metrics *m, const char *prefix, vram_metrics_route_fn fn, void *ctx,
                       uint32_t *id)
{
    if (id)
        *id = 0;
    if (!m || !prefix || !fn || !id)
        return vram__fail(VRAM_EINVAL,
                          "vram_metrics_route: server, prefix, fn and id are required");
    int rc = check_prefix(prefix);
    if (rc)
        return rc;
    hook *e = vram__calloc(1, sizeof *e);
    if (!e)
        return VRAM_EHOSTMEM;
    e->route = fn;
    e->ctx = ctx;
    e->prefix_len = strlen(prefix);
    memcpy(e->prefix, prefix, e->prefix_len + 1);
    vram__http_hooks *h = vram__metrics_hooks(m);
    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < h->n_routes && !rc; i++) {
        const hook *r = h->routes[i];
        if (r->prefix_len == e->prefix_len && strcmp(r->prefix, prefix) == 0)
            rc = vram__fail(VRAM_EINVAL, "metrics server: route prefix \"%s\" is routed already "
                                         "(route %u)", prefix, r->id);
        else if (at_or_under(prefix, e->prefix_len, r->prefix, r->prefix_len) ||
                 at_or_under(r->prefix, r->prefix_len, prefix, e->prefix_len))
            rc = vram__fail(VRAM_EINVAL, "metrics server: route prefix \"%s\" overlaps \"%s\" of "
                            "route %u (one path, one route: prefixes do not nest)", prefix,
                            r->prefix, r->id);
    }
    if (!rc && h->n_routes == VRAM_METRICS_ROUTES_MAX)
        rc = vram__fail(VRAM_ELIMIT, "metrics server: %d routes already (VRAM_METRICS_ROUTES_MAX); "
                        "cannot route \"%s\"", VRAM_METRICS_ROUTES_MAX, prefix);
    if (!rc) {
        e->id = *id = next_id(h);
        h->routes[h->n_routes++] = e;
    }
    pthread_mutex_unlock(&h->lock);
    if (rc)
        free(e);
    return rc;
}

int vram_metrics_unroute(vram_metrics *m, uint32_t id)
{
    return remove_hook(m, id, ROUTES, "vram_metrics_unroute");
}

/* Add a copy of `tmpl` (its function and ctx set) to the end of the table
 * of `kind`; `fn` names the caller in the sentence. */
static int add_listed(vram_metrics *m, int kind, const hook *tmpl, int has_fn, uint32_t *id,
                      const char *fn)
{
    if (id)
        *id = 0;
    if (!m || !has_fn || !id)
        return vram__fail(VRAM_EINVAL, "%s: server, fn and id are required", fn);
    hook *e = vram__calloc(1, sizeof *e);
    if (!e)
        return VRAM_EHOSTMEM;
    *e = *tmpl;
    vram__http_hooks *h = vram__metrics_hooks(m);
    size_t *n, max;
    hook **table = table_of(h, kind, &n, &max);
    int rc = 0;
    pthread_mutex_lock(&h->lock);
    if (*n == max)
        rc = vram__fail(VRAM_ELIMIT, "metrics server: %zu %ss already (the most one server takes)",
                        max, kind_names[kind]);
    else {
        e->id = *id = next_id(h);
        table[(*n)++] = e;
    }
    pthread_mutex_unlock(&h->lock);
    if (rc)
        free(e);
    return rc;
}

int vram_metrics_add_families(vram_metrics *m, vram_metrics_families_fn fn, void *ctx,
                              uint32_t *id)
{
    hook t = {.families = fn, .ctx = ctx};
    return add_listed(m, FAMILIES, &t, fn != NULL, id, "vram_metrics_add_families");
}

int vram_metrics_add_health(vram_metrics *m, vram_metrics_health_fn fn, void *ctx, uint32_t *id)
{
    hook t = {.health = fn, .ctx = ctx};
    return add_listed(m, HEALTH, &t, fn != NULL, id, "vram_metrics_add_health");
}

int vram_metrics_remove_health(vram_metrics *m, uint32_t id)
{
    return remove_hook(m, id, HEALTH, "vram_metrics_remove_health");
}

int vram_metrics_remove_families(vram_metrics *m, uint32_t id)
{
    return remove_hook(m, id, FAMILIES, "vram_metrics_remove_families");
}

/* ---- the families ---- */

int vram__http_write_families(vram__http_hooks *h, vram_write_fn write, void *ctx)
{
    hook *taken[VRAM_METRICS_FAMILIES_MAX];
    pthread_mutex_lock(&h->lock);
    size_t n = h->n_families;
    for (size_t i = 0; i < n; i++) {
        taken[i] = h->families[i];
        taken[i]->running++;
    }
    pthread_mutex_unlock(&h->lock);
    int rc = 0;
    const hook *outer = running_here;
    for (size_t i = 0; i < n && !rc; i++) {
        vram_clear_error();
        running_here = taken[i];
        rc = taken[i]->families(taken[i]->ctx, write, ctx);
        running_here = outer;
        if (rc) {
            rc = rc < 0 ? rc : VRAM_EIO;
            if (!vram_last_error()[0])
                vram__fail(rc, "families writer %u failed with %s (%s) and said no more",
                           taken[i]->id, vram_err_name(rc), vram_strerror(rc));
        }
    }
    if (n)
        release(h, taken, n);
    return rc;
}

/* ---- health ---- */

int vram__http_health(vram__http_hooks *h, char *why, size_t cap)
{
    hook *taken[VRAM_METRICS_HEALTH_MAX];
    pthread_mutex_lock(&h->lock);
    size_t n = h->n_health;
    for (size_t i = 0; i < n; i++) {
        taken[i] = h->health[i];
        taken[i]->running++;
    }
    pthread_mutex_unlock(&h->lock);
    int failing = 0;
    size_t used = 0;
    why[0] = '\0';
    const hook *outer = running_here;
    for (size_t i = 0; i < n; i++) {
        char one[512] = "";
        running_here = taken[i];
        int bad = taken[i]->health(taken[i]->ctx, one, sizeof one) != 0;
        running_here = outer;
        if (!bad)
            continue;
        failing++;
        int w = snprintf(why + used, cap - used, "%s%s", used ? "; " : "",
                         one[0] ? one : "a check failed and said nothing");
        if (w > 0)
            used = used + (size_t)w < cap ? used + (size_t)w : cap - 1;
    }
    if (n)
        release(h, taken, n);
    return failing;
}

int vram_metrics_write_label_value(vram_write_fn write, void *ctx, const char *value)
{
    if (!write || !value)
        return vram__fail(VRAM_EINVAL, "vram_metrics_write_label_value: write and value are "
                                       "required");
    vram__prom p = {.write = write, .ctx = ctx};
    vram__prom_put_escaped(&p, value, 1);
    return p.rc;
}

/* ---- routed requests ---- */

/* What a routed request keeps between libmicrohttpd's calls. */
typedef struct route_req {
    char *body; /* NUL-terminated once anything came */
    size_t len, cap;
    int over;   /* the body passed the limit: the rest is dropped, 413 answered */
    int no_mem; /* the buffer could not grow: the rest is dropped, 500 answered */
    size_t dropped; /* bytes of body dropped */
    unsigned long long declared; /* the Content-Length, if there was one */
} route_req;

void vram__http_request_free(void *req)
{
    route_req *r = req;
    if (r)
        free(r->body);
    free(r);
}

static enum MHD_Result too_large(struct MHD_Connection *c, const route_req *r, const char *method,
                                 const char *url, size_t max_body)
{
    char msg[600];
    if (r->declared > max_body)
        snprintf(msg, sizeof msg, "%.16s %.200s: a body of %llu bytes is over the server's limit "
                 "of %zu (max_body_bytes)", method, url, r->declared, max_body);
    else
        snprintf(msg, sizeof msg, "%.16s %.200s: the body is over the server's limit of %zu bytes "
                 "(max_body_bytes)", method, url, max_body);
    return vram__http_reply_json_error(c, HTTP_CONTENT_TOO_LARGE, msg);
}

/* Take `n` more bytes of the body, within max_body. */
static void gather(route_req *r, const char *data, size_t n, size_t max_body)
{
    if (r->over || r->no_mem)
        return;
    if (n > max_body - r->len) {
        r->over = 1;
    } else if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        if (cap > max_body + 1)
            cap = max_body + 1;
        char *b = realloc(r->body, cap);
        if (!b) {
            r->no_mem = 1;
        } else {
            r->body = b;
            r->cap = cap;
        }
    }
    if (r->over || r->no_mem) {
        free(r->body);
        r->body = NULL;
        r->len = r->cap = 0;
        return;
    }
    memcpy(r->body + r->len, data, n);
    r->len += n;
    r->body[r->len] = '\0';
}

static const char *req_arg(const vram_http_request *q, const char *key)
{
    return q && key ? MHD_lookup_connection_value(q->internal, MHD_GET_ARGUMENT_KIND, key) : NULL;
}

static const char *req_header(const vram_http_request *q, const char *name)
{
    return q && name ? MHD_lookup_connection_value(q->internal, MHD_HEADER_KIND, name) : NULL;
}

/* A header value that would break the response's header. */
static int bad_header_value(const char *v)
{
    for (; v && *v; v++)
        if ((unsigned char)*v < ' ' || *v == 0x7f)
            return 1;
    return 0;
}

/* Queue what the handler of route e answered (rc, a). */
static enum MHD_Result answer(struct MHD_Connection *c, const hook *e, const char *method,
                              const char *url, int rc, vram_http_response *a)
{
    char msg[1200];
    msg[0] = '\0';
    if (rc)
        snprintf(msg, sizeof msg, "%s", vram_last_error()[0] ? vram_last_error() : "");
    if (rc && !msg[0])
        snprintf(msg, sizeof msg, "%.16s %.200s: the handler of route %s failed with %s (%s) and "
                 "said no more", method, url, e->prefix, vram_err_name(rc), vram_strerror(rc));
    else if (!rc && (a->status < 200 || a->status > 599))
        snprintf(msg, sizeof msg, "%.16s %.200s: the handler of route %s answered status %u, not "
                 "one a response may have (200..599)", method, url, e->prefix, a->status);
    else if (!rc && a->body_len && !a->body)
        snprintf(msg, sizeof msg, "%.16s %.200s: the handler of route %s answered %zu bytes of "
                 "body but no body", method, url, e->prefix, a->body_len);
    else if (!rc && (bad_header_value(a->content_type) || bad_header_value(a->allow)))
        snprintf(msg, sizeof msg, "%.16s %.200s: the handler of route %s answered a %s header with "
                 "a control character", method, url, e->prefix,
                 bad_header_value(a->allow) ? "Allow" : "Content-Type");
    if (msg[0]) {
        free(a->body);
        vram_log(VRAM_LOG_WARN, "metrics server: %s", msg);
        return vram__http_reply_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, msg);
    }
    const char *type = a->content_type ? a->content_type : "application/json";
    if (!a->body)
        return vram__http_reply(c, a->status, type, (char *)"", 0, 0, a->allow);
    size_t len = a->body_len ? a->body_len : strlen(a->body);
    return vram__http_reply(c, a->status, type, a->body, len, 1, a->allow);
}

enum MHD_Result vram__http_serve_route(vram__http_hooks *h, size_t max_body,
                                       struct MHD_Connection *c, const char *url,
                                       const char *method, const char *upload,
                                       size_t *upload_size, void **req)
{
    route_req *r = *req;
    if (!r) {
        /* The header only: refuse a declared body over the limit before it
         * comes (libmicrohttpd then closes the connection unread). */
        if (!(r = calloc(1, sizeof *r)))
            return vram__http_reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                         "metrics server: out of host memory for a request\n");
        *req = r;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            r->declared = strtoull(cl, &end, 10);
            if (r->declared > max_body) {
                r->over = 1;
                return too_large(c, r, method, url, max_body);
            }
        }
        return MHD_YES;
    }
    if (*upload_size) {
        gather(r, upload, *upload_size, max_body);
        if (r->over || r->no_mem)
            r->dropped += *upload_size;
        *upload_size = 0;
        /* libmicrohttpd takes no answer before the request ends, so the
         * rest of a body too large is read and dropped; a client that goes
         * on sending past 16 times the limit is cut off unanswered. */
        if (r->dropped / 16 > max_body) {
            vram_log(VRAM_LOG_DEBUG, "metrics server: %.16s %.200s: more than %zu bytes of body "
                     "past the limit; the connection is closed", method, url, 16 * max_body);
            return MHD_NO;
        }
        return MHD_YES;
    }
    /* The whole request is in. */
    if (r->over)
        return too_large(c, r, method, url, max_body);
    if (r->no_mem)
        return vram__http_reply_json_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                           "metrics server: out of host memory for a request body");
    hook *e = find_route(h, url, 1);
    if (!e)
        return vram__http_reply_text(c, MHD_HTTP_NOT_FOUND, "no page %.200s: / lists them\n", url);
    vram_http_request q = {.method = method,
                           .path = url,
                           .arg = req_arg,
                           .header = req_header,
                           .body = r->body ? r->body : "",
                           .body_len = r->len,
                           .internal = c};
    vram_http_response a = {.status = MHD_HTTP_OK};
    vram_clear_error();
    const hook *outer = running_here;
    running_here = e;
    int rc = e->route(e->ctx, &q, &a);
    running_here = outer;
    /* The answer is read while the route is held: its strings may be ctx's. */
    enum MHD_Result ret = answer(c, e, method, url, rc, &a);
    release(h, &e, 1);
    return ret;
}
