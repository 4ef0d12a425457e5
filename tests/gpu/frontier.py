#!/usr/bin/env python3
"""tests/gpu/frontier.py - one Markdown page from the JSON Lines of
`vramkit replay --json` (one object per trace and allocator), several files
each under a label:

    frontier.py --out FILE.md [--title T] [--commit SHA] [--tolerance F]
                [--strict] LABEL=FILE.jsonl...

Labels the checks know: "vramkit" (today's build, no limit), "vramkit-1.05"
(the pool's limit at 1.05 x the trace's peak live), "vramkit-before" (the
build before, its defaults); others ("segments", ...) are shown in the
tables and the frontier only. Per trace: a row per label and allocator
(held/live, warm and cold host ns/op, warm backend calls per pass, failed
allocations), the frontier line (held/live, warm ns/op points sorted by
held/live, * on the points no other point beats on both), then the checks,
each PASS or FAIL from the numbers, or "not measured" when a row it needs
is missing. Exit status 0 when the page is written (with --strict, 1 when a
check fails), 2 for bad arguments or an unreadable file."""
import argparse
import datetime
import json
import os
import shlex
import sys

MAX_WARM_VS_ASYNC = 0.25  # vramkit warm ns/op against cudaMallocAsync warm
MAX_COLD_VS_ASYNC = 1.0   # vramkit cold ns/op against cudaMallocAsync cold
BASELINE = "cudaMallocAsync"
# Other settings of the pool, checked as the default is, not in the summary.
ALT_LABELS = [
    ("vramkit-need", "other streams' completed frees rejoining only when new memory is "
                     "needed (VRAM_STREAM_RECLAIM=need)"),
    ("vramkit-all", "other streams' completed frees rejoining before every large request "
                    "(VRAM_STREAM_RECLAIM_MIN=0)"),
]


def fail_usage(msg):
    sys.stderr.write("frontier.py: %s\n" % msg)
    sys.exit(2)


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Markdown page of replay results and checks")
    ap.add_argument("--out", required=True, help="the Markdown page to write")
    ap.add_argument("--title", default="Replay: held memory against host time")
    ap.add_argument("--commit", default="unknown", help="the commit the results are of")
    ap.add_argument("--tolerance", type=float, default=0.10,
                    help="'no worse': at most this fraction above the build before (0.10)")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a check fails")
    ap.add_argument("inputs", nargs="+", metavar="LABEL=FILE.jsonl")
    a = ap.parse_args(argv)
    if a.tolerance < 0:
        fail_usage("--tolerance must be 0 or more, not %g" % a.tolerance)
    a.pairs = []
    for item in a.inputs:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            fail_usage("an input is LABEL=FILE.jsonl, not '%s'" % item)
        if label in [l for l, _ in a.pairs]:
            fail_usage("label '%s' is given twice" % label)
        a.pairs.append((label, path))
    return a


def trace_name(r):
    return os.path.basename(str(r.get("trace", "?"))).replace(".csv.gz", "").replace(".csv", "")


