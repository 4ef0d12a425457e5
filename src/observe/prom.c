/* src/observe/prom.c - the Prometheus text writer (format 0.0.4): families
 * whose HELP and TYPE lines wait for their first sample, labelled samples,
 * the escaping of help text and label values, integer and floating-point
 * values (NaN, +Inf, -Inf). Shared by the exposition (metrics.c) and the
 * monitor (monitor.c); see prom.h. */
#include "prom.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the writer ---- */

void vram__prom_put(vram__prom *p, const char *s, size_t n)
{
    if (!p->rc && n)
        p->rc = p->write(p->ctx, s, n);
}

void vram__prom_put_str(vram__prom *p, const char *s) { vram__prom_put(p, s, strlen(s)); }

void vram__prom_putf(vram__prom *p, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0)
        vram__prom_put(p, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
}

void vram__prom_put_escaped(vram__prom *p, const char *s, int quote)
{
    const char *run = s;
    for (; *s; s++) {
        const char *rep = *s == '\\' ? "\\\\" : *s == '\n' ? "\\n" : quote && *s == '"' ? "\\\"" : NULL;
        if (!rep)
            continue;
        vram__prom_put(p, run, (size_t)(s - run));
        vram__prom_put_str(p, rep);
        run = s + 1;
    }
    vram__prom_put(p, run, (size_t)(s - run));
}

void vram__prom_comment(vram__prom *p, const char *prefix, const char *text)
{
    vram__prom_put_str(p, prefix);
    for (const char *s = text; *s; s++)
        vram__prom_put(p, *s == '\n' || *s == '\r' ? " " : s, 1);
    vram__prom_put_str(p, "\n");
}

void vram__prom_family(vram__prom *p, const char *name, const char *type, const char *help)
{
    p->fam_name = name;
    p->fam_type = type;
    p->fam_help = help;
}

static void family_lines(vram__prom *p)
{
    if (!p->fam_name)
        return;
    vram__prom_putf(p, "# HELP %s ", p->fam_name);
    vram__prom_put_escaped(p, p->fam_help, 0);
    vram__prom_putf(p, "\n# TYPE %s %s\n", p->fam_name, p->fam_type);
    p->fam_name = NULL;
}

const char *vram__prom_type_of(const char *name)
{
    size_t n = strlen(name);
    return n > 6 && strcmp(name + n - 6, "_total") == 0 ? "counter" : "gauge";
}

void vram__prom_sample_start(vram__prom *p, const char *name, const vram__prom_label *labels, int n)
{
    family_lines(p);
    vram__prom_put_str(p, name);
    for (int i = 0; i < n; i++) {
        vram__prom_putf(p, "%s%s=\"", i ? "," : "{", labels[i].key);
        vram__prom_put_escaped(p, labels[i].value, 1);
        vram__prom_put_str(p, "\"");
    }
    vram__prom_put_str(p, n ? "} " : " ");
}

void vram__prom_sample_u64(vram__prom *p, const char *name, const vram__prom_label *labels, int n,
                           uint64_t v)
{
    vram__prom_sample_start(p, name, labels, n);
    vram__prom_putf(p, "%llu\n", (unsigned long long)v);
}

void vram__prom_value_f64(vram__prom *p, double v, vram__prom_f64_fmt fmt)
{
    if (isnan(v)) {
        vram__prom_put_str(p, "NaN\n");
        return;
    }
    if (isinf(v)) {
        vram__prom_put_str(p, v > 0 ? "+Inf\n" : "-Inf\n");
        return;
    }
    char buf[400]; /* %.9f of the largest double: 309 digits and 10 more */
    if (fmt == VRAM__PROM_F9) {
        snprintf(buf, sizeof buf, "%.9f", v);
    } else {
        snprintf(buf, sizeof buf, "%.15g", v);
        if (fmt == VRAM__PROM_G17 || strtod(buf, NULL) != v)
            snprintf(buf, sizeof buf, "%.17g", v);
    }
    vram__prom_put_str(p, buf);
    vram__prom_put_str(p, "\n");
}

void vram__prom_sample_f64(vram__prom *p, const char *name, const vram__prom_label *labels, int n,
                           double v)
{
    vram__prom_sample_start(p, name, labels, n);
    vram__prom_value_f64(p, v, VRAM__PROM_SHORTEST);
}
