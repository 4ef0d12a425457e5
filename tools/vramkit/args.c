/* tools/vramkit/args.c - parsing a command's options from its table, its
 * help, and the suggestions for misspelt flags and values (args.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "vramkit.h"

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "vramkit %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (vramkit %s --help)\n", cmd);
    return 2;
}

/* Levenshtein distance, for words of up to 63 characters (longer: far). */
static int distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 63 || m > 63)
        return 99;
    int row[64];
    for (size_t j = 0; j <= m; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            if (up + 1 < best)
                best = up + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[m];
}

const char *cli_closest(const char *word, const char *const *words, int n)
{
    const char *best = NULL;
    int best_d = 99;
    for (int i = 0; i < n; i++) {
        int d = distance(word, words[i]);
        if (d < best_d) {
            best_d = d;
            best = words[i];
        }
    }
    size_t len = strlen(word);
    int limit = len < 6 ? 1 : 2;
    /* A prefix of a longer flag is a likely abbreviation too. */
    for (int i = 0; best_d > limit && i < n; i++)
        if (len >= 4 && strncmp(words[i], word, len) == 0)
            return words[i];
    return best_d <= limit ? best : NULL;
}

static const char *suggestion(const char *word, const cli_spec *s)
{
    const char *names[128];
    int n = 0;
    names[n++] = "--help";
    for (const cli_opt *o = s->opts; o && o->name && n < 127; o++)
        names[n++] = o->name;
    return cli_closest(word, names, n);
}

static void print_help(const cli_spec *s)
{
    printf("usage: vramkit %s [options]%s%s\n\n%s", s->cmd, s->synopsis && *s->synopsis ? " " : "",
           s->synopsis ? s->synopsis : "", s->about ? s->about : "");
    printf("\noptions:\n");
    for (const cli_opt *o = s->opts; o && o->name; o++) {
        char left[96];
        const char *value = o->value;
        if (o->kind == CLI_CHOICE && !value)
            value = o->choices;
        snprintf(left, sizeof left, "%s%s%s%s%s", o->alias ? o->alias : "", o->alias ? ", " : "",
                 o->name, value ? " " : "", value ? value : "");
        if (strlen(left) > 28)
            printf("  %s\n  %-28s %s\n", left, "", o->help);
        else
            printf("  %-28s %s\n", left, o->help);
    }
    printf("  %-28s %s\n", "-h, --help", "this help");
}

static int is_flag_name(const cli_opt *o, const char *arg, size_t n)
{
    return (strlen(o->name) == n && !strncmp(o->name, arg, n)) ||
           (o->alias && strlen(o->alias) == n && !strncmp(o->alias, arg, n));
}

