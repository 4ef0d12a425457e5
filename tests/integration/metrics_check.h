/* tests/integration/metrics_check.h - what the metrics tests share: a strict
 * reader of the Prometheus text exposition (every family has exactly one HELP
 * and one TYPE line, before its samples, and its samples form one group;
 * every line parses), looking a series up, and `promtool check metrics` (a
 * missing promtool fails the test: scripts/deps.sh installs it), and a pool
 * on a simulated device to expose. Header-only: static functions for one test
 * program each (included after cmocka.h and vramkit.h). */
#ifndef VRAM_TEST_METRICS_CHECK_H
#define VRAM_TEST_METRICS_CHECK_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


#define CHECK_MAX_FAMILIES 512

typedef struct family_seen {
    char name[128];
    char type[16];
    int help, type_lines, samples, closed;
} family_seen;

typedef struct exposition {
    family_seen fam[CHECK_MAX_FAMILIES];
    int n;
    int samples;
} exposition;

static family_seen *find_family(exposition *x, const char *name)
{
    for (int i = 0; i < x->n; i++)
        if (strcmp(x->fam[i].name, name) == 0)
            return &x->fam[i];
    return NULL;
}

static family_seen *add_family(exposition *x, const char *name)
{
    family_seen *f = find_family(x, name);
    if (f)
        return f;
    if (x->n == CHECK_MAX_FAMILIES)
        fail_msg("more than %d families", CHECK_MAX_FAMILIES);
    f = &x->fam[x->n++];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    return f;
}

static size_t metric_name_len(const char *s)
{
    size_t n = 0;
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
        return 0;
    while (isalnum((unsigned char)s[n]) || s[n] == '_' || s[n] == ':')
        n++;
    return n;
}

