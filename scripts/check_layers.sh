#!/usr/bin/env bash
# scripts/check_layers.sh - the layering of vramkit, checked two ways:
#
#  1. includes (--src ROOT, the source tree): a file may include the public
#     headers of its own library and of the ones below it, its own layer's
#     internal headers, and of core's internals only the helper kit
#     (base/*.h) - never a header of a layer above, nor another layer's
#     internals. Tools and benchmarks include public headers and tools/
#     only.
#  2. symbols (--lib DIR, where the shared libraries are): every vram_
#     symbol a library leaves undefined is exported by a library below it,
#     and every symbol a library exports is a public vram_ name (not vram__).
#
#     scripts/check_layers.sh [--src ROOT] [--lib DIR] [--quiet]
#
# Prints each violation with its file (or library), the reference and why,
# and exits 1 if there is one; 0 and a summary line otherwise.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
src=""
lib=""
quiet=0
while [ $# -gt 0 ]; do
  case "$1" in
    --src) src=$2; shift ;;
    --lib) lib=$2; shift ;;
    --quiet) quiet=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "check_layers: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$src" ] || [ -n "$lib" ] || src=$root

bad=0
fail() { echo "layering: $*"; bad=1; }

# The libraries bottom-up, and the public headers each one declares.
layers=(core observe engine service)
declare -A public=(
  [core]="api.h version.h types.h error.h config.h log.h device.h nvml.h backend.h pool.h stats.h listener.h trace.h torch.h cuda_table.h"
  [observe]="monitor.h metrics.h oom.h report.h"
  [engine]="engine.h npy.h"
  [service]="video.h blazeface.h service.h fleet.h"
)
# Where a library's sources are (under src/), and its own internal folders
# (relative to src/, or src/core/ for core's).
declare -A folders=([core]="core" [observe]="observe" [engine]="engine" [service]="video pipeline")
declare -A internal=(
  [core]="base backend mem gpu nogpu"
  [observe]="observe"
  [engine]="engine"
  [service]="video pipeline"
)
# What each layer may see: itself and what is below it.
declare -A below=([core]="core" [observe]="core observe" [engine]="core engine"
                  [service]="core observe engine service")
# Inside the service library, src/video is below src/pipeline.
declare -A folder_above=([video]="pipeline")

header_owner() { # a public header's library, or "" for none
  local h=$1 l
  for l in "${layers[@]}"; do
    case " ${public[$l]} " in *" $h "*) echo "$l"; return ;; esac
  done
}

