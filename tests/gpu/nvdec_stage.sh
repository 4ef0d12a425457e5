#!/usr/bin/env bash
# tests/gpu/nvdec_stage.sh BUILD OUT - NVDEC on the GPU, in one stage:
#   1. the NVDEC and GPU letterbox tests (tests/gpu/test_gpu_nvdec.c,
#      test_gpu_letterbox.c), then both under compute-sanitizer memcheck;
#   2. `vramkit run --backend cuda --decode nvdec` on the face clips against
#      the independent reference's faces (tests/faces/compare.py);
#   3. density (bench_density): paced 1080p30 streams, N rising until a
#      stream falls below 29.5 fps or drops more than 0.1 % over the window,
#      vramkit's service (NVDEC) and the usual design (a context, a decoder
#      and an engine per stream), H.264 and HEVC; CUDA graphs on and off at
#      one N; the 24 GiB case;
#   4. a soak: 32 streams, 20,000 frames each, the leak verdict and the
#      memory curve in the report page.
# VRAM_NVDEC_QUICK=1 runs 1, 2 and one step of each design instead of 3 and
# 4: vramkit's service at $VRAM_H264_START H.264 streams for
# $VRAM_DENSITY_SECONDS, the usual design at $VRAM_BASE_START for 15 s.
# VRAM_NVDEC_MEMCHECK=0 leaves compute-sanitizer out. Every step has a time
# limit (SIGINT, then the next step). Clips and models from
# $VRAM_SERVICE_CARRY (.carry/service, made by tests/gpu/carry.sh). Writes
# OUT/summary.md and the runs' files.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
root=$(cd "$(dirname "$0")/../.." && pwd)
carry=${VRAM_SERVICE_CARRY:-$root/.carry/service}
clips=$carry/clips
model=$carry/models/blazeface_back.onnx
mkdir -p "$out"
summary=$out/summary.md
commit=${VRAM_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}
quick=${VRAM_NVDEC_QUICK:-0}
secs=${VRAM_DENSITY_SECONDS:-60}
fail=0
t0=$SECONDS
note() { printf '%s (%d s)\n' "$*" $((SECONDS - t0)) >&2; }
export VRAM_NVDEC_CLIPS=$clips
{
    echo "## NVDEC on the GPU"
    echo
    echo "$(nproc) CPU cores; $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); commit $commit"
    echo
} >"$summary"

# 1. Tests, then under memcheck.
{
    echo "### Tests"
    echo
    echo '```'
} >>"$summary"
for t in test_gpu_nvdec test_gpu_letterbox; do
    [ -x "$build/$t" ] || { echo "$t: not built" >>"$summary"; fail=1; continue; }
    if timeout -s INT "${VRAM_NVDEC_TEST_S:-300}" "$build/$t" >"$out/$t.log" 2>&1; then
        echo "$t: PASS" >>"$summary"
    else
        echo "$t: FAIL" >>"$summary"
        fail=1
    fi
    grep -E "^(\[  (FAILED|ERROR)|[a-zA-Z0-9_]+\.(mp4|avi|mkv)|1080p|after close|[0-9]+ 1080p|letterbox|nvdec |auto |looped|max)" \
        "$out/$t.log" | head -40 >>"$summary"
    note "$t"
    if [ "${VRAM_NVDEC_MEMCHECK:-1}" = 1 ] && command -v compute-sanitizer >/dev/null; then
        if compute-sanitizer --tool memcheck --error-exitcode 3 "$build/$t" \
            >"$out/$t.memcheck.log" 2>&1; then
            echo "$t under compute-sanitizer memcheck: clean ($(grep -c 'ERROR SUMMARY: 0' "$out/$t.memcheck.log") summary)" >>"$summary"
        else
            echo "$t under compute-sanitizer memcheck: FAIL ($(grep 'ERROR SUMMARY' "$out/$t.memcheck.log" | tail -1))" >>"$summary"
            fail=1
        fi
        note "$t memcheck"
    fi
done
echo '```' >>"$summary"
echo >>"$summary"

