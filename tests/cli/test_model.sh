#!/usr/bin/env bash
# tests/cli/test_model.sh VRAMKIT - the engine against ONNX Runtime: every
# generated model (one or more per supported operator, and mixed networks)
# and both BlazeFace models run through `vramkit model run` on ONNX
# Runtime's inputs, and their outputs match within 1e-4 relative L2; the
# random-input rule gives the inputs ONNX Runtime drew; `model info` plans
# every arena within 1.05x its lower bound; bad input gets a clear error.
# The references come from scripts/onnx_ref.sh --refs (npm onnxruntime-node,
# Debian's python3-onnx), made once into build/onnxref.
set -euo pipefail
vramkit=$1
src=${VRAM_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
refroot=${VRAM_ONNX_REF:-$src/build/onnxref}
bash "$src/scripts/onnx_ref.sh" --refs "$refroot" >/tmp/vram_onnx_ref.log 2>&1 || {
    tail -20 /tmp/vram_onnx_ref.log
    echo "FAIL: setting up the ONNX Runtime references"
    exit 1
}
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0
models=()
while IFS= read -r line; do models+=("$line"); done < <(
    $py -c "
import json, sys
m = json.load(open(sys.argv[1]))
for x in m['models']:
    print(x['name'], x['file'], x.get('dims', {}).get('N', '-'))
" "$refroot/models/manifest.json")
for bf in "$refroot"/blazeface/*.onnx; do
    models+=("$(basename "$bf" .onnx) ../blazeface/$(basename "$bf") -")
done

# batch_arg N: "--batch N" for a model whose batch is symbolic, nothing for a
# fixed one ("-"), which keeps its own batch and would be warned about.
batch_arg() { [ "$1" = - ] || echo "--batch $1"; }

n=0
for entry in "${models[@]}"; do
    read -r name file batch <<<"$entry"
    ref=$refroot/ref/$name
    args=()
    for f in "$ref"/input_*.npy; do
        [ -e "$f" ] || continue
        iname=$($py -c "
import json, sys
m = json.load(open(sys.argv[1]))
for i in m['inputs']:
    if i['file'] == sys.argv[2]: print(i['name'])
" "$ref/ort_run.json" "$(basename "$f")")
        args+=(--input "$iname=$f")
    done
    out=$work/$name
    if ! "$vramkit" model run "$refroot/models/$file" $(batch_arg "$batch") --output-dir "$out" \
        "${args[@]}" >"$work/run.log" 2>&1; then
        echo "FAIL $name: vramkit model run failed:"
        cat "$work/run.log"
        fail=1
        continue
    fi
    if ! $py "$src/tests/onnx/compare.py" "$ref" "$out" >"$work/cmp.log"; then
        echo "FAIL $name: outputs differ from ONNX Runtime's"
        cat "$work/cmp.log"
        fail=1
        continue
    fi
    n=$((n + 1))
done
echo "outputs match ONNX Runtime (1e-4 relative L2) on $n of ${#models[@]} models"

# The random-input rule: no --input, the same seed, the same outputs.
for name in mixed_small_cnn face_detection_front_128x128_barracuda; do
    file=$name.onnx
    [ -e "$refroot/models/$file" ] || file=../blazeface/$name.onnx
    "$vramkit" model run "$refroot/models/$file" --seed 1 --output-dir "$work/rand_$name" >/dev/null
    $py "$src/tests/onnx/compare.py" "$refroot/ref/$name" "$work/rand_$name" >/dev/null || {
        echo "FAIL $name: seeded random inputs differ from ONNX Runtime's rule"
        fail=1
    }
done

# Every arena within 1.05x the most bytes live at one step.
worst=$(for entry in "${models[@]}"; do
    read -r name file batch <<<"$entry"
    # shellcheck disable=SC2046
    "$vramkit" model info "$refroot/models/$file" $(batch_arg "$batch") --json
done | $py -c "
import json, sys
worst = (0, '')
for line in sys.stdin:
    d = json.loads(line)
    r = d['memory']['activations_over_lower_bound']
    worst = max(worst, (r, d['model']))
print('%.4f %s' % worst)
")
echo "largest arena over its lower bound: $worst"
$py -c "import sys; sys.exit(0 if float(sys.argv[1]) <= 1.05 else 1)" "${worst%% *}" || {
    echo "FAIL: an arena exceeds 1.05x its lower bound"
    fail=1
}

# The workspace sweep: one row per limit, the same outputs at every limit,
# more workspace at larger limits.
"$vramkit" model sweep "$refroot/models/mixed_decoder_convtranspose_resize_concat.onnx" \
    --workspace 0,1K,256K --runs 2 >"$work/sweep.txt" || {
    echo "FAIL: model sweep"
    cat "$work/sweep.txt"
    fail=1
}
$py - "$work/sweep.txt" <<'PY' || fail=1
import sys
rows = [l.split() for l in open(sys.argv[1]) if l[0].isdigit()]
ws = [int(r[2]) for r in rows]
# (Resize's tables are needed at every limit; the convolutions' tiles grow.)
ok = len(rows) == 3 and ws[0] <= ws[1] <= ws[2] and ws[2] > ws[0]
print("sweep: workspaces %s bytes" % ws if ok else "FAIL: sweep rows %s" % rows)
sys.exit(0 if ok else 1)
PY

# --json: one object on stdout with the memory, the outputs written and the
# latency percentiles, in order.
"$vramkit" model run "$refroot/models/mixed_small_cnn.onnx" --output-dir "$work/json" \
    --bench 5 --json >"$work/run.json" || { echo "FAIL: model run --json"; fail=1; }
$py - "$work/run.json" "$work/json" <<'PY' || fail=1
import json, os, sys
d = json.load(open(sys.argv[1]))
l = d.get("latency_ms", {})
ok = (d["executor"] == "cpu" and d["batch"] == 1 and not d["graph"] and not d["tf32"]
      and d["memory"]["activations_bytes"] > 0 and d["first_run_ms"] > 0
      and l.get("iterations") == 5 and 0 < l["min"] <= l["p50"] <= l["p90"] <= l["max"]
      and all(os.path.exists(o["file"]) for o in d["outputs"]) and len(d["outputs"]) >= 1)
print("run --json: p50 %.3f ms" % l["p50"] if ok else "FAIL: run --json gave %s" % d)
sys.exit(0 if ok else 1)
PY

# Bad input: a clear error, non-zero status.
expect_error() { # WHAT PATTERN CMD...
    local what=$1 pattern=$2
    shift 2
    local status=0
    "$@" >"$work/err.log" 2>&1 || status=$?
    if [ $status -eq 0 ] || ! grep -q -- "$pattern" "$work/err.log"; then
        echo "FAIL $what: status $status, output:"
        cat "$work/err.log"
        fail=1
    fi
}
cnn=$refroot/models/mixed_small_cnn.onnx
expect_error "missing model" "cannot open model" "$vramkit" model info "$work/none.onnx"
head -c 300 "$cnn" >"$work/cut.onnx"
expect_error "truncated model" "cut.onnx" "$vramkit" model info "$work/cut.onnx"
printf 'not a model at all' >"$work/junk.onnx"
expect_error "garbage model" "junk.onnx" "$vramkit" model run "$work/junk.onnx"
expect_error "bad --input" "NAME=FILE.npy" "$vramkit" model run "$cnn" --input oops
expect_error "unknown input" "no input named 'nope'" "$vramkit" model run "$cnn" \
    --input "nope=$refroot/ref/mixed_small_cnn/input_image.npy" --output-dir "$work/x"
expect_error "wrong input shape" "takes float" "$vramkit" model run "$cnn" --output-dir "$work/x" \
    --input "image=$refroot/ref/relu/input_X.npy"
expect_error "bad batch" "--batch: 0 is outside 1" "$vramkit" model info "$cnn" --batch 0
expect_error "unknown backend" '--backend: "tpu" is not one of cpu|cuda' "$vramkit" model run "$cnn" --backend tpu
expect_error "graph without cuda" "--graph is for the cuda backend" "$vramkit" model run "$cnn" --graph
expect_error "tf32 without cuda" "--tf32 is for the cuda backend" "$vramkit" model run "$cnn" --tf32
expect_error "bad workspace" '--workspace: size "lots" is not a number' "$vramkit" model run "$cnn" --workspace lots
expect_error "bad workspace list" '--workspace: size "lots" is not a number' "$vramkit" model sweep "$cnn" --workspace 0,lots
printf '' >"$work/empty.onnx"
expect_error "empty model" "is empty (0 bytes)" "$vramkit" model info "$work/empty.onnx"
"$vramkit" model info "$cnn" --batch 4 >"$work/fixed.out" 2>"$work/fixed.err" \
    && grep -q "has a fixed batch of 1 (its inputs say so): --batch 4 does not change it" \
        "$work/fixed.err" && grep -q "^batch      1$" "$work/fixed.out" \
    || { echo "FAIL fixed batch: $(cat "$work/fixed.out" "$work/fixed.err")"; fail=1; }
"$vramkit" model info "$cnn" --batch 4 --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["batch"] == 1 and d["batch_symbolic"] is False, d' || { echo "FAIL fixed batch JSON"; fail=1; }
expect_error "unknown subcommand" "unknown subcommand" "$vramkit" model compile "$cnn"
expect_error "misspelt subcommand" "did you mean sweep" "$vramkit" model swep "$cnn"
expect_error "unsupported operator" "unsupported operator" "$vramkit" model info \
    "$refroot/models/unsupported_op.onnx"
# ort_run.js --bench: the timed runs' latency in ort_run.json, with every
# graph optimization under --optimize; bad counts and the manifest form refused.
ORT_PREFIX=$refroot node "$src/tools/onnx/ort_run.js" "$cnn" "$work/ob" --bench 3 --optimize \
    >/dev/null 2>"$work/ob.err" && python3 - "$work/ob/ort_run.json" <<'PY' || { echo "FAIL ort_run --bench: $(cat "$work/ob.err")"; fail=1; }
import json, sys
r = json.load(open(sys.argv[1]))
b = r["bench_ms"]
assert r["graph_optimization_level"] == "all" and r["intra_op_threads"] == 1, r
assert b["runs"] == 3 and 0 < b["min"] <= b["median"] <= b["p90"], b
PY
expect_error "ort_run bad --bench" "--bench wants a count from 1 to 100000" \
    env ORT_PREFIX="$refroot" node "$src/tools/onnx/ort_run.js" "$cnn" "$work/ob" --bench 0
expect_error "ort_run --bench with a manifest" "--manifest takes neither --bench nor --optimize" \
    env ORT_PREFIX="$refroot" node "$src/tools/onnx/ort_run.js" --manifest \
    "$refroot/models/manifest.json" "$work/ob" --bench 2
[ $fail -eq 0 ] && echo "all model checks passed"
exit $fail
