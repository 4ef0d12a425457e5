/* tests/unit/test_monitor_trend.c - the monitor's arithmetic and alert state
 * machine, from the inside: Student's t against tabulated values, the line
 * fit on exact lines, on noisy lines (the slope within its error, confident)
 * and on noise alone (not confident), with data far from zero; and alerts
 * raised once per crossing, moved between warning and critical, cleared
 * with hysteresis, per owner, forgotten with their pool. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "observe/monitor_internal.h"

static void test_t_cdf(void **state)
{
    (void)state;
    /* Table values: two-sided 95% and 99% points. */
    assert_true(fabs(vram__t_cdf(0.0, 5) - 0.5) < 1e-12);
    assert_true(fabs(vram__t_cdf(2.228, 10) - 0.975) < 2e-4);
    assert_true(fabs(vram__t_cdf(-2.228, 10) - 0.025) < 2e-4);
    assert_true(fabs(vram__t_cdf(3.169, 10) - 0.995) < 2e-4);
    assert_true(fabs(vram__t_cdf(12.706, 1) - 0.975) < 2e-4);
    assert_true(fabs(vram__t_cdf(1.0, 1) - 0.75) < 1e-9); /* Cauchy */
    assert_true(fabs(vram__t_cdf(1.96, 1e6) - 0.975) < 2e-4);
    assert_true(fabs(vram__t_cdf(2.576, 200000) - 0.995) < 2e-4);
    assert_true(vram__t_cdf(INFINITY, 3) == 1.0);
    assert_true(vram__t_cdf(-INFINITY, 3) == 0.0);
    assert_true(isnan(vram__t_cdf(1.0, 0)));
    /* Monotone. */
    double prev = 0;
    for (double t = -6; t <= 6; t += 0.25) {
        double p = vram__t_cdf(t, 7);
        assert_true(p >= prev);
        prev = p;
    }
}

/* A deterministic normal generator (Box-Muller over a LCG). */
static uint64_t rng = 12345;
static double uniform(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
}
static double gauss(void)
{
    return sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform());
}

static void test_fit_exact(void **state)
{
    (void)state;
    enum { N = 200 };
    double x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = i;
        y[i] = 5e10 + 4096.0 * i; /* 50 GB live, growing 4 KiB per step */
    }
    vram__fit f;
    assert_int_equal(vram__fit_line(x, y, N, &f), 0);
    assert_true(fabs(f.slope - 4096.0) < 1e-6);
    assert_true(f.r2 > 0.999999);
    assert_true(f.confidence == 1.0);
    assert_true(f.t > 1e6 || isinf(f.t));
    /* Flat: no slope, no confidence. */
    for (int i = 0; i < N; i++)
        y[i] = 7e9;
    assert_int_equal(vram__fit_line(x, y, N, &f), 0);
    assert_true(f.slope == 0.0);
    assert_true(f.confidence == 0.0);
    assert_true(f.r2 == 0.0);
    /* Shrinking. */
    for (int i = 0; i < N; i++)
        y[i] = 1e6 - 10.0 * i;
    assert_int_equal(vram__fit_line(x, y, N, &f), 0);
    assert_true(fabs(f.slope + 10.0) < 1e-9);
    assert_true(f.confidence == 0.0);
}

static void test_fit_noise(void **state)
{
    (void)state;
    enum { N = 500 };
    double x[N], y[N];
    /* Slope 100 B per step under noise of sd 5000 B: the estimate is within
     * 4 standard errors and the slope is confidently positive. */
    for (int i = 0; i < N; i++) {
        x[i] = 0.5 * i;
        y[i] = 1e9 + 200.0 * x[i] + 5000.0 * gauss();
    }
    vram__fit f;
    assert_int_equal(vram__fit_line(x, y, N, &f), 0);
    assert_true(fabs(f.slope - 200.0) < 4 * f.stderr_slope);
    /* The standard error matches theory: sd / sqrt(Sxx). */
    double sxx = 0, mx = 0.25 * (N - 1);
    for (int i = 0; i < N; i++)
        sxx += (x[i] - mx) * (x[i] - mx);
    assert_true(fabs(f.stderr_slope - 5000.0 / sqrt(sxx)) < 0.15 * 5000.0 / sqrt(sxx));
    assert_true(f.confidence > 0.999);
    assert_true(f.r2 > 0 && f.r2 < 1);
    /* Noise alone: over many series, the confidence is spread (about
     * uniform) and rarely above 0.99. */
    int above = 0, below_half = 0;
    for (int r = 0; r < 200; r++) {
        for (int i = 0; i < N; i++)
            y[i] = 1e9 + 5000.0 * gauss();
        assert_int_equal(vram__fit_line(x, y, N, &f), 0);
        above += f.confidence > 0.99;
        below_half += f.confidence < 0.5;
        assert_true(fabs(f.t) < 6);
    }
    assert_true(above <= 10);
    assert_true(below_half > 60 && below_half < 140);
}

