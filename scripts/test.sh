#!/usr/bin/env bash
# scripts/test.sh BUILD FUZZ_SECONDS - every CPU test: the unit, integration
# and CLI tests (CTest) in the normal build, again under ASan+UBSan and under
# TSan, then each libFuzzer target for a bounded time. Needs no GPU.
set -euo pipefail
build=${1:-build}
fuzz_seconds=${2:-60}
jobs=$(nproc 2>/dev/null || echo 2)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

step() { printf '\n=== %s ===\n' "$*"; }

step "models"
# The service's tests read the default models from build/models.
bash scripts/models.sh build/models

step "tests ($build)"
(cd "$build" && ctest --output-on-failure -j "$jobs")

step "ASan + UBSan build"
cmake -S . -B build-asan -DVRAM_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug -DVRAM_CUDA=OFF >/dev/null
cmake --build build-asan -j "$jobs" >/dev/null
# The CLI tests time whole traces against glibc malloc, which means nothing
# under a sanitizer's allocator; the CLI gets a smoke run on a small trace.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
(cd build-asan && VRAM_TEST_QUICK=1 ctest --output-on-failure -j "$jobs" -E "^cli/")
./build-asan/vramkit replay --runs 1 --json tests/data/traces/small.csv.gz >/dev/null
./build-asan/vramkit replay --runs 1 --policy segments tests/data/traces/small.csv >/dev/null
./build-asan/vramkit config --json >/dev/null
./build-asan/vramkit metrics --no-gpu tests/data/traces/small.csv.gz >/dev/null
./build-asan/vramkit report --json tests/data/report/{series.jsonl,series.csv,snapshot.json,oom.json} \
  >/dev/null 2>build-asan/report.err || { cat build-asan/report.err >&2; exit 1; }
VRAM_LOG_LEVEL=error ./build-asan/vramkit soak --iterations 200 \
  --workload replay:tests/data/traces/small.csv.gz >/dev/null 2>build-asan/soak.err \
  || { cat build-asan/soak.err >&2; exit 1; }
oom_dir=$(mktemp -d)   # OOM reports: capture, files and rate limit under ASan
VRAM_LOG_LEVEL=error ./build-asan/vramkit replay --runs 1 --capacity 64M --oom-dir "$oom_dir" \
  data/traces/mobilenet_crops.csv.gz >/dev/null
ls "$oom_dir"/oom-replay-*.json >/dev/null && rm -rf "$oom_dir"
clips=$(mktemp -d)   # the service: files and a synthetic camera, drained on SIGTERM
bash tests/faces/make_clips.sh "$clips" >/dev/null
VRAM_MODEL_DIR=build/models ./build-asan/vramkit run --quiet --workers 2 --batch 4 \
  --input a="$clips/astronaut.mp4" --input b="$clips/faces2.mp4" --input c=synthetic:320x240@30 \
  --frames 20 --jsonl "$clips/out.jsonl" --snapshots "$clips/snap" --every 0.1 >/dev/null \
  2>build-asan/run.err || { cat build-asan/run.err >&2; exit 1; }
[ "$(wc -l <"$clips/out.jsonl")" -eq 60 ] || { echo "vramkit run under ASan: $(wc -l <"$clips/out.jsonl") results, not 60" >&2; exit 1; }
rm -rf "$clips"
# libvram_preload.so inside programs under ASan (its runtime preloaded first).
bash tests/cli/test_trace.sh build-asan/vramkit address "${CC:-cc}" >build-asan/trace.log 2>&1 \
  || { tail -20 build-asan/trace.log >&2; exit 1; }
unset ASAN_OPTIONS UBSAN_OPTIONS

step "TSan build"
cmake -S . -B build-tsan -DVRAM_SANITIZE=thread -DCMAKE_BUILD_TYPE=Debug -DVRAM_CUDA=OFF >/dev/null
cmake --build build-tsan -j "$jobs" >/dev/null
(cd build-tsan && TSAN_OPTIONS=halt_on_error=1 VRAM_TEST_QUICK=1 \
   ctest --output-on-failure -j "$jobs" -R "integration/|unit/|preload/")
bash tests/cli/test_trace.sh build-tsan/vramkit thread "${CC:-cc}" >build-tsan/trace.log 2>&1 \
  || { tail -20 build-tsan/trace.log >&2; exit 1; }

step "fuzzers (${fuzz_seconds}s each)"
CC=clang cmake -S . -B build-fuzz -DVRAM_FUZZ=ON -DVRAM_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug \
  -DVRAM_CUDA=OFF >/dev/null
cmake --build build-fuzz -j "$jobs" >/dev/null
for src in tests/fuzz/fuzz_*.c; do
  name=$(basename "$src" .c)
  corpus=tests/fuzz/corpus/${name#fuzz_}
  work=$(mktemp -d)
  [ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
  echo "fuzz: $name for ${fuzz_seconds}s"
  log=$(mktemp)
  rc=0
  (cd "$work" && "$root/build-fuzz/$name" -max_total_time="$fuzz_seconds" -print_final_stats=1 \
     -timeout=20 -rss_limit_mb=4096 -artifact_prefix="$work/" "$work") >"$log" 2>&1 || rc=$?
  grep -E "^stat::number_of_executed_units|^Done" "$log" || true
  if [ "$rc" -ne 0 ]; then
    tail -60 "$log" >&2
    echo "fuzz: $name failed (exit $rc); the input is in $work" >&2
    exit 1
  fi
  rm -f "$log"
  rm -rf "$work"
done

printf '\nall CPU tests passed\n'