def read_rows(label, path, notes):
    """The objects of one file, each tagged with its label; lines that are not
    a replay's object are skipped with a note naming the file and the line."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        fail_usage("cannot read %s (label %s): %s" % (path, label, e.strerror))
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
        except ValueError as e:
            notes.append("%s line %d: not JSON (%s), skipped" % (path, n, e))
            continue
        if not isinstance(r, dict) or "trace" not in r or "allocator" not in r:
            notes.append("%s line %d: no trace or allocator, skipped" % (path, n))
            continue
        r["_label"] = label
        rows.append(r)
    if not rows:
        notes.append("%s (label %s): no replay rows" % (path, label))
    return rows


def num(r, key):
    """A number of a row, or None when missing or not a number."""
    v = r.get(key) if r else None
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def held_ratio(r):
    v = num(r, "reserved_ratio")
    if v is not None:
        return v
    live, held = num(r, "peak_live_bytes"), num(r, "peak_reserved_bytes")
    return held / live if live and held is not None else None


def settings(r):
    s = r.get("settings") if r else None
    return s if isinstance(s, dict) else None


def fmt(v, spec="%.3f"):
    return "-" if v is None else spec % v


def group(rows, notes):
    """{trace: {(label, allocator): row}}, the first of duplicates kept."""
    by = {}
    for r in rows:
        key = (r["_label"], r["allocator"])
        t = by.setdefault(trace_name(r), {})
        if key in t:
            notes.append("%s: a second row for %s %s, the first kept" % (trace_name(r), *key))
            continue
        t[key] = r
    return by


def vramkit_row(rows, label, want_no_limit):
    """The label's row of vramkit's pool (settings not null), the vmm policy
    preferred; with want_no_limit only one without a limit ratio."""
    cands = [r for (l, _), r in sorted(rows.items()) if l == label and settings(r)]
    if want_no_limit:
        cands = [r for r in cands if not (num(settings(r), "limit_ratio") or 0)]
    vmm = [r for r in cands if settings(r).get("policy") == "vmm"]
    return (vmm or cands or [None])[0]


def driver_row(rows, name, prefer_label):
    """A driver allocator's row: from the preferred label's file (same run),
    else from any file."""
    same = rows.get((prefer_label, name))
    if same:
        return same
    for (_, alloc), r in sorted(rows.items()):
        if alloc == name:
            return r
    return None


def check(name, value, limit, ok, detail=""):
    """One check: ok is True, False or None (not measured)."""
    return {"name": name, "value": value, "limit": limit, "ok": ok, "detail": detail}


def ratio_check(name, mine, theirs, factor, unit, spec="%.1f"):
    """mine <= factor x theirs, the ratio shown with both numbers."""
    if mine is None or theirs is None or theirs <= 0:
        return check(name, None, factor, None, "not measured: no %s" % unit)
    shown = (spec + " against " + spec) % (mine, theirs)
    return check(name, mine / theirs, factor, mine <= factor * theirs,
                 "ratio %.3f (at most %g): %s %s" % (mine / theirs, factor, shown, unit))


def checks_no_limit(rows, label="vramkit"):
    v = vramkit_row(rows, label, True)
    a = driver_row(rows, BASELINE, "vramkit")
    missing = "not measured: no %s row" % ("%s (limit_ratio 0)" % label if not v else BASELINE)
    if not v or not a:
        return [check(n, None, lim, None, missing) for n, lim in (
            ("held <= %s held" % BASELINE, 1.0),
            ("warm ns/op <= %.2f x %s warm" % (MAX_WARM_VS_ASYNC, BASELINE), MAX_WARM_VS_ASYNC),
            ("cold ns/op <= %.2f x %s cold" % (MAX_COLD_VS_ASYNC, BASELINE), MAX_COLD_VS_ASYNC))]
    return [ratio_check("held <= %s held" % BASELINE, held_ratio(v), held_ratio(a), 1.0,
                        "held/live", "%.3f"),
            ratio_check("warm ns/op <= %.2f x %s warm" % (MAX_WARM_VS_ASYNC, BASELINE),
                        num(v, "warm_ns_per_op"), num(a, "warm_ns_per_op"), MAX_WARM_VS_ASYNC,
                        "warm ns/op"),
            ratio_check("cold ns/op <= %.2f x %s cold" % (MAX_COLD_VS_ASYNC, BASELINE),
                        num(v, "ns_per_op"), num(a, "ns_per_op"), MAX_COLD_VS_ASYNC,
                        "cold ns/op")]


def checks_limit(rows, tolerance):
    v = vramkit_row(rows, "vramkit-1.05", False)
    b = vramkit_row(rows, "vramkit-before", False)
    if not v:
        miss = "not measured: no vramkit-1.05 row"
        return [check("failed allocations == 0", None, 0, None, miss),
                check("peak held <= limit", None, None, None, miss),
                check("warm ns/op no worse than vramkit-before", None, None, None, miss)]
    lr = num(settings(v), "limit_ratio")
    note = "" if lr else "; this row's settings have no limit ratio"
    out = []
    failed = num(v, "failed_allocs")
    out.append(check("failed allocations == 0", failed, 0,
                     None if failed is None else failed == 0,
                     ("not measured: no failed_allocs" if failed is None else
                      "%d refused" % failed) + note))
    if failed:
        first = v.get("first_failure") if isinstance(v.get("first_failure"), dict) else {}
        if first.get("line") is not None:
            out[-1]["detail"] += ", the first at line %s (%s bytes)" % (
                first.get("line"), first.get("size_bytes", "?"))
    held, limit = num(v, "peak_reserved_bytes"), num(v, "limit_bytes")
    if held is None or not limit:
        out.append(check("peak held <= limit", None, None, None,
                         "not measured: no peak_reserved_bytes or limit_bytes"))
    else:
        out.append(check("peak held <= limit", held / limit, 1.0, held <= limit,
                         "%.1f MiB held, limit %.1f MiB (%s x the trace's peak live)%s"
                         % (held / 2**20, limit / 2**20, fmt(lr, "%g"), note)))
    if not b:
        out.append(check("warm ns/op no worse than vramkit-before", None, None, None,
                         "not measured: no vramkit-before row"))
    else:
        out.append(ratio_check("warm ns/op no worse than vramkit-before (+%d%%)"
                               % round(tolerance * 100), num(v, "warm_ns_per_op"),
                               num(b, "warm_ns_per_op"), 1.0 + tolerance, "warm ns/op"))
    return out


def frontier_line(rows):
    pts = []
    for (label, alloc), r in rows.items():
        h, w = held_ratio(r), num(r, "warm_ns_per_op")
        if h is not None and w is not None:
            pts.append((h, w, "%s %s" % (label, alloc) if settings(r) else alloc))
    pts.sort()
    parts = []
    for h, w, name in pts:
        beaten = any(h2 <= h and w2 <= w and (h2 < h or w2 < w) for h2, w2, _ in pts)
        parts.append("%s%s (%.3f, %.1f)" % ("" if beaten else "*", name, h, w))
    return " < ".join(parts) if parts else "-"


def settings_text(r):
    """The limit and the decay a vramkit row ran with; "-" for the driver's."""
    s = settings(r)
    if not s:
        return "-"
    ratio, pool_limit = num(s, "limit_ratio"), num(s, "pool_limit")
    if ratio:
        what = "limit %g x live" % ratio
    elif pool_limit:
        what = "limit %.0f MiB" % (pool_limit / 2**20)
    else:
        what = "default limit"
    decay = num(s, "decay_ms")
    if decay is not None:
        what += ", decay %.0f ms" % decay
    if s.get("stream_reclaim") == "need":
        what += ", stream reclaim need"
    elif s.get("stream_reclaim") == "large" and num(s, "reclaim_min") == 0:
        what += ", stream reclaim before every large request"
    return what