/* Parse and check the whole text; *x gets the families. */
static void check_exposition(const char *text, exposition *x)
{
    memset(x, 0, sizeof *x);
    family_seen *current = NULL;
    int line_no = 0;
    if (!*text)
        return;
    if (text[strlen(text) - 1] != '\n')
        fail_msg("the exposition does not end with a newline");
    for (const char *l = text; *l;) {
        const char *end = strchr(l, '\n');
        size_t len = (size_t)(end - l);
        char line[4096];
        line_no++;
        if (len >= sizeof line) {
            fail_msg("line %d is %zu bytes long", line_no, len);
            len = sizeof line - 1;
        }
        memcpy(line, l, len);
        line[len] = '\0';
        l = end + 1;
        if (!len)
            fail_msg("line %d is empty", line_no);
        if (strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0) {
            const char *name = line + 7;
            size_t n = metric_name_len(name);
            if (!n || name[n] != ' ')
                fail_msg("line %d: bad metric name: %s", line_no, line);
            char nm[128];
            snprintf(nm, sizeof nm, "%.*s", (int)n, name);
            family_seen *f = add_family(x, nm);
            if (f->closed || f->samples)
                fail_msg("line %d: %s line of family %s after its samples", line_no, line[2] == 'H' ? "HELP" : "TYPE", nm);
            if (current && current != f)
                current->closed = 1;
            current = f;
            if (line[2] == 'H') {
                if (f->help++)
                    fail_msg("line %d: second HELP for %s", line_no, nm);
                if (f->type_lines)
                    fail_msg("line %d: HELP after TYPE for %s", line_no, nm);
            } else {
                if (f->type_lines++)
                    fail_msg("line %d: second TYPE for %s", line_no, nm);
                snprintf(f->type, sizeof f->type, "%s", name + n + 1);
                if (strcmp(f->type, "counter") && strcmp(f->type, "gauge"))
                    fail_msg("line %d: unexpected type %s", line_no, f->type);
                size_t nl = strlen(nm);
                int total = nl > 6 && strcmp(nm + nl - 6, "_total") == 0;
                if (total != (strcmp(f->type, "counter") == 0))
                    fail_msg("line %d: %s is a %s", line_no, nm, f->type);
            }
            continue;
        }
        if (line[0] == '#')
            continue; /* a comment */
        size_t n = metric_name_len(line);
        if (!n)
            fail_msg("line %d does not start with a metric name: %s", line_no, line);
        char nm[128];
        snprintf(nm, sizeof nm, "%.*s", (int)n, line);
        family_seen *f = find_family(x, nm);
        if (!f || !f->help || !f->type_lines)
            fail_msg("line %d: sample of %s without HELP and TYPE before it", line_no, nm);
        if (f->closed || (current && current != f))
            fail_msg("line %d: samples of %s are not in one group", line_no, nm);
        f->samples++;
        x->samples++;
        const char *p = line + n;
        if (*p == '{') {
            p++;
            while (*p != '}') {
                size_t k = metric_name_len(p);
                if (!k || p[k] != '=' || p[k + 1] != '"')
                    fail_msg("line %d: bad label at \"%s\"", line_no, p);
                p += k + 2;
                while (*p && *p != '"') {
                    if (*p == '\\') {
                        if (p[1] != '\\' && p[1] != '"' && p[1] != 'n')
                            fail_msg("line %d: bad escape \\%c", line_no, p[1]);
                        p++;
                    }
                    p++;
                }
                if (*p != '"')
                    fail_msg("line %d: unterminated label value", line_no);
                p++;
                if (*p == ',')
                    p++;
                else if (*p != '}')
                    fail_msg("line %d: expected , or } at \"%s\"", line_no, p);
            }
            p++;
        }
        if (*p != ' ')
            fail_msg("line %d: no space before the value: %s", line_no, line);
        p++;
        char *vend;
        if (strcmp(p, "NaN") && strcmp(p, "+Inf") && strcmp(p, "-Inf")) {
            strtod(p, &vend);
            if (vend == p || *vend)
                fail_msg("line %d: bad value \"%s\"", line_no, p);
        }
    }
    for (int i = 0; i < x->n; i++)
        if (!x->fam[i].help || !x->fam[i].type_lines)
            fail_msg("family %s lacks HELP or TYPE", x->fam[i].name);
}

/* The value of the series written exactly as `series` (name{labels}), or
 * NAN when it is absent. */
static double series_value(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *l = text; *l;) {
        const char *end = strchr(l, '\n');
        if (!end)
            break;
        if ((size_t)(end - l) > n && strncmp(l, series, n) == 0 && l[n] == ' ')
            return strtod(l + n + 1, NULL);
        l = end + 1;
    }
    return NAN;
}

/* Run promtool check metrics on `text`; fails the test (with promtool's
 * words) unless it accepts it. */
static void promtool_check(const char *text)
{
    if (system("command -v promtool >/dev/null 2>&1") != 0)
        fail_msg("promtool not found: scripts/deps.sh installs it (Debian package prometheus)");
    char path[] = "/tmp/vram-metrics-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    size_t len = strlen(text);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "promtool check metrics < %s 2>&1", path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[4096];
    size_t got = fread(out, 1, sizeof out - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    unlink(path);
    if (st != 0)
        fail_msg("promtool check metrics refused the exposition (status %d): %s", st, out);
}

/* A pool named `name` on a new simulated device of `capacity` bytes, without
 * a trace (the caller destroys both). */
static vram_pool *sim_pool(const char *name, uint64_t capacity, vram_backend **backend)
{
    vram_backend_opts bo = {.capacity = capacity};
    assert_int_equal(vram_backend_create("sim", &bo, backend), 0);
    vram_pool_opts o;
    assert_int_equal(vram_pool_opts_init(&o), 0);
    o.name = name;
    o.backend = *backend;
    o.configured_listeners = 0;
    vram_pool *p;
    assert_int_equal(vram_pool_create(&o, &p), 0);
    return p;
}

#endif
