#!/usr/bin/env bash
# tests/check/test_readme.sh SOURCE BUILD - the documentation says what is
# true of the tree: the README's C example (its first ```c block) compiles
# with warnings as errors against the public headers, links against the
# built libvramkit-core, runs, exits 0 and prints what it says it prints;
# every relative link of README.md and docs/*.md ([text](path), images
# included) names a file or directory that exists, and a link's #anchor a
# heading of the page it points to; and the README stays a front door of
# at most 250 lines. Any of these breaking fails the test.
set -euo pipefail
src=${1:?source dir}
build=${2:?build dir}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
readme=$src/README.md
[ -f "$readme" ] || fail "no README.md in $src"

# 1. The README is short.
lines=$(wc -l <"$readme")
[ "$lines" -le 250 ] || fail "README.md has $lines lines, more than 250: move the detail to docs/"
echo "README.md: $lines lines"

# 2. The C example: extracted exactly as written, built as a user would,
# against this build's core library.
awk '!done && /^```c[[:space:]]*$/ { inb = 1; next }
     inb && /^```/ { inb = 0; done = 1; next }
     inb { print }' "$readme" >"$tmp/example.c"
[ -s "$tmp/example.c" ] || fail "README.md has no \`\`\`c block"
lib=$build/libvramkit-core.so
[ -e "$lib" ] || fail "$lib is missing: build the tree first"
# A sanitized build's libraries need the sanitizer's runtime in the program
# too, from the same compiler.
cache=$build/CMakeCache.txt
sanitize=$(sed -n 's/^VRAM_SANITIZE:[A-Z]*=//p' "$cache" 2>/dev/null || true)
cc=cc
san_flags=()
case "$sanitize" in
  "") ;;
  address) san_flags=(-fsanitize=address,undefined -fno-omit-frame-pointer) ;;
  thread) san_flags=(-fsanitize=thread) ;;
  *) fail "unknown VRAM_SANITIZE=$sanitize in $cache" ;;
esac
if [ -n "$sanitize" ]; then
  cc=$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$cache")
  [ -n "$cc" ] || cc=cc
fi
if ! "$cc" -std=c11 -Wall -Wextra -Werror "${san_flags[@]}" -I "$src/include" -I "$build/gen/include" \
     "$tmp/example.c" -o "$tmp/example" -L "$build" -lvramkit-core -Wl,-rpath,"$build" \
     2>"$tmp/cc.log"; then
  cat "$tmp/cc.log" >&2
  fail "the README's C example does not compile"
fi
rc=0
(cd "$tmp" && ./example) >"$tmp/out.txt" 2>"$tmp/err.txt" || rc=$?
if [ "$rc" -ne 0 ]; then
  cat "$tmp/out.txt" "$tmp/err.txt" >&2
  fail "the README's C example exited with status $rc"
fi
for want in 'refused: budget of owner "cam07" exceeded: requested 24.0 MiB, live 240.0 MiB of 256.0 MiB' \
            'pool "inference" (policy vmm, backend host)'; do
  grep -qF -- "$want" "$tmp/out.txt" || { cat "$tmp/out.txt" >&2; fail "the example did not print: $want"; }
  # What the README shows of the output is what the example prints.
  grep -qF -- "$want" "$readme" || fail "README.md no longer shows the example's line: $want"
done
echo "README example: compiles, runs, prints the refusal and the statistics"

# 3. Links. Code (fenced blocks and `spans`) is left out: a[i](x) there is
# not a link.
slug() { # a heading's anchor as GitHub makes it
  tr '[:upper:]' '[:lower:]' | sed -e 's/`//g' -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}
anchors() { # the anchors of a markdown file
  awk '/^```/ { code = !code; next } !code && /^#+ / { sub(/^#+ +/, ""); print }' "$1" | slug
}
checked=0
for page in "$readme" "$src"/docs/*.md; do
  [ -f "$page" ] || continue
  dir=$(dirname "$page")
  name=${page#"$src"/}
  while IFS= read -r target; do
    [ -n "$target" ] || continue
    case "$target" in
      *://* | mailto:*) continue ;;
    esac
    path=${target%%#*}
    anchor=
    [ "$path" != "$target" ] && anchor=${target#*#}
    if [ -z "$path" ]; then
      file=$page
    else
      file=$dir/$path
      [ -e "$file" ] || fail "$name links to $target, which does not exist"
    fi
    if [ -n "$anchor" ]; then
      [ -f "$file" ] && [[ $file == *.md ]] || fail "$name links to $target: an anchor in a file that is not markdown"
      anchors "$file" | grep -qxF -- "$anchor" \
        || fail "$name links to $target: no heading with that anchor in ${file#"$src"/}"
    fi
    checked=$((checked + 1))
  done < <(awk '/^```/ { code = !code; next } !code' "$page" | sed 's/`[^`]*`//g' \
           | grep -o '\]([^)]*)' | sed -e 's/^](//' -e 's/)$//' -e 's/[[:space:]].*//' || true)
done
[ "$checked" -gt 0 ] || fail "no links found in README.md and docs/*.md"
echo "links: $checked relative links in README.md and docs/*.md, all found"
echo "readme check: ok"