folder_of() { # the folder under src/ a file is in ("" for tools)
  local rel=${1#"$src"/src/}
  [ "$rel" = "$1" ] && return
  echo "${rel%%/*}"
}

check_file() { # check_file FILE LAYER (LAYER "tools": public headers only)
  local f=$1 layer=$2 line inc owner top
  while IFS= read -r line; do
    inc=${line#*\"}
    inc=${inc%%\"*}
    case "$inc" in
      vramkit.h)
        [ "$layer" = tools ] || fail "$f includes vramkit.h, which declares every library: name the headers of $layer and below" ;;
      vramkit/*)
        owner=$(header_owner "${inc#vramkit/}")
        if [ -z "$owner" ]; then
          fail "$f includes $inc, which is not a public header"
        elif [ "$layer" != tools ] && [[ " ${below[$layer]} " != *" $owner "* ]]; then
          fail "$f ($layer) includes $inc of libvramkit-$owner, a layer above it"
        fi ;;
      */*)
        top=${inc%%/*}
        if [ "$layer" = tools ]; then
          case "$top" in
            common|replay|ctxcost|vramkit) ;;
            *) fail "$f (tools) includes $inc, an internal header of the libraries: tools use the public API" ;;
          esac
        elif [[ " ${internal[$layer]} " == *" $top "* ]]; then
          local here
          here=$(folder_of "$f")
          if [ -n "$here" ] && [[ " ${folder_above[$here]:-} " == *" $top "* ]]; then
            fail "$f (src/$here) includes $inc of src/$top, a folder above it"
          fi
        elif [ "$layer" = engine ] && { [ "$top" = cpu ] || [ "$top" = cuda ]; }; then
          : # the engine's executors, under src/engine
        elif [ "$top" = base ]; then
          : # core's helper kit, compiled into every library
        else
          local who=""
          for owner in "${layers[@]}"; do
            [[ " ${internal[$owner]} " == *" $top "* ]] && who=$owner
          done
          if [ -n "$who" ] && [[ " ${below[$layer]} " != *" $who "* ]]; then
            fail "$f ($layer) includes $inc, internal to libvramkit-$who above it"
          elif [ -n "$who" ]; then
            fail "$f ($layer) includes $inc, internal to libvramkit-$who (only base/*.h is shared)"
          fi
        fi ;;
    esac
  done < <(grep -h '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" || true)
}

files=0
if [ -n "$src" ]; then
  for layer in "${layers[@]}"; do
    for folder in ${folders[$layer]}; do
      dir=$src/src/$folder
      [ -d "$dir" ] || continue
      while IFS= read -r f; do
        check_file "$f" "$layer"
        files=$((files + 1))
      done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) | sort)
    done
  done
  for dir in "$src/tools" "$src/bench"; do
    [ -d "$dir" ] || continue
    while IFS= read -r f; do
      check_file "$f" tools
      files=$((files + 1))
    done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' \) -not -path '*/node_modules/*' | sort)
  done
fi

libs=0
if [ -n "$lib" ]; then
  command -v nm >/dev/null || { echo "check_layers: nm is missing (binutils)" >&2; exit 2; }
  declare -A exports=()
  for layer in "${layers[@]}"; do
    so=$lib/libvramkit-$layer.so
    if [ ! -e "$so" ]; then
      fail "$so is missing"
      continue
    fi
    libs=$((libs + 1))
    exports[$layer]=$(nm -D --defined-only "$so" | awk '{print $3}' | sort -u)
    while IFS= read -r sym; do
      [ -n "$sym" ] || continue
      fail "libvramkit-$layer exports $sym, which is not a public vram_ name"
    done < <(printf '%s\n' "${exports[$layer]}" | grep -v '^vram_[a-z0-9]' || true)
  done
  for layer in "${layers[@]}"; do
    so=$lib/libvramkit-$layer.so
    [ -e "$so" ] || continue
    while IFS= read -r sym; do
      [ -n "$sym" ] || continue
      found=""
      for l in ${below[$layer]}; do
        [ "$l" = "$layer" ] && continue
        # a here-string, not a pipe: grep -q leaving early would make
        # printf fail with SIGPIPE, and pipefail the match
        grep -qxF -- "$sym" <<<"${exports[$l]:-}" && found=$l
      done
      if [ -z "$found" ]; then
        who=""
        for l in "${layers[@]}"; do
          grep -qxF -- "$sym" <<<"${exports[$l]:-}" && who=$l
        done
        if [ -n "$who" ]; then
          fail "libvramkit-$layer references $sym of libvramkit-$who, a layer above it"
        else
          fail "libvramkit-$layer references $sym, which no library below it exports"
        fi
      fi
    done < <(nm -D --undefined-only "$so" | awk '{print $2}' | grep '^vram_' | sort -u || true)
  done
fi

if [ $bad -ne 0 ]; then
  exit 1
fi
if [ $quiet -eq 0 ]; then
  msg="layering: ok"
  [ -n "$src" ] && msg="$msg; $files source files include only their own layer and the ones below"
  if [ -n "$lib" ]; then
    counts=""
    for layer in "${layers[@]}"; do
      n=$(printf '%s\n' "${exports[$layer]:-}" | grep -c . || true)
      counts="$counts libvramkit-$layer $n,"
    done
    msg="$msg; exported vram_ symbols:${counts%,}; each library's vram_ references resolve below it"
  fi
  echo "$msg"
fi