def table_rows(rows):
    out = []
    for (label, alloc), r in sorted(rows.items(), key=lambda kv: (held_ratio(kv[1]) or 1e9,
                                                                  kv[0])):
        limit = num(r, "limit_bytes")
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            label, alloc, settings_text(r), fmt(held_ratio(r)), fmt(num(r, "floor_ratio") or None),
            fmt(num(r, "warm_ns_per_op"), "%.1f"),
            fmt(num(r, "ns_per_op"), "%.1f"), fmt(num(r, "warm_backend_calls"), "%.1f"),
            fmt(num(r, "failed_allocs"), "%d"), fmt(limit / 2**20 if limit else None, "%.1f")))
    return out


def check_line(c):
    if c["ok"] is None:
        return "- not measured: %s (%s)" % (c["name"], c["detail"].replace("not measured: ", ""))
    return "- %s %s: %s" % ("PASS" if c["ok"] else "FAIL", c["name"], c["detail"])


def page(a, by, notes):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = " ".join(shlex.quote(x) for x in ["frontier.py"] + sys.argv[1:])
    lines = ["# %s" % a.title, "", "- date: %s" % now, "- commit: %s" % a.commit,
             "- command: `%s`" % cmd]
    for label, path in a.pairs:
        lines.append("- %s: `%s`" % (label, path))
    lines += ["- held/live: peak held over peak live (vramkit: bytes held from the backend; "
              "cudaMallocAsync: the pool's reserved high-water mark; cudaMalloc: bytes handed "
              "out); floor: the most bytes live or waiting for their streams at once, over "
              "peak live (under the stream model no allocator holds less); warm/cold: host ns "
              "per allocate or free on a pool that replayed the trace before / on a fresh one; "
              "calls: backend calls per warm pass; '-': not in the inputs", ""]
    results = []
    for t in sorted(by):
        rows = by[t]
        lines += ["## %s" % t, "",
                  "| label | allocator | settings | held/live | floor | warm ns/op | cold ns/op | "
                  "warm calls/pass | failed | limit MiB |",
                  "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        lines += table_rows(rows)
        lines += ["", "frontier (held/live, warm ns/op; * not beaten on both): `%s`"
                  % frontier_line(rows), ""]
        lines.append("Checks, no limit (vramkit, limit_ratio 0, against %s):" % BASELINE)
        lines.append("")
        cs = checks_no_limit(rows)
        lines += [check_line(c) for c in cs]
        for alt, what in ALT_LABELS:
            if any(l == alt for l, _ in rows):
                lines += ["", "The same with %s (%s; not in the summary):" % (what, alt), ""]
                lines += [check_line(c) for c in checks_no_limit(rows, alt)]
        lines += ["", "Checks, limit 1.05 x peak live (vramkit-1.05):", ""]
        cl = checks_limit(rows, a.tolerance)
        lines += [check_line(c) for c in cl]
        lines.append("")
        results += cs + cl
    npass = sum(1 for c in results if c["ok"] is True)
    nfail = sum(1 for c in results if c["ok"] is False)
    nmiss = sum(1 for c in results if c["ok"] is None)
    lines += ["## Summary", "",
              "%d of %d checks pass, %d fail, %d not measured." % (
                  npass, npass + nfail, nfail, nmiss), ""]
    if notes:
        lines += ["Notes on the inputs:", ""] + ["- " + n for n in notes] + [""]
    return "\n".join(lines), npass, nfail, nmiss


def main(argv):
    a = parse_args(argv)
    notes, rows = [], []
    for label, path in a.pairs:
        rows += read_rows(label, path, notes)
    by = group(rows, notes)
    for n in notes:
        sys.stderr.write("frontier.py: %s\n" % n)
    text, npass, nfail, nmiss = page(a, by, notes)
    try:
        with open(a.out, "w") as f:
            f.write(text)
    except OSError as e:
        fail_usage("cannot write %s: %s" % (a.out, e.strerror))
    print("%s: %d of %d checks pass, %d not measured" % (a.out, npass, npass + nfail, nmiss))
    return 1 if a.strict and nfail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