/* One value into its destination, or a usage error naming the flag. */
static int take_value(const cli_spec *s, const cli_opt *o, const char *v)
{
    const char *cmd = s->cmd;
    switch (o->kind) {
    case CLI_FLAG:
        break;
    case CLI_STRING:
        if (!*v)
            return cli_usage_error(cmd, "%s needs a value", o->name);
        *(const char **)o->dest = v;
        return 0;
    case CLI_LIST: {
        cli_list *l = o->dest;
        const char **items = realloc(l->items, (size_t)(l->n + 1) * sizeof *items);
        if (!items)
            return cli_usage_error(cmd, "%s: out of host memory", o->name);
        l->items = items;
        l->items[l->n++] = v;
        return 0;
    }
    case CLI_CHOICE: {
        const char *names[32];
        char buf[256];
        snprintf(buf, sizeof buf, "%s", o->choices);
        int n = 0;
        for (char *save = NULL, *t = strtok_r(buf, "|", &save); t && n < 32;
             t = strtok_r(NULL, "|", &save)) {
            if (!strcmp(t, v)) {
                *(const char **)o->dest = v;
                return 0;
            }
            names[n++] = t;
        }
        const char *close = cli_closest(v, names, n);
        return cli_usage_error(cmd, "%s: \"%s\" is not one of %s%s%s%s", o->name, v, o->choices,
                               close ? " (did you mean " : "", close ? close : "",
                               close ? "?)" : "");
    }
    case CLI_SIZE:
    case CLI_POW2: {
        uint64_t x;
        if (vram_size_parse(v, &x))
            return cli_usage_error(cmd, "%s: %s", o->name, vram_last_error());
        if (o->kind == CLI_POW2 && (x & (x - 1)))
            return cli_usage_error(cmd, "%s: %s is not a power of two", o->name, v);
        if ((double)x < o->lo || (o->hi > 0 && (double)x > o->hi)) {
            char lo[32], hi[32];
            vram_size_format(lo, sizeof lo, (uint64_t)o->lo);
            vram_size_format(hi, sizeof hi, (uint64_t)o->hi);
            if (o->hi > 0)
                return cli_usage_error(cmd, "%s: %s is outside %s .. %s", o->name, v, lo, hi);
            return cli_usage_error(cmd, "%s: %s is less than %s", o->name, v, lo);
        }
        *(uint64_t *)o->dest = x;
        return 0;
    }
    case CLI_UINT: {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (!*v || *v == '-' || *v == '+' || *end || errno)
            return cli_usage_error(cmd, "%s: \"%s\" is not a whole number", o->name, v);
        if ((double)x < o->lo || (o->hi > 0 && (double)x > o->hi))
            return cli_usage_error(cmd, "%s: %s is outside %.0f .. %.0f", o->name, v, o->lo,
                                   o->hi);
        *(uint64_t *)o->dest = x;
        return 0;
    }
    case CLI_NUMBER: {
        char *end;
        errno = 0;
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x))
            return cli_usage_error(cmd, "%s: \"%s\" is not a number", o->name, v);
        if (x < o->lo || (o->hi > 0 && x > o->hi))
            return cli_usage_error(cmd, "%s: %s is outside %g .. %g", o->name, v, o->lo, o->hi);
        *(double *)o->dest = x;
        return 0;
    }
    }
    return 0;
}

int cli_parse(const cli_spec *s, int argc, char **argv, const char ***args, int *n)
{
    *n = 0;
    *args = calloc((size_t)argc + 1, sizeof **args);
    if (!*args)
        return cli_usage_error(s->cmd, "out of host memory");
    int only_args = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (only_args || a[0] != '-' || !a[1]) {
            (*args)[(*n)++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            only_args = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            print_help(s);
            free(*args);
            *args = NULL;
            return CLI_HELP;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_opt *o = s->opts;
        while (o && o->name && !is_flag_name(o, a, len))
            o++;
        if (!o || !o->name) {
            char flag[128];
            snprintf(flag, sizeof flag, "%.*s", (int)(len < 100 ? len : 100), a);
            const char *close = suggestion(flag, s);
            free(*args);
            *args = NULL;
            if (close)
                return cli_usage_error(s->cmd, "unknown option %s (did you mean %s?)", flag,
                                       close);
            return cli_usage_error(s->cmd, "unknown option %s", flag);
        }
        int rc;
        if (o->kind == CLI_FLAG) {
            rc = eq ? cli_usage_error(s->cmd, "%s takes no value", o->name) : 0;
            if (!rc)
                *(int *)o->dest = 1;
        } else {
            const char *v = eq ? eq + 1 : NULL;
            if (!v && i + 1 < argc)
                v = argv[++i];
            rc = v ? take_value(s, o, v) : cli_usage_error(s->cmd, "%s needs a value (%s)",
                                                           o->name, o->value ? o->value : "");
        }
        if (rc) {
            free(*args);
            *args = NULL;
            return rc;
        }
        if (o->given)
            *o->given = 1;
    }
    if (*n < s->min_args || (s->max_args >= 0 && *n > s->max_args)) {
        int have = *n, rc;
        const char *extra = have > s->max_args ? (*args)[s->max_args] : NULL;
        const char *what = s->arg_name ? s->arg_name : "argument";
        if (have < s->min_args)
            rc = cli_usage_error(s->cmd, "no %s given", what);
        else if (s->max_args == 0)
            rc = cli_usage_error(s->cmd, "unexpected argument \"%s\": it takes options only",
                                 extra);
        else
            rc = cli_usage_error(s->cmd, "unexpected argument \"%s\": %d %s%s given, it takes "
                                 "at most %d", extra, have, what, have > 1 ? "s" : "",
                                 s->max_args);
        free(*args);
        *args = NULL;
        return rc;
    }
    return 0;
}
