#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# Installs the build into a temporary prefix (cmake --install) and checks that every file is
# where docs/install.md says, then builds tests/install/consumer.c against the installed header
# and library through pkg-config and through find_package(stepwatch), and runs both. A second
# install through DESTDIR checks that the files name the prefix, never the staging directory.
# Any missing file or failed step fails the test.
#
#   install_test.sh BUILD_DIR VERSION LIBDIR PYTHONDIR [man]
#   (PYTHONDIR empty: the Python package is not part of the build; "man": the man pages are)
set -euo pipefail

build="$1" version="$2" libdir="$3" pydir="$4" man="${5:-}"
here="$(cd "$(dirname "$0")" && pwd)"
cc="${CC:-cc}"
# The build's own C flags (the asan preset's sanitizers must be in the consumer too).
read -r -a cflags <<<"${CFLAGS:-}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/stepwatch-install-XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
prefix="$tmp/prefix"

fail() {
  echo "install_test: $*" >&2
  exit 1
}
need() {
  for f in "$@"; do
    [ -e "$f" ] || fail "missing after install: ${f#"$tmp"/}"
  done
}

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || {
  cat "$tmp/install.log" >&2
  fail "cmake --install $build --prefix $prefix failed"
}

# The binary.
need "$prefix/bin/stepwatch"
got="$("$prefix/bin/stepwatch" --version)"
[ "$got" = "stepwatch $version" ] || fail "stepwatch --version says '$got', want 'stepwatch $version'"

# libstepwatch.so, its SONAME and the two symlinks.
lib="$prefix/$libdir"
need "$lib/libstepwatch.so.$version" "$lib/libstepwatch.so.1" "$lib/libstepwatch.so"
[ -L "$lib/libstepwatch.so.1" ] && [ -L "$lib/libstepwatch.so" ] || fail "libstepwatch.so and .so.1 must be symlinks"
[ "$(readlink "$lib/libstepwatch.so.1")" = "libstepwatch.so.$version" ] || fail "libstepwatch.so.1 -> $(readlink "$lib/libstepwatch.so.1")"
[ "$(readlink "$lib/libstepwatch.so")" = "libstepwatch.so.1" ] || fail "libstepwatch.so -> $(readlink "$lib/libstepwatch.so")"
readelf -d "$lib/libstepwatch.so.$version" | grep 'Library soname: \[libstepwatch.so.1\]' >/dev/null ||
  fail "no SONAME libstepwatch.so.1 in $(readelf -d "$lib/libstepwatch.so.$version" | grep -i soname)"

# The headers, pkg-config file and CMake package.
need "$prefix/include/stepwatch/stepwatch.h" "$prefix/include/stepwatch/stepwatch.hpp" \
  "$prefix/include/stepwatch/beacon_v1.h" "$lib/pkgconfig/stepwatch.pc" \
  "$lib/cmake/stepwatch/stepwatchConfig.cmake" "$lib/cmake/stepwatch/stepwatchConfigVersion.cmake" \
  "$lib/cmake/stepwatch/stepwatchTargets.cmake"

# The license (Apache-2.0), with the rest of an install.
need "$prefix/share/doc/stepwatch/LICENSE"
grep -q "Apache License" "$prefix/share/doc/stepwatch/LICENSE" || fail "the installed LICENSE is not the Apache License"

# The man pages: stepwatch(1) and one per subcommand (scripts/man-pages.sh), readable by man;
# none at all from a build without them.
if [ -n "$man" ]; then
  need "$prefix/share/man/man1/stepwatch.1.gz" "$prefix/share/man/man1/stepwatch-run.1.gz" \
    "$prefix/share/man/man1/stepwatch-agent.1.gz"
  page="$(LC_ALL=C MANWIDTH=1000 man -P cat -l "$prefix/share/man/man1/stepwatch-run.1.gz" 2>/dev/null)"
  grep -qF -- "--spec" <<<"$page" || fail "man stepwatch-run does not show run's --spec"
