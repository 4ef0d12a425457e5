/* src/observe/http_internal.h - what the metrics server (http.c) and its
 * routes and added families (http_routes.c) share: queuing a reply, and
 * the tables of routes and families writers with the requests that use
 * them. */
#ifndef VRAM_OBSERVE_HTTP_INTERNAL_H
#define VRAM_OBSERVE_HTTP_INTERNAL_H

#include <stddef.h>

#include <microhttpd.h>

#include "base/internal.h"
#include "vramkit/metrics.h"

/* ---- replies ---- */

/* Queue a response with `body` (len bytes) of content type `type`. With
 * `owned` the body is a malloc'd buffer the response takes (freed also on
 * failure); otherwise it is copied. `allow`, when set, becomes the Allow
 * header. MHD_NO closes the connection. */
enum MHD_Result vram__http_reply(struct MHD_Connection *c, unsigned status, const char *type,
                                 char *body, size_t len, int owned, const char *allow);

/* A formatted text/plain reply (at most 1199 bytes). */
enum MHD_Result vram__http_reply_text(struct MHD_Connection *c, unsigned status, const char *fmt,
                                      ...) VRAM__PRINTF(3, 4);

/* {"error": msg} as application/json. */
enum MHD_Result vram__http_reply_json_error(struct MHD_Connection *c, unsigned status,
                                            const char *msg);

/* ---- routes and families ---- */

typedef struct vram__http_hooks vram__http_hooks;

/* An empty set of routes and families; NULL with VRAM_EHOSTMEM recorded. */
vram__http_hooks *vram__http_hooks_create(void);

/* Free the set and every entry left; no request may run any more (the
 * daemon is stopped). NULL is accepted. */
void vram__http_hooks_destroy(vram__http_hooks *h);

/* The server's set (http.c). */
vram__http_hooks *vram__metrics_hooks(vram_metrics *m);

/* Whether a route answers `path` now. */
int vram__http_routed(vram__http_hooks *h, const char *path);

/* One call of libmicrohttpd's access handler for a request to a routed
 * path (*req NULL on its first call: the request is taken then) or a
 * request taken before (*req as the previous call left it): the body is
 * gathered up to max_body bytes, then the route's handler answers.
 * Whatever *req holds is freed by vram__http_request_free. */
enum MHD_Result vram__http_serve_route(vram__http_hooks *h, size_t max_body,
                                       struct MHD_Connection *c, const char *url,
                                       const char *method, const char *upload,
                                       size_t *upload_size, void **req);

/* Free the state vram__http_serve_route left in *req (NULL accepted). */
void vram__http_request_free(void *req);

/* Every families writer's text, in the order they were added, through
 * `write`; 0 or the first error (its sentence recorded). */
int vram__http_write_families(vram__http_hooks *h, vram_write_fn write, void *ctx);

/* Run every health check: how many fail, their sentences joined into why
 * (cap bytes, at least 1). */
int vram__http_health(vram__http_hooks *h, char *why, size_t cap);

#endif
