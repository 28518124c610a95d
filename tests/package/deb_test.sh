#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian package (make package) into this machine's system with apt-get and checks
# what docs/install.md ("Debian package") promises: the binary on PATH, libstepwatch.so.1 through
# pkg-config and find_package, a C trainer whose beacon the installed `stepwatch status` reads,
# the unit (valid, not enabled, not started), the conffile kept over an upgrade, lintian without
# errors, and that remove and purge leave the incident store alone. Then it purges the package;
# a trap purges it on any failure too. Run as root; builds nothing.
#
#   deb_test.sh PATH/stepwatch_VERSION_ARCH.deb
set -euo pipefail

[ $# -eq 1 ] || {
  echo "usage: $0 PATH/stepwatch_VERSION_ARCH.deb" >&2
  exit 2
}
deb="$(realpath "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
version="$(cat "$here/../../VERSION")"
cc="${CC:-cc}"
cflags=()
# The package's files, not another installation's (a `make install` under /usr/local).
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
unset PKG_CONFIG_PATH CMAKE_PREFIX_PATH LD_LIBRARY_PATH PYTHONPATH
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q -o DPkg::Lock::Timeout=300)
start=$SECONDS

fail() {
  echo "deb_test: FAIL: $*" >&2
  exit 1
}
say() { echo "deb_test: $*"; }

[ "$(id -u)" -eq 0 ] || fail "run as root: it installs the package into this system"
[ -f "$deb" ] || fail "no package at $1 (make package builds it)"
# Never touch an installation this test did not make: a package named stepwatch (installed, or
# removed with its configuration kept), files of a `make install PREFIX=/usr`, or an operator's
# /etc/stepwatch/agent.toml.
status="$(dpkg-query -W -f='${db:Status-Status}' stepwatch 2>/dev/null || true)"
case "$status" in
  "" | not-installed) ;;
  *) fail "a package named stepwatch is already on this system (dpkg status '$status'), not installed by this test; remove it first (apt-get purge stepwatch)" ;;
esac
for f in /usr/bin/stepwatch /etc/stepwatch/agent.toml; do
  [ ! -e "$f" ] || fail "$f exists and belongs to no package; this test would replace it"
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/stepwatch-deb-XXXXXX")"
policy=/usr/sbin/policy-rc.d
saved_policy=""
state=/var/lib/stepwatch
marker="$state/deb_test-marker.$$"
made_state=0
etc_existed=0
[ -d /etc/stepwatch ] && etc_existed=1
installed=0

