/* src/core/base/config.c - the option table: defaults, VRAM_<NAME> environment
 * variables, programmatic overrides, and printing every value with its source. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "json_out.h"
#include "vramkit/log.h"
#include "vramkit/config.h"

typedef enum { T_SIZE, T_DOUBLE, T_STRING, T_CHOICE } opt_type;

typedef struct opt_desc {
    const char *name; /* upper case, as in the environment without VRAM_ */
    opt_type type;
    const char *def;
    const char *choices; /* "a|b|c" for T_CHOICE */
    const char *help;
    size_t offset;
} opt_desc;

#define OPT_DESC(NAME, field, TYPE, def, choices, help)                        \
    {#NAME, T_##TYPE, def, choices, help, offsetof(vram_config, field)},
static const opt_desc descs[] = {VRAM_OPTIONS(OPT_DESC)};
#undef OPT_DESC

#define N_OPTS VRAM__ARRAY_LEN(descs)

static vram_config config;
static vram_config_source sources[N_OPTS];
/* STRING values: every value an option has held stays allocated for the
 * process's life (a few bytes per vram_config_set), so that a pointer read
 * from the configuration, or copied from it by an *_opts_init, never
 * dangles when the option is set again. */
typedef struct kept_string {
    struct kept_string *next;
    char text[];
} kept_string;
static kept_string *kept;
/* Setting, resetting and printing take this lock: texts[] and sources[]
 * change under it. */
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static char *texts[N_OPTS];   /* the text each value was read from */
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_status;
static char load_message[1024];

static int choice_index(const opt_desc *d, const char *value, int *out)
{
    const char *p = d->choices;
    int idx = 0;
    size_t n = strlen(value);
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncasecmp(p, value, n) == 0) {
            *out = idx;
            return 0;
        }
        idx++;
        p += len + (bar ? 1 : 0);
    }
    return vram__fail(VRAM_EINVAL, "\"%s\" is not one of %s", value, d->choices);
}

static int find(const char *name, size_t *out);

int vram__config_choice_name(const char *name, int index, char *buf, size_t cap)
{
    size_t i = 0;
    int rc = find(name, &i);
    if (rc)
        return rc;
    const char *p = descs[i].choices;
    for (int k = 0; p && *p; k++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (k == index) {
            if (len >= cap)
                break;
            memcpy(buf, p, len);
            buf[len] = 0;
            return 0;
        }
        p += len + (bar ? 1 : 0);
    }
    return vram__fail(VRAM_EINVAL, "option %s has no choice %d", name, index);
}

/* Parse `text` for option `i` and store it; nothing changes on error. */
static int apply(size_t i, const char *text, vram_config_source src)
{
    const opt_desc *d = &descs[i];
    char *slot = (char *)&config + d->offset;
    switch (d->type) {
    case T_SIZE: {
        uint64_t v;
        int rc = vram__parse_size(text, &v);
        if (rc)
            return rc;
        memcpy(slot, &v, sizeof v);
        break;
    }
    case T_DOUBLE: {
        char *end = NULL;
        errno = 0;
        double v = strtod(text, &end);
        if (end == text || *end || errno || !isfinite(v) || v < 0)
            return vram__fail(VRAM_EINVAL, "\"%s\" is not a non-negative number", text);
        memcpy(slot, &v, sizeof v);
        break;
    }
    case T_STRING: {
        size_t n = strlen(text) + 1;
        kept_string *k = malloc(sizeof *k + n);
        if (!k)
            return vram__fail(VRAM_EHOSTMEM, "out of host memory storing option %s", d->name);
        memcpy(k->text, text, n);
        k->next = kept;
        kept = k;
        const char *v = k->text;
        memcpy(slot, &v, sizeof v);
        break;
    }
    case T_CHOICE: {
        int v = 0;
        int rc = choice_index(d, text, &v);
        if (rc)
            return rc;
        memcpy(slot, &v, sizeof v);
        break;
    }
    }
    char *t = vram__strdup(text);
    if (t) {
        free(texts[i]);
        texts[i] = t;
    }
    sources[i] = src;
    return 0;
}

static int from_environment(size_t i);

static const char *env_value(size_t i)
{
    char var[64];
    snprintf(var, sizeof var, "VRAM_%s", descs[i].name);
    const char *v = getenv(var);
    return v ? v : "";
}

static void load_locked(void)
{
    config.size = sizeof config;
    load_status = 0;
    load_message[0] = '\0';
    for (size_t i = 0; i < N_OPTS; i++) {
        int rc = from_environment(i);
        if (rc && !load_status) {
            load_status = rc;
            snprintf(load_message, sizeof load_message, "VRAM_%s=%s: %s (keeping the default %s)",
                     descs[i].name, env_value(i), vram_last_error(), descs[i].def);
        }
    }
}

static void load(void)
{
    pthread_mutex_lock(&set_lock);
    load_locked();
    pthread_mutex_unlock(&set_lock);
}

int vram_config_load(void)
{
    pthread_once(&load_once, load);
    if (load_status)
        return vram__fail(load_status, "%s", load_message);
    return 0;
}

const vram_config *vram_config_get(void)
{
    pthread_once(&load_once, load);
    return &config;
}

