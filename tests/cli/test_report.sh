#!/usr/bin/env bash
# tests/cli/test_report.sh VRAMKIT - `vramkit report` end to end:
#  - the inputs of tests/data/report (the monitor's JSON Lines and CSV, a
#    snapshot, an OOM report; made by make_fixtures.py and test_report) and
#    an OOM report with its snapshot written by `vramkit replay --oom-dir`
#    are recognised by content (copies without their extension, one gzip),
#    and their data in the page match the files;
#  - a long series (200,000 samples) is downsampled to at most 2,000 points
#    with its peak kept, and the page stays small;
#  - a CSV written before pending_bytes was added reads as the same series
#    without pending bytes;
#  - bad inputs (truncated JSON and JSON Lines, wrong CSV columns: unknown,
#    repeated or missing, an unknown or missing file) fail with the file, the line and the problem,
#    write nothing and leave an existing page as it was;
#  - the page opens in headless Chromium without errors and draws what the
#    inputs hold (tests/report/check_page.js; playwright-core is installed
#    by scripts/web_deps.sh --browser). With VRAM_REPORT_SCREENSHOT=FILE.png
#    it also checks the page of one series, the snapshot and the OOM report
#    and writes a screenshot of it (docs/report.png).
set -euo pipefail
vramkit=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
src=${VRAM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
data=$src/tests/data/report
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- recognised by content, and the data match the inputs
cp "$data/series.jsonl" "$tmp/a"
cp "$data/series.csv" "$tmp/b"
cp "$data/snapshot.json" "$tmp/c"
cp "$data/oom.json" "$tmp/d"
gzip -c "$data/series.jsonl" >"$tmp/e.gz"
mkdir "$tmp/oom"
"$vramkit" replay --runs 1 --capacity 16M --oom-dir "$tmp/oom" "$src/tests/data/traces/small.csv.gz" \
  >/dev/null 2>&1 || true
oom_files=("$tmp"/oom/*.json)
[ ${#oom_files[@]} -eq 2 ] || fail "replay --oom-dir wrote ${#oom_files[@]} JSON files, expected 2: ${oom_files[*]}"
"$vramkit" report --json "$tmp/a" "$tmp/b" "$tmp/c" "$tmp/d" "$tmp/e.gz" "${oom_files[@]}" \
  >"$tmp/data.json" 2>"$tmp/summary.txt" || fail "report --json: $(cat "$tmp/summary.txt")"
python3 - "$tmp" "$data" <<'PY'
import gzip, json, sys
tmp, data = sys.argv[1], sys.argv[2]
d = json.load(open(f"{tmp}/data.json"))
bad = []
types = [(i["name"].split("/")[-1], i["type"], i["format"]) for i in d["inputs"]]
want = [("a", "series", "jsonl"), ("b", "series", "csv"), ("c", "snapshot", "json"), ("d", "oom", "json"),
        ("e.gz", "series", "jsonl")]
if types[:5] != want:
    bad.append(f"inputs read as {types[:5]}, expected {want}")
if sorted(t[1] for t in types[5:]) != ["oom", "snapshot"]:
    bad.append(f"replay's OOM files read as {types[5:]}")

# The series: every sample, owner and kind of the JSON Lines; CSV and gzip the same.
lines = [json.loads(l) for l in open(f"{data}/series.jsonl")]
samples = [l for l in lines if l["type"] == "sample"]
alerts = [l for l in lines if l["type"] == "alert"]
jl, csv, gz = d["series"][0], d["series"][1], d["series"][2]
if jl["samples"] != len(samples) or jl["points"] != len(samples):
    bad.append(f"series: {jl['samples']} samples, {jl['points']} points, expected {len(samples)}")
owners = list(dict.fromkeys(o["owner"] for s in samples for o in s["pools"][0]["owners"]))
for name, s in (("jsonl", jl), ("csv", csv), ("gzip", gz)):
    p = s["pools"][0]
    if [o["name"] for o in p["owners"]] != owners:
        bad.append(f"{name}: owners {[o['name'] for o in p['owners']]}, expected {owners}")
    for field in ("live_bytes", "pending_bytes"):
        if p[field] != [x["pools"][0][field] for x in samples]:
            bad.append(f"{name}: {field} differ from the samples")
    for o in p["owners"]:
        want = [next((w["live_bytes"] for w in x["pools"][0]["owners"] if w["owner"] == o["name"]), 0)
                for x in samples]
        if o["live_bytes"] != want:
            bad.append(f"{name}: owner {o['name']}'s live bytes differ from the samples")
if len(jl["alerts"]) != len(alerts) or [a["message"] for a in jl["alerts"]] != [a["message"] for a in alerts]:
    bad.append(f"series: {len(jl['alerts'])} alerts, expected {len(alerts)}")
if gz != dict(jl, input=gz["input"]):
    bad.append("the gzip copy of the JSON Lines reads differently")

# The snapshot: every block, with its owner.
snap = json.load(open(f"{data}/snapshot.json"))
s = d["snapshots"][0]
if s["blocks_in_file"] != len(snap["blocks"]) or len(s["blocks"]["size"]) != len(snap["blocks"]):
    bad.append(f"snapshot: {s['blocks_in_file']} blocks, expected {len(snap['blocks'])}")
base = int(s["base"], 16)
by_addr = {int(b["address"], 16): b for b in snap["blocks"]}
for k in range(len(s["blocks"]["size"])):
    b = by_addr.get(base + int(s["blocks"]["offset"][k]))
    o = s["blocks"]["owner"][k]
    if not b or b["size"] != s["blocks"]["size"][k] or (b["owner"] or None) != (s["block_owners"][o] if o >= 0 else None):
        bad.append(f"snapshot: block {k} does not match the file")
        break

# The OOM report.
oom = json.load(open(f"{data}/oom.json"))
o = d["ooms"][0]
if o["diagnosis"] != oom["diagnosis"] or o["request"]["size_bytes"] != oom["request"]["size_bytes"]:
    bad.append("oom: diagnosis or request differ from the file")
if len(o["last_events"]) != len(oom["last_events"]):
    bad.append(f"oom: {len(o['last_events'])} events, expected {len(oom['last_events'])}")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
print(f"report --json: {len(d['inputs'])} inputs recognised by content; series, snapshot and OOM match the files")
PY
grep -q "^$tmp/b: sample series (CSV): 180 samples" "$tmp/summary.txt" || fail "summary: $(cat "$tmp/summary.txt")"

# ---- a CSV of the versions before pending_bytes: the same series, no pending bytes
cut -d, -f1-9,11- "$data/series.csv" >"$tmp/old.csv"
head -1 "$tmp/old.csv" | grep -q ',reserved_bytes,fragmentation_ratio,' || fail "old.csv: $(head -1 "$tmp/old.csv")"
"$vramkit" report --json "$data/series.csv" "$tmp/old.csv" >"$tmp/old.json" 2>"$tmp/old.txt" ||
  fail "report --json of the older CSV: $(cat "$tmp/old.txt")"
python3 - "$tmp/old.json" <<'PY'
import json, sys
now, old = json.load(open(sys.argv[1]))["series"]
assert old["pools"][0]["pending_bytes"] is None, "the older CSV has pending bytes"
assert any(now["pools"][0]["pending_bytes"]), "the CSV has no pending bytes"
now["pools"][0]["pending_bytes"] = None
now["input"] = old["input"]
assert now == old, "the older CSV reads differently"
print("the CSV without pending_bytes reads as the same series without pending bytes")
PY

# ---- a long series: downsampled, its peak kept, the page small
python3 - "$tmp/long.jsonl.gz" <<'PY'
import gzip, sys
with gzip.open(sys.argv[1], "wt") as f:
    for i in range(200000):
        live = 10_000_000 + (i % 1000) * 1000 + (5_000_000_000 if i == 123457 else 0)
        f.write('{"type":"sample","time_s":%.3f,"elapsed_s":%.3f,"iteration":%d,"pools":[{"pool":"p",'
                '"live_bytes":%d,"reserved_bytes":%d,"fragmentation_ratio":0.1,"owners":[{"owner":"cam%02d",'
                '"live_bytes":%d}]}],"gpu":null}\n' % (1764456000 + i * 0.1, i * 0.1, i, live, live + 4096,
                                                       i % 3, live))
PY
start=$(date +%s.%N)
"$vramkit" report "$tmp/long.jsonl.gz" -o "$tmp/long.html" >"$tmp/long.txt"
"$vramkit" report --json "$tmp/long.jsonl.gz" >"$tmp/long.json" 2>/dev/null
python3 - "$tmp/long.json" "$tmp/long.html" "$start" "$(date +%s.%N)" <<'PY'
import json, os, sys
s = json.load(open(sys.argv[1]))["series"][0]
live = s["pools"][0]["live_bytes"]
size = os.path.getsize(sys.argv[2])
secs = (float(sys.argv[4]) - float(sys.argv[3])) / 2
assert s["samples"] == 200000, s["samples"]
assert 1000 <= s["points"] <= 2000, s["points"]
assert s["downsampled"] is True
assert max(live) == 5_000_000_000 + 10_000_000 + 457 * 1000, max(live)
assert min(live) == 10_000_000, min(live)
assert all(a < b for a, b in zip(s["x"], s["x"][1:])), "x not increasing"
assert size < 1_000_000, f"page of {size} bytes"
print(f"200000 samples: {s['points']} points in the page, peak and floor kept, page {size // 1024} KiB, "
      f"{secs:.1f} s a run")
PY
grep -q "200000 samples over 19999.9 s, .* points in the page" \
  "$tmp/long.txt" || fail "long series summary: $(cat "$tmp/long.txt")"

# ---- bad inputs: the file, the line and the problem; nothing written
echo "an older page" >"$tmp/page.html"
bad_input() { # NAME EXPECTED-MESSAGE-REGEX
  local rc=0
  "$vramkit" report "$data/series.jsonl" "$1" -o "$tmp/page.html" >"$tmp/bad.out" 2>"$tmp/bad.err" || rc=$?
  [ "$rc" -eq 1 ] || fail "$1: exit $rc, expected 1"
  grep -Eq "$2" "$tmp/bad.err" || fail "$1: message \"$(cat "$tmp/bad.err")\" does not match /$2/"
  grep -q "nothing written" "$tmp/bad.err" || fail "$1: does not say nothing was written"
  [ "$(cat "$tmp/page.html")" = "an older page" ] || fail "$1: the existing page was changed"
  [ -z "$(ls "$tmp" | grep '\.tmp\.')" ] || fail "$1: a temporary file was left"
  echo "refused: $(head -1 "$tmp/bad.err")"
}
head -c 3000 "$data/snapshot.json" >"$tmp/truncated.json"
bad_input "$tmp/truncated.json" "truncated\.json:[0-9]+:[0-9]+: the JSON ends early \(truncated\?\)"
head -n 7 "$data/series.jsonl" >"$tmp/truncated.jsonl"
head -n 8 "$data/series.jsonl" | tail -1 | head -c 150 >>"$tmp/truncated.jsonl"
bad_input "$tmp/truncated.jsonl" "truncated\.jsonl:8:151: the JSON ends early"
sed '1s/,owner,kind,/,owner_name,kind,/' "$data/series.csv" >"$tmp/columns.csv"
bad_input "$tmp/columns.csv" "columns\.csv:1: column 5 of the header is \"owner_name\", expected \"owner\""
sed '1s/,gpu_total_bytes$//' "$data/series.csv" >"$tmp/short.csv"
bad_input "$tmp/short.csv" "short\.csv:1: the header lacks the column \"gpu_total_bytes\""
sed '1s/,pending_bytes,/,reserved_bytes,/' "$data/series.csv" >"$tmp/twice.csv"
bad_input "$tmp/twice.csv" "twice\.csv:1: column 10 of the header is \"reserved_bytes\" again \(as column 9"
sed '1s/$/,tenure_bytes/' "$data/series.csv" >"$tmp/extra.csv"
bad_input "$tmp/extra.csv" "extra\.csv:1: column 15 of the header is \"tenure_bytes\", not a column"
sed '5s/,[^,]*$//' "$data/series.csv" >"$tmp/row.csv"
bad_input "$tmp/row.csv" "row\.csv:5: 13 fields, expected 14"
sed 's/"size_bytes": 25165824,/"size_bytes": "24M",/' "$data/oom.json" >"$tmp/type.json"
bad_input "$tmp/type.json" "type\.json: request\.size_bytes is the string \"24M\", expected a number"
bad_input "$src/README.md" "README\.md:1: not a report input: .* it starts with \"# vramkit\""
head -c 512 /bin/sh >"$tmp/binary"
bad_input "$tmp/binary" "binary:1: not a report input"
bad_input "$tmp/missing.json" "cannot open $tmp/missing\.json: No such file"
# Several bad inputs: each is reported.
rc=0
"$vramkit" report "$tmp/columns.csv" "$tmp/truncated.json" -o "$tmp/page.html" 2>"$tmp/two.err" || rc=$?
[ "$rc" -eq 1 ] && [ "$(grep -c "^vramkit report: $tmp" "$tmp/two.err")" -eq 2 ] ||
  fail "two bad inputs: exit $rc, $(cat "$tmp/two.err")"
# A page that cannot be written: the reason, and no temporary file.
rc=0
"$vramkit" report "$data/oom.json" -o "$tmp/no/such/dir/page.html" 2>"$tmp/nodir.err" || rc=$?
[ "$rc" -eq 1 ] && grep -q "cannot create a temporary file next to $tmp/no/such/dir/page.html" "$tmp/nodir.err" ||
  fail "unwritable page: exit $rc, $(cat "$tmp/nodir.err")"
# Usage errors exit 2.
for args in "" "$data/oom.json" "$data/oom.json -o $tmp/x.html --json" "--max-points 3 $data/oom.json --json"; do
  rc=0
  # shellcheck disable=SC2086
  "$vramkit" report $args >/dev/null 2>"$tmp/use.err" || rc=$?
  [ "$rc" -eq 2 ] || fail "report $args: exit $rc, expected 2 ($(cat "$tmp/use.err"))"
done

# ---- the page in Chromium
"$vramkit" report --title "vramkit report: inference pool, 3 minutes" \
  "$data/oom.json" "$data/series.jsonl" "$data/series.csv" "$data/snapshot.json" \
  -o "$tmp/report.html" >"$tmp/page.txt"
grep -q "^wrote $tmp/report.html" "$tmp/page.txt" || fail "no 'wrote' line: $(cat "$tmp/page.txt")"
! grep -Eq '<(script|link|img)[^>]* (src|href)=' "$tmp/report.html" || fail "the page refers to other files"
# What the page must show, from the inputs (EXPECT.json of check_page.js).
expect() { # OUT.json TITLE WITH_CSV
python3 - "$data" "$@" <<'PY'
import json, sys
data, out, title, with_csv = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
lines = [json.loads(l) for l in open(f"{data}/series.jsonl")]
samples = [l for l in lines if l["type"] == "sample"]
pool = samples[0]["pools"][0]["pool"]
owners = list(dict.fromkeys(o["owner"] for s in samples for o in s["pools"][0]["owners"]))
kinds = list(dict.fromkeys(k["kind"] for s in samples for k in s["pools"][0]["kinds"]))
series = {"input": "series.jsonl", "points": len(samples), "alerts": sum(l["type"] == "alert" for l in lines),
          "pools": [{"pool": pool, "owners": owners, "kinds": kinds}]}
snap = json.load(open(f"{data}/snapshot.json"))
by = {}
for b in snap["blocks"]:
    key = "free" if b["state"] == "free" else b["state"] + ":" + b["owner"]
    by[key] = by.get(key, 0) + 1
oom = json.load(open(f"{data}/oom.json"))
json.dump({
    "title": title,
    "series": [series] + ([dict(series, input="series.csv", alerts=0)] if with_csv else []),
    "snapshots": [{"blocks": len(snap["blocks"]), "by": by}],
    "ooms": [{"line": oom["diagnosis"]["line"], "cause": oom["diagnosis"]["cause"],
              "owners": [o["owner"] for o in oom["owners"]], "events": len(oom["last_events"]),
              "snapshot_link": oom["snapshot_path"]}],
    "hostile": next(o for o in owners if "<" in o),
}, open(out, "w"))
PY
}
expect "$tmp/expect.json" "vramkit report: inference pool, 3 minutes" 1
command -v node >/dev/null || fail "node is missing: run 'make deps'"
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || fail "chromium is missing: run 'make deps'"
bash "$src/scripts/web_deps.sh" --browser
node "$src/tests/report/check_page.js" "$tmp/report.html" "$tmp/expect.json"
# The README's picture: the same checks on the page of one series, the
# snapshot and the OOM report, and a screenshot of it.
if [ -n "${VRAM_REPORT_SCREENSHOT:-}" ]; then
  title="vramkit report: pool \"inference\", three minutes to an OOM"
  (cd "$data" && "$vramkit" report --title "$title" series.jsonl snapshot.json oom.json \
    -o "$tmp/readme.html" >/dev/null)
  expect "$tmp/expect-readme.json" "$title" 0
  node "$src/tests/report/check_page.js" "$tmp/readme.html" "$tmp/expect-readme.json" \
    --screenshot "$VRAM_REPORT_SCREENSHOT"
fi
echo "report: all checks passed"