# 2. Faces with NVDEC against the reference.
{
    echo "### Faces with NVDEC against the independent reference"
    echo
    echo '```'
    bash "$root/tests/gpu/faces_run.sh" "$build/vramkit" "$out" nvdec_faces --decode nvdec \
        --snapshots "$out/snap" --every 1 || fail=1
    python3 - "$out/nvdec_faces.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
for s in d["streams"]:
    m = s["memory"]
    print(f'{s["id"]}: decode {s.get("decode")}, {s["processed"]} frames, '
          f'frames {m["frames_bytes"]/2**20:.1f} MiB, decoder {m["decoder_bytes"]/2**20:.1f} MiB, '
          f'need {m["need_bytes"]/2**20:.1f} MiB, live at the end {m["live_bytes"]}')
PY
    ls "$out/snap" 2>/dev/null | head -3
    echo '```'
    echo
} >>"$summary" 2>&1
note "faces"

bench=$build/bench_density
common=(--model "$model" --warmup 5 --workers "${VRAM_DENSITY_WORKERS:-4}"
        --batch "${VRAM_DENSITY_BATCH:-32}" --out "$out/density.md" --json "$out/density.jsonl"
        --commit "$commit")
density() { # LABEL LIMIT_S ARGS...
    local label=$1 limit=$2
    shift 2
    echo "== $label: $*" >>"$out/density.log"
    timeout -s INT "$limit" "$bench" "$@" "${common[@]}" >>"$out/density.log" 2>&1 ||
        echo "$label: exit $?" >>"$out/density.log"
    note "density $label"
}
if [ "$quick" = 1 ]; then
    n=${VRAM_H264_START:-165}
    density "h264-vramkit-$n" $((secs + 40)) --clip "$clips/cam1080_h264.mp4" --codec-label h264 \
        --design vramkit --start "$n" --max "$n" --seconds "$secs" --graphs 1 --queue 1
    b=${VRAM_BASE_START:-16}
    density "h264-baseline-$b" 60 --clip "$clips/cam1080_h264.mp4" --codec-label h264 \
        --design baseline --start "$b" --max "$b" --seconds 15
else
    h264=$clips/cam1080_h264.mp4
    hevc=$clips/cam1080_hevc.mp4
    density h264-vramkit 1500 --clip "$h264" --codec-label h264 --design vramkit --graphs 1 --queue 1 \
        --start "${VRAM_H264_START:-150}" --step "${VRAM_H264_STEP:-15}" --max 400 \
        --refine 5 --seconds "$secs"
    density hevc-vramkit 1500 --clip "$hevc" --codec-label hevc --design vramkit --graphs 1 --queue 1 \
        --start "${VRAM_HEVC_START:-230}" --step "${VRAM_HEVC_STEP:-20}" --max 600 \
        --refine 5 --seconds "$secs"
    density h264-baseline 1500 --clip "$h264" --codec-label h264 --design baseline \
        --start "${VRAM_BASE_START:-16}" --step "${VRAM_BASE_STEP:-16}" --max 256 \
        --refine 4 --seconds "$secs"
    for g in 0 1; do
        density "graphs-$g" 120 --clip "$h264" --codec-label "h264 graphs $g" --design vramkit \
            --graphs "$g" --start "${VRAM_GRAPHS_N:-128}" --max "${VRAM_GRAPHS_N:-128}" \
            --seconds 20
    done
    density budget-24G 900 --clip "$h264" --codec-label h264 --design both --budget-case 24G \
        --budget-max 1024
    # 4. The soak: 32 streams of 20,000 frames (files looping, as fast as
    # they go), sampled every 100 frames of each stream.
    urls=$(for i in $(seq 32); do printf '%s,' "$h264"; done)
    VRAM_MODEL_DIR=$carry/models "$build/vramkit" soak --workload "run:${urls%,}" \
        --executor cuda --decode nvdec --workers 4 --batch 32 --frames-per-iteration 100 \
        --iterations 200 --html "$out/soak.html" --jsonl "$out/soak.jsonl" --json \
        >"$out/soak.json" 2>"$out/soak.err"
    echo "soak exit $?" >>"$out/density.log"
    note "soak"
fi
{
    echo "### Density"
    echo
    cat "$out/density.md" 2>/dev/null || echo "(no table: see density.log)"
    echo
    echo '```'
    tail -n 30 "$out/density.log"
    echo '```'
    if [ -s "$out/soak.json" ]; then
        echo
        echo "### Soak (32 streams x 20,000 frames)"
        echo
        echo '```'
        python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d.get("verdict", d), indent=1)[:3000])' "$out/soak.json"
        tail -3 "$out/soak.err"
        echo '```'
    fi
} >>"$summary" 2>&1
exit $fail
