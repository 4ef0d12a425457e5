#!/usr/bin/env bash
# tests/cli/test_cli.sh VRAMKIT - the command line behaves the same everywhere:
# --help and -h succeed on every command and subcommand and print its usage;
# the top-level help lists every command and --version; --json works on every
# command, its output parses (one object, or one per line), and its keys are
# snake_case and name a size the same way in every command (never both "x" and
# "x_bytes"); usage errors exit 2 and name the flag, a misspelt flag or command
# gets "did you mean"; a failure that is not a usage error exits 1.
set -euo pipefail
vramkit=$1
src=${VRAM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
small=$src/tests/data/traces/small.csv.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export VRAM_MONITOR_GPU=none VRAM_METRICS_GPU=none

# expect STATUS NAME CMD...: runs CMD, stdout in $tmp/NAME.out, stderr in .err
expect() {
  local want=$1 name=$2 rc=0
  shift 2
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
  [ "$rc" -eq "$want" ] || fail "$name: $* exited $rc, expected $want: $(cat "$tmp/$name.err")"
}

# 1. Help everywhere.
commands="replay config ctxcost soak model report metrics trace"
subcommands="model:info model:run model:sweep"
for c in $commands $subcommands; do
  words=${c/:/ }
  for flag in --help -h; do
    # shellcheck disable=SC2086
    expect 0 "help_${c/:/_}$flag" "$vramkit" $words $flag
    grep -q "^usage: vramkit $words" "$tmp/help_${c/:/_}$flag.out" \
      || fail "$words $flag: no usage line: $(head -3 "$tmp/help_${c/:/_}$flag.out")"
    # model is a group: its subcommands take the options
    [ "$c" = model ] || grep -q -- "--json" "$tmp/help_${c/:/_}$flag.out" \
      || fail "$words $flag does not list --json"
  done
done
for flag in --help -h help; do
  expect 0 "top$flag" "$vramkit" $flag
  for c in $commands; do
    grep -q "^  $c " "$tmp/top$flag.out" || fail "top-level $flag does not list $c"
  done
  grep -q -- "--version" "$tmp/top$flag.out" || fail "top-level $flag does not list --version"
done
expect 2 bare "$vramkit"
grep -q "^usage: vramkit COMMAND" "$tmp/bare.err" || fail "no usage without a command"

# 2. The version, as text and JSON.
expect 0 version "$vramkit" --version
grep -Eq '^vramkit [0-9]+\.[0-9]+\.[0-9]+' "$tmp/version.out" || fail "version: $(cat "$tmp/version.out")"
expect 0 version_json "$vramkit" --version --json
python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["version"] and d["version_number"] > 0' \
  <"$tmp/version_json.out" || fail "version JSON: $(cat "$tmp/version_json.out")"
expect 2 version_extra "$vramkit" --version --xml
grep -q 'takes only --json' "$tmp/version_extra.err" || fail "$(cat "$tmp/version_extra.err")"

# 3. --json on every command: parses, and the keys agree.
refroot=${VRAM_ONNX_REF:-$src/build/onnxref}
bash "$src/scripts/onnx_ref.sh" --refs "$refroot" >"$tmp/onnx_ref.log" 2>&1 || {
  tail -20 "$tmp/onnx_ref.log"
  fail "could not make the reference models"
}
cnn=$refroot/models/mixed_small_cnn.onnx
json_runs=(
  "replay|$vramkit replay --json --runs 1 $small"
  "config|$vramkit config --json"
  "soak|$vramkit soak --json --workload replay:$small --iterations 40"
  "model_info|$vramkit model info --json $cnn"
  "model_run|$vramkit model run --json --output-dir $tmp/run $cnn"
  "model_sweep|$vramkit model sweep --json --workspace 0,1M $cnn"
  "report|$vramkit report --json $src/tests/data/report/snapshot.json $src/tests/data/report/series.csv"
  "metrics|$vramkit metrics --json $small"
)
for entry in "${json_runs[@]}"; do
  name=${entry%%|*}
  # shellcheck disable=SC2086
  expect 0 "json_$name" ${entry#*|}
  [ -s "$tmp/json_$name.out" ] || fail "$name --json printed nothing"
done
python3 - "$tmp" <<'EOF' || fail "JSON outputs disagree (above)"
import json, os, re, sys
tmp = sys.argv[1]
keys = {}          # key -> the commands using it
numeric = set()    # keys holding a number somewhere
def walk(v, cmd, names=False):
    if isinstance(v, dict):
        for k, x in v.items():
            # config's keys are option names, a model's operators are op types
            if not names:
                keys.setdefault(k, set()).add(cmd)
                if isinstance(x, (int, float)) and not isinstance(x, bool):
                    numeric.add(k)
            walk(x, cmd, k == "operators")
    elif isinstance(v, list):
        for x in v:
            walk(x, cmd)
bad = []
for f in sorted(os.listdir(tmp)):
    if not (f.startswith("json_") and f.endswith(".out")):
        continue
    cmd = f[5:-4]
    text = open(os.path.join(tmp, f)).read()
    try:
        docs = [json.loads(text)]
    except ValueError:
        try:
            docs = [json.loads(l) for l in text.splitlines() if l.strip()]
        except ValueError as e:
            bad.append(f"{cmd}: not JSON nor JSON Lines: {e}")
            continue
    for d in docs:
        walk(d, cmd, cmd == "config")
for k, cmds in sorted(keys.items()):
    if not re.fullmatch(r"[a-z][a-z0-9_]*", k):
        bad.append(f"key {k!r} ({', '.join(sorted(cmds))}) is not snake_case")
    if k + "_bytes" in keys and k in numeric:
        bad.append(f"{k!r} ({', '.join(sorted(cmds))}) and {k + '_bytes'!r} "
                   f"({', '.join(sorted(keys[k + '_bytes']))}) name one size two ways")
for b in bad:
    print(b)
print(f"{len(keys)} keys in {len({c for s in keys.values() for c in s})} commands")
sys.exit(1 if bad else 0)
EOF
# ctxcost needs a GPU: with one its JSON is checked by tests/gpu; without, it
# fails (1), not a usage error, and says why.
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  expect 1 ctxcost_nogpu "$vramkit" ctxcost --json
  [ -s "$tmp/ctxcost_nogpu.err" ] || fail "ctxcost without a GPU says nothing"
fi

# 4. Usage errors: exit 2, naming the flag; misspellings get a suggestion.
usage_case() { # NAME PATTERN CMD...
  local name=$1 pattern=$2
  shift 2
  expect 2 "$name" "$@"
  grep -q -- "$pattern" "$tmp/$name.err" || fail "$name: wanted \"$pattern\" in: $(cat "$tmp/$name.err")"
}
usage_case gran '--granularity: 3M is not a power of two' "$vramkit" replay --granularity 3M "$small"
usage_case cap '--capacity: size "12X"' "$vramkit" replay --capacity 12X "$small"
usage_case misspelt 'did you mean --granularity?' "$vramkit" replay --granularty 2M "$small"
usage_case misspelt_sub 'did you mean --workspace' "$vramkit" model info --worksapce 1M "$cnn"
usage_case missing_value '--runs needs a value' "$vramkit" replay "$small" --runs
usage_case bad_choice '--policy' "$vramkit" replay --policy bestest "$small"
usage_case no_trace 'no trace given' "$vramkit" replay
usage_case sub_unknown 'did you mean info?' "$vramkit" model inf "$cnn"
usage_case cmd_unknown 'did you mean replay?' "$vramkit" replai
usage_case sweep_limits "--workspace" "$vramkit" model sweep --workspace 1Q "$cnn"
usage_case report_points '--max-points' "$vramkit" report --max-points x "$src/tests/data/report/snapshot.json"
usage_case metrics_port '--port' "$vramkit" metrics --port 99999 "$small"
usage_case config_extra 'unexpected argument' "$vramkit" config extra
# every usage error points to that command's help, which works (see 1)
grep -q '(vramkit model sweep --help)' "$tmp/sweep_limits.err" || fail "sweep error has no help pointer"

# 5. Failures that are not usage errors exit 1.
expect 1 missing_trace "$vramkit" replay "$tmp/none.csv"
grep -q "none.csv" "$tmp/missing_trace.err" || fail "missing trace not named"
printf '' >"$tmp/empty.onnx"
expect 1 empty_model "$vramkit" model info "$tmp/empty.onnx"
grep -q "empty" "$tmp/empty_model.err" || fail "empty model: $(cat "$tmp/empty_model.err")"
echo "cli: help, JSON, exit codes and messages agree across every command"
