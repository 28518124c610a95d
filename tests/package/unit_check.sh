#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# Checks an installed systemd unit file: with `systemd-analyze verify` when it is there (it needs
# no running systemd), and always with a plain parse: every line blank, a comment, a section
# header of a service unit, or Key=Value inside one.
#
#   unit_check.sh UNIT_FILE
set -euo pipefail

unit="$1"
fail() {
  echo "unit_check: $unit: $*" >&2
  exit 1
}

section=""
n=0
while IFS= read -r line || [ -n "$line" ]; do
  n=$((n + 1))
  case "$line" in
    "" | "#"* | ";"*) ;;
    "[Unit]" | "[Service]" | "[Install]") section="$line" ;;
    "["*) fail "line $n: unknown section $line" ;;
    *)
      [ -n "$section" ] || fail "line $n: a setting before any section"
      [[ "$line" =~ ^[A-Za-z][A-Za-z0-9]*=.* ]] || fail "line $n: not Key=Value: $line"
      [[ "$line" != *\\ ]] || fail "line $n: a continued line (not expected here)"
      ;;
  esac
done <"$unit"
for s in Unit Service Install; do
  grep -qx "\[$s\]" "$unit" || fail "no [$s] section"
done
grep -q '^ExecStart=/' "$unit" || fail "no ExecStart with an absolute path"

if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify "$unit" || fail "systemd-analyze verify failed"
fi
echo "unit_check: $unit: ok ($n lines$(command -v systemd-analyze >/dev/null && echo ', systemd-analyze verify'))"