else
  [ ! -e "$prefix/share/man" ] || fail "a build without man pages installed $prefix/share/man"
fi

# What the agent's node needs: the unit (naming the installed binary), the example
# configuration and the alert rules.
unit="$prefix/lib/systemd/system/stepwatch-agent.service"
need "$unit" "$prefix/share/doc/stepwatch/examples/agent.toml" \
  "$prefix/share/doc/stepwatch/examples/agent-multinode.toml" \
  "$prefix/share/stepwatch/prometheus/stepwatch-rules.yml"
grep -qx "ExecStart=$prefix/bin/stepwatch agent --config /etc/stepwatch/agent.toml" "$unit" ||
  fail "the unit's ExecStart is not the installed binary: $(grep "^ExecStart=" "$unit")"

# The Python package, imported from where it was installed.
if [ -n "$pydir" ]; then
  need "$prefix/$pydir/stepwatch/__init__.py"
  ls "$prefix/$pydir/stepwatch/"_native*.so >/dev/null 2>&1 || fail "missing after install: $pydir/stepwatch/_native*.so"
  where="$(cd "$tmp" && PYTHONPATH="$prefix/$pydir" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c \
    'import stepwatch._native, os; print(os.path.dirname(stepwatch._native.__file__))')"
  [ "$where" = "$prefix/$pydir/stepwatch" ] || fail "python imported stepwatch from $where"
  got="$(cd "$tmp" && PYTHONPATH="$prefix/$pydir" PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c \
    'import stepwatch; print(stepwatch.__version__)')"
  [ "$got" = "$version" ] || fail "stepwatch.__version__ is '$got', want '$version'"
fi

# A C trainer through pkg-config and through find_package(stepwatch): the installed header and
# library only (tests/install/consumers.sh).
# shellcheck source=tests/install/consumers.sh
. "$here/consumers.sh"
export PKG_CONFIG_PATH="$lib/pkgconfig" CMAKE_PREFIX_PATH="$prefix"
build_pc_consumer "$tmp/consumer_pc" "$version"
LD_LIBRARY_PATH="$lib" "$tmp/consumer_pc" "$tmp/beacons-pc" >/dev/null || fail "the pkg-config consumer failed"
build_cmake_consumer "$tmp/cmake_consumer" "$version"
LD_LIBRARY_PATH="$lib" "$tmp/cmake_consumer/consumer" "$tmp/beacons-cmake" >/dev/null || fail "the find_package consumer failed"

# make install DESTDIR=...: files land under the staging directory, name the prefix.
DESTDIR="$tmp/stage" cmake --install "$build" --prefix /usr/local >/dev/null
need "$tmp/stage/usr/local/bin/stepwatch"
grep -q '^ExecStart=/usr/local/bin/stepwatch ' "$tmp/stage/usr/local/lib/systemd/system/stepwatch-agent.service" ||
  fail "a DESTDIR install's unit names $(grep "^ExecStart=" "$tmp/stage/usr/local/lib/systemd/system/stepwatch-agent.service")"
grep -qx 'prefix=/usr/local' "$tmp/stage/usr/local/$libdir/pkgconfig/stepwatch.pc" ||
  fail "a DESTDIR install's stepwatch.pc says $(grep '^prefix=' "$tmp/stage/usr/local/$libdir/pkgconfig/stepwatch.pc")"

# The monitoring examples beside the rules (docs/deploy.md): Prometheus, Alertmanager, Grafana.
need "$prefix/share/stepwatch/prometheus/prometheus.yml" \
  "$prefix/share/stepwatch/alertmanager/alertmanager.yml" \
  "$prefix/share/stepwatch/grafana/stepwatch-dashboard.json"
/usr/bin/python3 -c 'import json, sys; json.load(open(sys.argv[1]))' \
  "$prefix/share/stepwatch/grafana/stepwatch-dashboard.json" || fail "the installed dashboard is not JSON"

echo "install_test: ok ($(find "$prefix" -type f | wc -l) files under the prefix)"