static void test_fit_errors(void **state)
{
    (void)state;
    double x[3] = {1, 1, 1}, y[3] = {1, 2, 3};
    vram__fit f;
    assert_int_equal(vram__fit_line(x, y, 2, &f), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "at least 3"));
    assert_true(isnan(f.slope));
    assert_int_equal(vram__fit_line(x, y, 3, &f), VRAM_EINVAL);
    assert_non_null(strstr(vram_last_error(), "all 3 are at 1"));
}

/* ---- alerts ---- */

typedef struct seen {
    int n;
    vram_alert_level levels[32];
    double thresholds[32];
    char messages[32][256];
    char owners[32][32];
} seen;

static void sink(void *ctx, const vram_alert *a)
{
    seen *s = ctx;
    assert_true(s->n < 32);
    s->levels[s->n] = a->level;
    s->thresholds[s->n] = a->threshold;
    snprintf(s->messages[s->n], sizeof s->messages[0], "%s", a->message);
    snprintf(s->owners[s->n], sizeof s->owners[0], "%s", a->owner ? a->owner : "");
    s->n++;
}

static void feed(vram__alerts *al, seen *s, const char *owner, double v)
{
    vram_alert a = {.type = owner ? VRAM_ALERT_BUDGET : VRAM_ALERT_FRAGMENTATION,
                    .pool = "p",
                    .owner = owner,
                    .iteration = -1};
    if (owner)
        assert_int_equal(vram__alert_update(al, &a, v, 0.9, INFINITY, 0.9, -2, 'p', sink, s), 0);
    else
        assert_int_equal(vram__alert_update(al, &a, v, 0.3, 0.5, 0.9, -2, 'r', sink, s), 0);
}

static void test_alert_crossings(void **state)
{
    (void)state;
    vram__alerts al = {0};
    seen s = {0};
    /* Below, above (warning once), still above, critical, still critical,
     * back to warning, hovering in the band (no flapping), clear. */
    double values[] = {0.1, 0.35, 0.4, 0.31, 0.55, 0.7, 0.46, 0.4, 0.28, 0.31, 0.2, 0.1, 0.1};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        feed(&al, &s, NULL, values[i]);
    assert_int_equal(s.n, 4);
    assert_int_equal(s.levels[0], VRAM_ALERT_LEVEL_WARNING);
    assert_true(s.thresholds[0] == 0.3);
    assert_int_equal(s.levels[1], VRAM_ALERT_LEVEL_CRITICAL);
    assert_true(s.thresholds[1] == 0.5);
    assert_int_equal(s.levels[2], VRAM_ALERT_LEVEL_WARNING); /* 0.4 < 0.5 x 0.9 */
    assert_int_equal(s.levels[3], VRAM_ALERT_LEVEL_CLEAR);   /* 0.2 < 0.3 x 0.9 */
    assert_non_null(strstr(s.messages[0], "pool \"p\": fragmentation 0.350 is above the warning "
                                          "threshold of 0.300"));
    assert_non_null(strstr(s.messages[1], "0.550 is above the critical threshold of 0.500"));
    assert_non_null(strstr(s.messages[3], "back to 0.200"));
    assert_non_null(strstr(s.messages[3], "cleared"));
    assert_int_equal(al.counts[VRAM_ALERT_FRAGMENTATION][VRAM_ALERT_LEVEL_WARNING], 2);
    assert_int_equal(al.counts[VRAM_ALERT_FRAGMENTATION][VRAM_ALERT_LEVEL_CRITICAL], 1);
    assert_int_equal(al.counts[VRAM_ALERT_FRAGMENTATION][VRAM_ALERT_LEVEL_CLEAR], 1);
    assert_int_equal(al.n_active, 0);
    /* Straight to critical and straight back to clear. */
    feed(&al, &s, NULL, 0.9);
    feed(&al, &s, NULL, 0.0);
    assert_int_equal(s.n, 6);
    assert_int_equal(s.levels[4], VRAM_ALERT_LEVEL_CRITICAL);
    assert_int_equal(s.levels[5], VRAM_ALERT_LEVEL_CLEAR);
    vram__alerts_free(&al);
}

