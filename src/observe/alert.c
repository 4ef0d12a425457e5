/* src/observe/alert.c - alerts raised once per crossing: each (type, pool,
 * owner) is at no level, warning or critical; a sample moves it up as soon
 * as the value passes a threshold and down only once the value falls below
 * the threshold times the clear ratio (hysteresis) for hold_samples samples
 * in a row. Every change is one alert: counted, and handed to the monitor's
 * sink. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor_internal.h"

static const char *const type_names[] = {
#define VRAM_ALERT_TYPE_NAME(NAME, name) #name,
    VRAM_ALERT_TYPES(VRAM_ALERT_TYPE_NAME)
#undef VRAM_ALERT_TYPE_NAME
};
static const char *const level_names[] = {"warning", "critical", "clear"};

const char *vram_alert_type_name(vram_alert_type type)
{
    return (unsigned)type < VRAM_ALERT_TYPE_COUNT ? type_names[type] : "?";
}

const char *vram_alert_level_name(vram_alert_level level)
{
    return (unsigned)level < VRAM_ALERT_LEVEL_COUNT ? level_names[level] : "?";
}

static int same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static vram__alert_state *find(vram__alerts *al, vram_alert_type type, const char *pool,
                               const char *owner)
{
    for (size_t i = 0; i < al->n_active; i++) {
        vram__alert_state *s = &al->active[i];
        if (s->type == type && same(s->pool, pool) && same(s->owner, owner))
            return s;
    }
    return NULL;
}

static void drop(vram__alerts *al, vram__alert_state *s)
{
    free(s->pool);
    free(s->owner);
    *s = al->active[--al->n_active];
}

static void fmt_value(char *buf, size_t cap, double v, char unit)
{
    char b[48];
    switch (unit) {
    case 'p':
        snprintf(buf, cap, "%.1f%%", 100.0 * v);
        break;
    case 'b':
    case 'm':
        vram__fmt_bytes(b, sizeof b, (uint64_t)fabs(v));
        snprintf(buf, cap, "%s%s per %s", v < 0 ? "-" : "", b, unit == 'b' ? "iteration" : "minute");
        break;
    default:
        snprintf(buf, cap, "%.3f", v);
    }
}

static void describe(vram_alert *a, double warn, int was, char unit, char *msg, size_t cap)
{
    char v[64], t[64];
    fmt_value(v, sizeof v, a->value, unit);
    fmt_value(t, sizeof t, a->threshold, unit);
    char who[160];
    if (a->owner)
        snprintf(who, sizeof who, "owner \"%s\" of pool \"%s\"", a->owner, a->pool);
    else
        snprintf(who, sizeof who, "pool \"%s\"", a->pool);
    const char *what = a->type == VRAM_ALERT_FRAGMENTATION ? "fragmentation"
                       : a->type == VRAM_ALERT_BUDGET      ? "live bytes as a share of the budget"
                                                           : "growth of live bytes";
    if (a->level == VRAM_ALERT_LEVEL_CLEAR) {
        char w[64];
        fmt_value(w, sizeof w, warn, unit);
        snprintf(msg, cap, "%s: %s back to %s, below the warning threshold of %s (%s cleared)",
                 who, what, v, w, level_names[was]);
    } else {
        snprintf(msg, cap, "%s: %s %s is above the %s threshold of %s", who, what, v,
                 level_names[a->level], t);
    }
}

int vram__alert_update(vram__alerts *al, vram_alert *a, double value, double warn, double crit,
                       double clear_ratio, int raised, char unit, vram__alert_sink sink, void *ctx)
{
    vram__alert_state *s = find(al, a->type, a->pool, a->owner);
    int cur = s ? s->level : -1;
    int up, hold;
    if (raised >= -1) { /* the caller decided (growth: the verdict) */
        up = raised;
        hold = raised;
    } else {
        up = value > crit ? VRAM_ALERT_LEVEL_CRITICAL : value > warn ? VRAM_ALERT_LEVEL_WARNING : -1;
        hold = cur == VRAM_ALERT_LEVEL_CRITICAL && value >= crit * clear_ratio
                   ? VRAM_ALERT_LEVEL_CRITICAL
               : cur >= 0 && value >= warn * clear_ratio ? VRAM_ALERT_LEVEL_WARNING
                                                         : -1;
    }
    int target = up > hold ? up : hold;
    if (target >= cur) {
        if (s)
            s->lower_for = 0;
        if (target == cur)
            return 0;
    } else if (++s->lower_for < al->hold_samples) {
        return 0; /* lower only once it has lasted */
    }
    if (!s && target >= 0) {
        void *grown = vram__grow(al->active, &al->cap_active, al->n_active, sizeof *al->active, 8);
        if (!grown)
            return VRAM_EHOSTMEM;
        al->active = grown;
        char *pool = a->pool ? vram__strdup(a->pool) : NULL;
        char *owner = a->owner ? vram__strdup(a->owner) : NULL;
        if ((a->pool && !pool) || (a->owner && !owner)) {
            free(pool);
            free(owner);
            return VRAM_EHOSTMEM;
        }
        s = &al->active[al->n_active++];
        *s = (vram__alert_state){.type = a->type, .pool = pool, .owner = owner, .level = target};
    } else if (target >= 0) {
        s->level = target;
    } else {
        drop(al, s);
    }
    a->level = target >= 0 ? (vram_alert_level)target : VRAM_ALERT_LEVEL_CLEAR;
    a->value = value;
    a->threshold = target == VRAM_ALERT_LEVEL_CRITICAL ? crit : warn;
    char msg[512];
    describe(a, warn, cur, unit, msg, sizeof msg);
    a->message = msg;
    al->counts[a->type][a->level]++;
    if (sink)
        sink(ctx, a);
    a->message = NULL;
    return 0;
}

void vram__alerts_forget_pool(vram__alerts *al, const char *pool)
{
    for (size_t i = 0; i < al->n_active;) {
        if (same(al->active[i].pool, pool))
            drop(al, &al->active[i]);
        else
            i++;
    }
}

void vram__alerts_free(vram__alerts *al)
{
    while (al->n_active)
        drop(al, &al->active[al->n_active - 1]);
    free(al->active);
    *al = (vram__alerts){0};
}

unsigned vram__alerts_active(const vram__alerts *al, vram_alert_type type, int level)
{
    unsigned n = 0;
    for (size_t i = 0; i < al->n_active; i++)
        n += al->active[i].type == type && al->active[i].level == level;
    return n;
}