cleanup() {
  local rc=$?
  if [ "$installed" = 1 ]; then
    apt-get purge "${apt_opts[@]}" stepwatch >"$tmp/cleanup.log" 2>&1 || dpkg --purge stepwatch || true
    [ "$rc" -eq 0 ] || echo "deb_test: failed; the package was purged" >&2
  fi
  if [ -n "$saved_policy" ]; then mv -f "$saved_policy" "$policy"; else rm -f "$policy"; fi
  rm -f "$marker"
  # Only a directory this test made; an existing incident store is never touched.
  if [ "$made_state" = 1 ]; then rmdir "$state" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# Package scripts must not start daemons (as scripts/setup-deps.sh does; an existing policy-rc.d
# is kept and put back).
if [ -e "$policy" ]; then
  saved_policy="$tmp/policy-rc.d.saved"
  cp -p "$policy" "$saved_policy"
fi
printf '#!/bin/sh\nexit 101\n' >"$policy"
chmod 755 "$policy"

# The control fields: the one version, this architecture, runtime libraries only.
arch="$(dpkg --print-architecture)"
[ "$(dpkg-deb -f "$deb" Package)" = stepwatch ] || fail "Package: $(dpkg-deb -f "$deb" Package)"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version: $(dpkg-deb -f "$deb" Version), VERSION says $version"
[ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "Architecture: $(dpkg-deb -f "$deb" Architecture)"
depends="$(dpkg-deb -f "$deb" Depends)"
say "Depends: $depends"
for lib in libc6 libstdc++6 libre2 libfmt libsqlite3 python3; do
  grep -q "\b$lib" <<<"$depends" || fail "Depends lacks $lib"
done
for name in $(tr ',|' '\n' <<<"$depends" | awk '{print $1}'); do
  case "$name" in
    *-dev | cmake | ninja-build | gcc* | g++* | cpp* | build-essential | pkg-config)
      fail "Depends names a build tool: $name" ;;
  esac
done

# Set first: a failed install may leave the package half-configured, and the trap purges it.
installed=1
apt-get install "${apt_opts[@]}" --no-install-recommends "$deb" >"$tmp/install.log" 2>&1 || {
  cat "$tmp/install.log" >&2
  fail "apt-get install $deb failed"
}
dpkg -L stepwatch >"$tmp/files"
say "installed $(dpkg-query -W -f='${Version}' stepwatch): $(wc -l <"$tmp/files") paths"

# The binary from PATH, the one version.
[ "$(command -v stepwatch)" = /usr/bin/stepwatch ] || fail "stepwatch on PATH is $(command -v stepwatch || echo nothing)"
[ "$(stepwatch --version)" = "stepwatch $version" ] || fail "stepwatch --version: $(stepwatch --version)"

# libstepwatch.so.1: SONAME, known to the loader (the package's ldconfig trigger).
multiarch="$(env -u CC dpkg-architecture -qDEB_HOST_MULTIARCH)"
lib="/usr/lib/$multiarch/libstepwatch.so.$version"
[ -f "$lib" ] || fail "no $lib"
readelf -d "$lib" | grep 'Library soname: \[libstepwatch.so.1\]' >/dev/null || fail "$lib: $(readelf -d "$lib" | grep -i soname)"
ldconfig -p | grep -E "libstepwatch\.so\.1 .*=> (/usr)?/lib/$multiarch/libstepwatch\.so\.1\$" >/dev/null ||
  fail "ldconfig does not know libstepwatch.so.1"

# A C trainer, built from the system's paths only (tests/install/consumers.sh), writes a beacon
# that the installed `stepwatch status` reads.
# shellcheck source=tests/install/consumers.sh
. "$here/../install/consumers.sh"
build_pc_consumer "$tmp/consumer_pc" "$version"
STEPWATCH_DIR="$tmp/beacons" "$tmp/consumer_pc" "$tmp/beacons" >/dev/null || fail "the pkg-config consumer failed"
stepwatch status --dir "$tmp/beacons" install-test >"$tmp/status.out" 2>&1 || {
  cat "$tmp/status.out" >&2
  fail "stepwatch status failed"
}
grep -q "job install-test  ranks 1/1" "$tmp/status.out" && grep -q finished "$tmp/status.out" || {
  cat "$tmp/status.out" >&2
  fail "stepwatch status does not show the consumer's finished rank"
}
build_cmake_consumer "$tmp/cmake_consumer" "$version"
"$tmp/cmake_consumer/consumer" "$tmp/beacons-cmake" >/dev/null || fail "the find_package consumer failed"

# The Python package, for /usr/bin/python3, with its extension.
where="$(cd "$tmp" && PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c \
  'import stepwatch._native, os; print(os.path.dirname(stepwatch._native.__file__))')" ||
  fail "python3 cannot import stepwatch._native"
[ "$where" = /usr/lib/python3/dist-packages/stepwatch ] || fail "python3 imported stepwatch from $where"
ls /usr/lib/python3/dist-packages/stepwatch/__pycache__/__init__.*.pyc >/dev/null 2>&1 ||
  fail "postinst did not byte-compile the Python package"
# Its version is the one version too.
pyversion="$(cd "$tmp" && PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c 'import stepwatch; print(stepwatch.__version__)')" ||
  fail "python3: stepwatch has no __version__"
[ "$pyversion" = "$version" ] || fail "python3: stepwatch.__version__ is $pyversion, the package $version"

# The unit: valid, names the package's binary, neither enabled nor started.
# /usr/lib, where the prefix /usr puts it (/lib/systemd/system is the same directory on a
# merged-/usr Debian 12; systemd reads both).
unit=/usr/lib/systemd/system/stepwatch-agent.service
[ -f "$unit" ] || fail "no $unit"
grep -qx 'ExecStart=/usr/bin/stepwatch agent --config /etc/stepwatch/agent.toml' "$unit" ||
  fail "the unit's $(grep '^ExecStart=' "$unit")"
"$here/unit_check.sh" "$unit"
for w in /etc/systemd/system/*.wants/stepwatch-agent.service; do
  [ ! -e "$w" ] && [ ! -L "$w" ] || fail "the install enabled the unit: $w"
done
! pgrep -f '^/usr/bin/stepwatch agent' >/dev/null || fail "the install started an agent: $(pgrep -af '^/usr/bin/stepwatch agent')"

# The rules, the deployment examples (docs/deploy.md), the docs, Debian's copyright and changelog (its latest entry is this version).
for f in /usr/share/stepwatch/prometheus/stepwatch-rules.yml /usr/share/doc/stepwatch/README.md \
  /usr/share/doc/stepwatch/docs/install.md /usr/share/doc/stepwatch/copyright \
  /usr/share/doc/stepwatch/changelog.gz /usr/share/doc/stepwatch/examples/agent.toml \
  /usr/share/doc/stepwatch/docs/deploy.md /usr/share/stepwatch/prometheus/prometheus.yml \
  /usr/share/stepwatch/alertmanager/alertmanager.yml /usr/share/stepwatch/grafana/stepwatch-dashboard.json \
  /usr/share/stepwatch/kubernetes/jobset.yaml /usr/share/stepwatch/kubernetes/pytorchjob.yaml /usr/share/stepwatch/kubernetes/jobset-multinode.yaml \
  /usr/share/doc/stepwatch/docs/slurm.md /usr/share/doc/stepwatch/docs/kubernetes.md \
  /usr/share/doc/stepwatch/docs/node-fault.md; do
  [ -f "$f" ] || fail "no $f"
done
# The license: Apache-2.0 in Debian's copyright file (DEP-5), and no second copy of it.
grep -qx "License: Apache-2.0" /usr/share/doc/stepwatch/copyright || fail "the copyright file names no Apache-2.0 license"
grep -q "/usr/share/common-licenses/Apache-2.0" /usr/share/doc/stepwatch/copyright || fail "the copyright file does not point at common-licenses"
[ ! -e /usr/share/doc/stepwatch/LICENSE ] || fail "the package installs a second license file: /usr/share/doc/stepwatch/LICENSE"
if command -v promtool >/dev/null; then
  promtool check rules /usr/share/stepwatch/prometheus/stepwatch-rules.yml >/dev/null || fail "promtool rejects the installed rules"
fi
top="$(zcat /usr/share/doc/stepwatch/changelog.gz | head -1)"
[[ "$top" == "stepwatch ($version) "* ]] || fail "deploy/debian/changelog's latest entry is '$top'; add one for $version"

# The Python package from this checkout into fresh venvs, next to the installed package: the
# wheel's extension built for the venv's interpreter, the ctypes fallback (CC=false) over the
# system's libstepwatch.so.1 from this .deb, and the torch trainer under /usr/bin/stepwatch.
env -u STEPWATCH_LIB STEPWATCH_BIN=/usr/bin/stepwatch "$here/venv_test.sh" || fail "the venvs over the installed package (venv_test.sh) failed"

# The configuration is a conffile: an upgrade keeps the operator's edit. The upgrade is this
# package again, repacked with a higher version and a changed default agent.toml, so dpkg must
# choose (--force-confold: keep the edit, ship the new default beside it as .dpkg-dist).
dpkg-query -W -f='${Conffiles}\n' stepwatch | grep '^ /etc/stepwatch/agent.toml ' >/dev/null ||
  fail "/etc/stepwatch/agent.toml is not a conffile: $(dpkg-query -W -f='${Conffiles}' stepwatch)"
echo 'poll_interval = "2s"   # deb_test: an operator edit' >>/etc/stepwatch/agent.toml
dpkg-deb -R "$deb" "$tmp/up"
sed -i "s/^Version: .*/Version: $version+debtest1/" "$tmp/up/DEBIAN/control"
echo '# deb_test: a new default' >>"$tmp/up/etc/stepwatch/agent.toml"
(cd "$tmp/up" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z | xargs -0 md5sum >DEBIAN/md5sums)
dpkg-deb --root-owner-group -b "$tmp/up" "$tmp/stepwatch-up.deb" >/dev/null
apt-get install "${apt_opts[@]}" -o Dpkg::Options::=--force-confold "$tmp/stepwatch-up.deb" >"$tmp/upgrade.log" 2>&1 || {
  cat "$tmp/upgrade.log" >&2
  fail "the upgrade failed"
}
[ "$(dpkg-query -W -f='${Version}' stepwatch)" = "$version+debtest1" ] || fail "the upgrade did not happen"
grep -q 'deb_test: an operator edit' /etc/stepwatch/agent.toml || fail "the upgrade overwrote the edited /etc/stepwatch/agent.toml"
grep -q 'deb_test: a new default' /etc/stepwatch/agent.toml.dpkg-dist || fail "no agent.toml.dpkg-dist after the upgrade"

# lintian: no errors (warnings are listed in docs/install.md).
say "lintian $(basename "$deb"):"
lintian --fail-on error --tag-display-limit 0 "$deb" || fail "lintian reports errors"

# Remove keeps the configuration, purge deletes it; neither touches the incident store.
if [ ! -d "$state" ]; then
  mkdir -m 0700 "$state"
  made_state=1
fi
echo "incident store of an earlier agent" >"$marker"
apt-get remove "${apt_opts[@]}" stepwatch >"$tmp/remove.log" 2>&1 || {
  cat "$tmp/remove.log" >&2
  fail "apt-get remove failed"
}
[ ! -e /usr/bin/stepwatch ] || fail "/usr/bin/stepwatch is left after remove"
[ -f /etc/stepwatch/agent.toml ] || fail "remove deleted /etc/stepwatch/agent.toml (a conffile stays until purge)"
# No byte-code left behind either (postinst compiles it, prerm removes it).
[ ! -e /usr/lib/python3/dist-packages/stepwatch ] || fail "remove left $(find /usr/lib/python3/dist-packages/stepwatch | head -3)"
[ -f "$marker" ] || fail "remove deleted $marker"
apt-get purge "${apt_opts[@]}" stepwatch >"$tmp/purge.log" 2>&1 || {
  cat "$tmp/purge.log" >&2
  fail "apt-get purge failed"
}
installed=0
[ -f "$marker" ] || fail "purge deleted $marker"
[ ! -e /etc/stepwatch/agent.toml ] && [ ! -e /etc/stepwatch/agent.toml.dpkg-dist ] || fail "purge left /etc/stepwatch/agent.toml*"
[ "$etc_existed" = 1 ] || [ ! -e /etc/stepwatch ] || fail "purge left /etc/stepwatch"
while read -r f; do
  [ -d "$f" ] || [ ! -e "$f" ] || fail "purge left $f"
done <"$tmp/files"
status="$(dpkg-query -W -f='${db:Status-Status}' stepwatch 2>/dev/null || true)"
[ "$status" = "" ] || [ "$status" = not-installed ] || fail "dpkg status after purge: $status"

say "ok ($((SECONDS - start)) s)"
