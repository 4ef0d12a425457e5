#!/usr/bin/env bash
# scripts/man_page.sh VRAMKIT OUT - write the vramkit(1) man page to OUT from
# the CLI's own help: the top-level help, each command's and subcommand's
# --help (description paragraphs and option lists) and `vramkit config
# --json` (every VRAM_* variable with its default and meaning), so that the
# page says what the binary does. Needs bash and awk only (it runs at build
# time).
set -euo pipefail
vramkit=$1
out=$2
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

# Defaults, not this shell's settings: no VRAM_* variable reaches the CLI.
run() { env -u VRAM_LOG_LEVEL $(env | sed -n 's/^\(VRAM_[A-Z0-9_]*\)=.*/-u \1/p') "$vramkit" "$@"; }

version=$(run --version | awk '{print $2}')

# help_to_roff TITLE: a command's --help on stdin as one .SS section:
# "usage:" becomes the synopsis, paragraphs become .PP, "options:" lines
# become .TP entries, other indented blocks stay as they are (.nf).
help_to_roff() {
  awk -v title="$1" '
    function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); sub(/^[.\x27]/, "\\\\&&", s); return s }
    function flush_para() { if (para != "") { print ".PP"; print esc(para); para = "" } }
    function flush_opt() { if (opt != "") { print ".TP"; print ".B " esc(opt); print esc(ohelp); opt = ""; ohelp = "" } }
    BEGIN { print ".SS " title; mode = "text" }
    /^usage: / { sub(/^usage: /, ""); print ".PP"; print ".B " esc($0); next }
    /^       vramkit / { sub(/^ +/, ""); print ".br"; print ".B " esc($0); next }
    /^options:$/ { flush_para(); mode = "opts"; next }
    /^[A-Z][A-Za-z ()-]*:$/ && mode == "text" { flush_para(); print ".PP"; print esc($0); mode = "block"; print ".nf"; next }
    mode == "opts" && /^  -/ {
      flush_opt()
      line = $0; sub(/^  /, "", line)
      if (match(line, /   +/)) { opt = substr(line, 1, RSTART - 1); ohelp = substr(line, RSTART + RLENGTH) }
      else { opt = line; ohelp = "" }
      next
    }
    mode == "opts" && /^   +/ { l = $0; sub(/^ +/, "", l); ohelp = ohelp (ohelp == "" ? "" : " ") l; next }
    mode == "block" && /^$/ { print ".fi"; mode = "text"; next }
    mode == "block" { print esc($0); next }
    /^$/ { flush_para(); flush_opt(); next }
    { l = $0; sub(/^ +/, "", l); para = para (para == "" ? "" : " ") l }
    END { flush_para(); flush_opt(); if (mode == "block") print ".fi" }
  '
}

{
  cat <<EOF
.TH VRAMKIT 1 "" "vramkit $version" "User Commands"
.SH NAME
vramkit \\- GPU memory kept flat, within budget and visible: replay, soak, models, reports, metrics
.SH SYNOPSIS
.B vramkit
.I COMMAND
.RI [ ARGS ...]
.br
.B vramkit \\-\\-version
.RB [ \\-\\-json ]
.br
.B vramkit
.I COMMAND
.B \\-\\-help
.SH DESCRIPTION
vramkit is the command line of the vramkit libraries (libvramkit\\-core,
libvramkit\\-observe, libvramkit\\-engine): it replays allocation traces through
governed pools, soaks workloads for leaks, plans and runs ONNX models, writes
report pages and serves Prometheus metrics. Every command takes
.BR \\-\\-help " and " \\-\\-json ;
options are also read from the VRAM_* environment variables below.
.SH COMMANDS
EOF
  run --help | awk '/^commands:$/ {on = 1; next} on && /^$/ {exit} on {
      name = $1; $1 = ""; sub(/^ +/, ""); gsub(/-/, "\\-"); print ".TP"; print ".B " name; print }'
  commands=$(run --help | awk '/^commands:$/ {on = 1; next} on && /^$/ {exit} on && $1 != "help" {print $1}')
  for c in $commands; do
    run "$c" --help | help_to_roff "vramkit $c"
    if [ "$c" = model ]; then
      for s in $(run model --help | awk '/^Subcommands/ {on = 1; next} on && /^  [a-z]/ {print $1}'); do
        run model "$s" --help | help_to_roff "vramkit model $s"
      done
    fi
  done
  echo ".SH ENVIRONMENT"
  echo "Each option's variable, its default and its meaning (\\fBvramkit config\\fR prints the values in effect and where each came from)."
  run config | awk 'NR > 1 {
      var = $1; def = $2; $1 = ""; $2 = ""; $3 = ""; sub(/^ +/, ""); gsub(/-/, "\\-")
      print ".TP"; print ".B " var; print (def == "\"\"" ? "no default" : "default " def) ": " $0 }'
  cat <<'EOF'
.SH EXIT STATUS
.TP
.B 0
done (a soak: level; a sweep: every limit fit)
.TP
.B 1
failed, or a bad verdict (a soak found growth, a sweep limit did not fit)
.TP
.B 2
a usage error: an unknown command or option, a malformed value, a missing argument
.SH SEE ALSO
The documentation in the docs/ folder of vramkit's sources (one page per
module), pkg\-config(1) for building against the libraries
(vramkit\-core, vramkit\-observe, vramkit\-engine).
EOF
} >"$tmp"
chmod 644 "$tmp"
mv "$tmp" "$out"
trap - EXIT
