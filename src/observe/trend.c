/* src/observe/trend.c - the leak verdict's arithmetic: a least-squares line
 * through (x, live bytes), the standard error of its slope, and how sure one
 * can be that the slope is above zero (Student's t, through the regularised
 * incomplete beta function). */
#include <math.h>

#include "monitor_internal.h"

#define LENTZ_TINY 1e-300

/* x, kept away from zero (Lentz's guard against a vanishing denominator). */
static double lentz_nonzero(double x)
{
    return fabs(x) < LENTZ_TINY ? LENTZ_TINY : x;
}

/* One term `aa` of the continued fraction: updates Lentz's c and d and
 * returns the factor by which the fraction's value changes. */
static double lentz_step(double aa, double *c, double *d)
{
    *d = 1.0 / lentz_nonzero(1.0 + aa * *d);
    *c = lentz_nonzero(1.0 + aa / *c);
    return *d * *c;
}

/* Continued fraction of the incomplete beta function (modified Lentz). */
static double beta_cf(double a, double b, double x)
{
    const double eps = 1e-15;
    double qab = a + b, qap = a + 1.0, qam = a - 1.0;
    double c = 1.0, d = 1.0 / lentz_nonzero(1.0 - qab * x / qap);
    double h = d;
    for (int m = 1; m <= 400; m++) {
        double m2 = 2.0 * m;
        h *= lentz_step(m * (b - m) * x / ((qam + m2) * (a + m2)), &c, &d);
        double del = lentz_step(-(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)), &c, &d);
        h *= del;
        if (fabs(del - 1.0) < eps)
            break;
    }
    return h;
}

/* I_x(a, b), the regularised incomplete beta function. */
static double beta_inc(double a, double b, double x)
{
    if (x <= 0.0)
        return 0.0;
    if (x >= 1.0)
        return 1.0;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    double bt = exp(lbt);
    if (x < (a + 1.0) / (a + b + 2.0))
        return bt * beta_cf(a, b, x) / a;
    return 1.0 - bt * beta_cf(b, a, 1.0 - x) / b;
}

double vram__t_cdf(double t, double df)
{
    if (isnan(t) || !(df > 0))
        return NAN;
    if (isinf(t))
        return t > 0 ? 1.0 : 0.0;
    /* P(|T| > |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2) */
    double tail = 0.5 * beta_inc(0.5 * df, 0.5, df / (df + t * t));
    return t > 0 ? 1.0 - tail : tail;
}

int vram__fit_line(const double *x, const double *y, size_t n, vram__fit *out)
{
    *out = (vram__fit){.n = n, .slope = NAN, .stderr_slope = NAN, .r2 = NAN, .t = NAN,
                       .confidence = NAN};
    if (n < 3)
        return vram__fail(VRAM_EINVAL, "a trend needs at least 3 samples, not %zu", n);
    /* Centred sums, in two passes, so large byte counts do not cancel. */
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)n;
    my /= (double)n;
    double sxx = 0, sxy = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        double dx = x[i] - mx, dy = y[i] - my;
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    if (!(sxx > 0))
        return vram__fail(VRAM_EINVAL, "a trend needs samples at different points: all %zu are at %g",
                          n, x[0]);
    double slope = sxy / sxx, a = my - slope * mx, sse = 0;
    for (size_t i = 0; i < n; i++) {
        double r = y[i] - (a + slope * x[i]);
        sse += r * r;
    }
    /* Residuals below rounding of the data are no noise at all. */
    double scale = fabs(my) + sqrt(syy / (double)n);
    if (sse <= 1e-24 * scale * scale * (double)n)
        sse = 0;
    out->slope = slope;
    out->stderr_slope = sqrt(sse / (double)(n - 2) / sxx);
    out->r2 = syy > 0 ? 1.0 - sse / syy : 0.0;
    if (out->r2 < 0)
        out->r2 = 0;
    if (out->stderr_slope > 0) {
        out->t = slope / out->stderr_slope;
        out->confidence = vram__t_cdf(out->t, (double)(n - 2));
    } else { /* an exact line: certain of its sign */
        out->t = slope > 0 ? INFINITY : slope < 0 ? -INFINITY : 0.0;
        out->confidence = slope > 0 ? 1.0 : 0.0;
    }
    return 0;
}