static int find(const char *name, size_t *out)
{
    for (size_t i = 0; i < N_OPTS; i++) {
        if (strcasecmp(descs[i].name, name) == 0) {
            *out = i;
            return 0;
        }
    }
    return vram__fail(VRAM_EINVAL, "unknown option \"%s\" (vramkit config lists them)", name);
}

/* The index of option `name` for the public call `fn` (loading the
 * environment first); `arg`, the call's other argument named `arg_name`, must
 * not be NULL either. */
static int option_index(const char *fn, const char *name, const void *arg, const char *arg_name,
                        size_t *out)
{
    pthread_once(&load_once, load);
    if (!name || !arg)
        return vram__fail(VRAM_EINVAL, "%s: name and %s are required", fn, arg_name);
    return find(name, out);
}

int vram_config_source_of(const char *name, vram_config_source *out)
{
    size_t i = 0;
    int rc = option_index("vram_config_source_of", name, out, "out", &i);
    if (rc)
        return rc;
    pthread_mutex_lock(&set_lock);
    *out = sources[i];
    pthread_mutex_unlock(&set_lock);
    return 0;
}

/* Option i from its variable, or its default when the variable is unset or
 * malformed; 0, or the variable's error (the default is kept then). */
static int from_environment(size_t i)
{
    char var[64];
    snprintf(var, sizeof var, "VRAM_%s", descs[i].name);
    const char *v = getenv(var);
    int rc = apply(i, descs[i].def, VRAM_CONFIG_DEFAULT);
    if (rc) /* a default that does not parse is a bug in the table */
        abort();
    return v ? apply(i, v, VRAM_CONFIG_ENV) : 0;
}

int vram_config_set(const char *name, const char *value)
{
    size_t i = 0;
    pthread_once(&load_once, load);
    if (!name)
        return vram__fail(VRAM_EINVAL, "vram_config_set: name is required");
    int rc = find(name, &i);
    if (rc)
        return rc;
    pthread_mutex_lock(&set_lock);
    if (!value) /* forget the override */
        from_environment(i);
    else
        rc = apply(i, value, VRAM_CONFIG_SET);
    pthread_mutex_unlock(&set_lock);
    if (rc)
        return vram__fail_prefix(rc, "option %s: ", descs[i].name);
    return 0;
}

void vram_config_reset(void)
{
    pthread_once(&load_once, load);
    load();
}



static const char *source_name(vram_config_source s)
{
    return s == VRAM_CONFIG_ENV ? "environment" : s == VRAM_CONFIG_SET ? "set" : "default";
}

static int print_json(vram_buffer *b)
{
    vram__json j;
    vram__json_begin(&j, b);
    vram__json_object(&j, NULL);
    for (size_t i = 0; i < N_OPTS; i++) {
        char var[64];
        snprintf(var, sizeof var, "VRAM_%s", descs[i].name);
        vram__json_object(&j, descs[i].name);
        vram__json_str(&j, "value", texts[i] ? texts[i] : "");
        vram__json_str(&j, "source", source_name(sources[i]));
        vram__json_str(&j, "env", var);
        vram__json_str(&j, "help", descs[i].help);
        vram__json_end(&j);
    }
    vram__json_end(&j);
    int rc = vram__json_done(&j);
    return rc ? rc : vram_write_buffer(b, "\n", 1);
}

static int buf_printf(vram_buffer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int buf_printf(vram_buffer *b, const char *fmt, ...)
{
    char *line = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&line, fmt, ap);
    va_end(ap);
    if (n < 0)
        return vram__fail(VRAM_EHOSTMEM, "out of host memory printing options");
    int rc = vram_write_buffer(b, line, (size_t)n);
    free(line);
    return rc;
}

static int print_locked(vram_buffer *b, unsigned flags)
{
    if (flags & VRAM_PRINT_JSON)
        return print_json(b);
    int rc = buf_printf(b, "%-22s %-12s %-12s %s\n", "option", "value", "source", "meaning");
    for (size_t i = 0; i < N_OPTS && !rc; i++) {
        const char *val = texts[i] && *texts[i] ? texts[i] : "\"\"";
        const char *choices = descs[i].type == T_CHOICE ? descs[i].choices : NULL;
        rc = buf_printf(b, "VRAM_%-17s %-12s %-12s %s%s%s%s\n", descs[i].name, val,
                        source_name(sources[i]), descs[i].help, choices ? " (" : "",
                        choices ? choices : "", choices ? ")" : "");
    }
    return rc;
}

/* The table is written into a buffer under the lock and through `write`
 * after it, so that a slow writer holds up no vram_config_set. */
int vram_config_print(vram_write_fn write, void *ctx, unsigned flags)
{
    pthread_once(&load_once, load);
    if (!write || (flags & ~VRAM_PRINT_JSON))
        return vram__fail(VRAM_EINVAL, "vram_config_print: a writer and known flags (0x%x) are "
                                       "required", flags);
    vram_buffer b = {0};
    pthread_mutex_lock(&set_lock);
    int rc = print_locked(&b, flags);
    pthread_mutex_unlock(&set_lock);
    if (!rc)
        rc = write(ctx, b.data ? b.data : "", b.len);
    vram_buffer_free(&b);
    return rc;
}