/* With hold_samples 3 a value that swings across a threshold between
 * samples raises the alert once; it is lowered and cleared only after three
 * samples in a row call for it, and a swing back up restarts the count. */
static void test_alert_hold(void **state)
{
    (void)state;
    vram__alerts al = {.hold_samples = 3};
    seen s = {0};
    double swing[] = {0.9, 0.2, 0.9, 0.2, 0.2, 0.9, 0.2, 0.9};
    for (size_t i = 0; i < sizeof swing / sizeof swing[0]; i++)
        feed(&al, &s, NULL, swing[i]);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.levels[0], VRAM_ALERT_LEVEL_CRITICAL);
    /* Critical down to the warning band for three samples: lowered once. */
    feed(&al, &s, NULL, 0.4);
    feed(&al, &s, NULL, 0.4);
    assert_int_equal(s.n, 1);
    feed(&al, &s, NULL, 0.4);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.levels[1], VRAM_ALERT_LEVEL_WARNING);
    /* Raising is at once, clearing after three samples below. */
    feed(&al, &s, NULL, 0.6);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.levels[2], VRAM_ALERT_LEVEL_CRITICAL);
    for (int i = 0; i < 2; i++)
        feed(&al, &s, NULL, 0.1);
    assert_int_equal(s.n, 3);
    feed(&al, &s, NULL, 0.1);
    assert_int_equal(s.n, 4);
    assert_int_equal(s.levels[3], VRAM_ALERT_LEVEL_CLEAR);
    assert_int_equal(al.n_active, 0);
    vram__alerts_free(&al);
}

static void test_alert_owners(void **state)
{
    (void)state;
    vram__alerts al = {0};
    seen s = {0};
    feed(&al, &s, "cam01", 0.95);
    feed(&al, &s, "cam02", 0.5);
    feed(&al, &s, "cam01", 0.99);
    feed(&al, &s, "cam02", 0.92);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.owners[0], "cam01");
    assert_string_equal(s.owners[1], "cam02");
    assert_non_null(strstr(s.messages[0], "owner \"cam01\" of pool \"p\": live bytes as a share of "
                                          "the budget 95.0% is above the warning threshold of 90.0%"));
    assert_int_equal(vram__alerts_active(&al, VRAM_ALERT_BUDGET, VRAM_ALERT_LEVEL_WARNING), 2);
    /* A budget has no critical level, however far above. */
    feed(&al, &s, "cam01", 3.0);
    assert_int_equal(s.n, 2);
    feed(&al, &s, "cam02", 0.5);
    assert_int_equal(s.n, 3);
    assert_int_equal(s.levels[2], VRAM_ALERT_LEVEL_CLEAR);
    /* Forgetting the pool drops cam01's alert without a clear. */
    vram__alerts_forget_pool(&al, "p");
    assert_int_equal(al.n_active, 0);
    assert_int_equal(s.n, 3);
    vram__alerts_free(&al);
}

static void test_alert_decided(void **state)
{
    (void)state;
    vram__alerts al = {0};
    seen s = {0};
    int verdicts[] = {0, 1, 1, 1, 0, 0, 1};
    for (size_t i = 0; i < sizeof verdicts / sizeof verdicts[0]; i++) {
        vram_alert a = {.type = VRAM_ALERT_GROWTH, .pool = "p", .iteration = (int64_t)i};
        assert_int_equal(vram__alert_update(&al, &a, 100.0 * (double)i, 0, INFINITY, 1.0,
                                            verdicts[i] ? VRAM_ALERT_LEVEL_WARNING : -1, 'b', sink,
                                            &s),
                         0);
    }
    assert_int_equal(s.n, 3);
    assert_int_equal(s.levels[0], VRAM_ALERT_LEVEL_WARNING);
    assert_int_equal(s.levels[1], VRAM_ALERT_LEVEL_CLEAR);
    assert_int_equal(s.levels[2], VRAM_ALERT_LEVEL_WARNING);
    assert_non_null(strstr(s.messages[0], "growth of live bytes 100 B per iteration"));
    vram__alerts_free(&al);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_t_cdf),          cmocka_unit_test(test_fit_exact),
        cmocka_unit_test(test_fit_noise),      cmocka_unit_test(test_fit_errors),
        cmocka_unit_test(test_alert_crossings), cmocka_unit_test(test_alert_hold),
        cmocka_unit_test(test_alert_owners),
        cmocka_unit_test(test_alert_decided),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
