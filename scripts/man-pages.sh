#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# The man pages, generated from the binary's own --help by help2man (Debian package help2man), so
# that they cannot drift from it: stepwatch(1), and stepwatch-SUB(1) for every subcommand that
# `stepwatch --help` lists (a new subcommand gets its page without a change here). Each is
# gzipped as Debian ships man pages (gzip -9n: no name, no time stamp). Run by the build
# (src/cli/CMakeLists.txt, target stepwatch_man); installed into share/man/man1.
#
#   man-pages.sh STEPWATCH_BINARY OUTDIR VERSION
set -euo pipefail

[ $# -eq 3 ] || {
  echo "usage: $0 STEPWATCH_BINARY OUTDIR VERSION" >&2
  exit 2
}
bin="$(realpath "$1")"
out="$2"
version="$3"
command -v help2man >/dev/null || {
  echo "man-pages.sh: help2man not found (Debian package help2man; scripts/setup-deps.sh installs it)" >&2
  exit 1
}
work="$(mktemp -d "${TMPDIR:-/tmp}/stepwatch-man-XXXXXX")"
trap 'rm -rf "$work"' EXIT
rm -rf "$out"
mkdir -p "$out"

# `stepwatch --help`'s "Subcommands:" section: "  NAME   description".
subs="$work/subcommands"
"$bin" --help | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print} on && /^$/ {on = 0}' >"$subs"
[ -s "$subs" ] || {
  echo "man-pages.sh: $bin --help lists no subcommands" >&2
  exit 1
}

# page NAME DESCRIPTION ARGS...: NAME(1) from the --help of `stepwatch ARGS...`, run under the
# name "stepwatch" (its usage line says so) through a wrapper named NAME (help2man titles the
# page after the program's file name).
page() {
  local name="$1" description="$2"
  shift 2
  local wrapper="$work/bin/$name"
  mkdir -p "$work/bin"
  printf '#!/usr/bin/env bash\nexec -a stepwatch %q %s "$@"\n' "$bin" "$*" >"$wrapper"
  chmod +x "$wrapper"
  local include="$work/$name.h2m"
  : >"$include"
  if [ "$name" = stepwatch ]; then
    {
      echo "[SEE ALSO]"
      awk '{print ".BR stepwatch-" $1 " (1),"}' "$subs" | sed '$ s/,$//'
      echo ".PP"
      echo "The documentation in /usr/share/doc/stepwatch/docs (docs/ in the source)."
    } >"$include"
  else
    printf '[SEE ALSO]\n.BR stepwatch (1)\n' >"$include"
  fi
  help2man --no-info --no-discard-stderr --section=1 --version-string="$version" \
    --source="stepwatch $version" --manual="stepwatch manual" --name="$description" \
    --include="$include" --output="$work/$name.1" "$wrapper"
  gzip -9n <"$work/$name.1" >"$out/$name.1.gz"
}

page stepwatch "$("$bin" --help | head -1 | sed 's/^stepwatch: //')"
while read -r sub description; do
  page "stepwatch-$sub" "$description" "$sub"
done <"$subs"
echo "man-pages.sh: $(find "$out" -name '*.1.gz' | wc -l) pages in $out"
