#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages (make package: stepwatch, libstepwatch1, libstepwatch-dev) into
# this machine's system with apt-get and checks what docs/install.md ("Debian packages") promises:
# the binary on PATH with its man pages, libstepwatch.so.1 through pkg-config and find_package, a
# C trainer whose beacon the installed `stepwatch status` reads, the unit (valid, not enabled, not
# started), the conffile kept over an upgrade, lintian printing nothing (no error, no warning, no
# hardening note, no override), and that remove and purge leave the incident store alone. Then it
# purges the packages; a trap purges them on any failure too. Run as root; builds nothing.
#
#   deb_test.sh PATH/stepwatch_VERSION_ARCH.deb   (the other two are read from the same folder)
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
arch="$(dpkg --print-architecture)"
multiarch="$(env -u CC dpkg-architecture -qDEB_HOST_MULTIARCH)"
packages=(stepwatch libstepwatch1 libstepwatch-dev)
debs=()
for p in "${packages[@]}"; do
  f="$(dirname "$deb")/${p}_${version}_${arch}.deb"
  [ -f "$f" ] || fail "no $f beside $deb (make package builds all three)"
  debs+=("$f")
done
# Never touch an installation this test did not make: a package of these names (installed, or
# removed with its configuration kept), files of a `make install PREFIX=/usr`, or an operator's
# /etc/stepwatch/agent.toml.
for p in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)"
  case "$status" in
    "" | not-installed) ;;
    *) fail "a package named $p is already on this system (dpkg status '$status'), not installed by this test; remove it first (apt-get purge $p)" ;;
  esac
done
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
    apt-get purge "${apt_opts[@]}" "${packages[@]}" >"$tmp/cleanup.log" 2>&1 || dpkg --purge "${packages[@]}" || true
    [ "$rc" -eq 0 ] || echo "deb_test: failed; the packages were purged" >&2
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

# The control fields: each package's name, the one version, this architecture, one source.
for i in "${!packages[@]}"; do
  f="${debs[$i]}"
  [ "$(dpkg-deb -f "$f" Package)" = "${packages[$i]}" ] || fail "$f: Package: $(dpkg-deb -f "$f" Package)"
  [ "$(dpkg-deb -f "$f" Version)" = "$version" ] || fail "$f: Version: $(dpkg-deb -f "$f" Version), VERSION says $version"
  [ "$(dpkg-deb -f "$f" Architecture)" = "$arch" ] || fail "$f: Architecture: $(dpkg-deb -f "$f" Architecture)"
  [ "$(dpkg-deb -f "$f" Source)" = stepwatch ] || [ "${packages[$i]}" = stepwatch ] ||
    fail "$f: Source: $(dpkg-deb -f "$f" Source), not stepwatch"
done
# stepwatch: runtime libraries only, and not the library package (the command does not link it).
depends="$(dpkg-deb -f "$deb" Depends)"
say "stepwatch Depends: $depends"
for lib in libc6 libstdc++6 libre2 libfmt libsqlite3 python3; do
  grep -q "\b$lib" <<<"$depends" || fail "Depends lacks $lib"
done
for name in $(tr ',|' '\n' <<<"$depends" | awk '{print $1}'); do
  case "$name" in
    *-dev | cmake | ninja-build | gcc* | g++* | cpp* | build-essential | pkg-config | libstepwatch*)
      fail "stepwatch Depends names $name" ;;
  esac
done
# The library's Section and its exact -dev pairing (policy 8.4), its shlibs for its users.
[ "$(dpkg-deb -f "${debs[1]}" Section)" = libs ] || fail "libstepwatch1: Section: $(dpkg-deb -f "${debs[1]}" Section)"
[ "$(dpkg-deb -f "${debs[2]}" Section)" = libdevel ] || fail "libstepwatch-dev: Section: $(dpkg-deb -f "${debs[2]}" Section)"
grep -q "libstepwatch1 (= $version)" <<<"$(dpkg-deb -f "${debs[2]}" Depends)" ||
  fail "libstepwatch-dev Depends: $(dpkg-deb -f "${debs[2]}" Depends), not libstepwatch1 (= $version)"
dpkg-deb --ctrl-tarfile "${debs[1]}" | tar -xO ./shlibs | grep -qx "libstepwatch 1 libstepwatch1 (>= $version)" ||
  fail "libstepwatch1's shlibs: $(dpkg-deb --ctrl-tarfile "${debs[1]}" | tar -xO ./shlibs)"

# Set first: a failed install may leave the packages half-configured, and the trap purges them.
installed=1
apt-get install "${apt_opts[@]}" --no-install-recommends "${debs[@]}" >"$tmp/install.log" 2>&1 || {
  cat "$tmp/install.log" >&2
  fail "apt-get install ${debs[*]} failed"
}
dpkg -L "${packages[@]}" >"$tmp/files"
say "installed $(dpkg-query -W -f='${Version}' stepwatch): $(wc -l <"$tmp/files") paths"
# Each file in the package it belongs in.
dpkg -L libstepwatch1 | grep -qx "/usr/lib/$multiarch/libstepwatch.so.1" ||
  fail "libstepwatch1 lacks libstepwatch.so.1"
! dpkg -L libstepwatch1 | grep -E '\.h$|\.pc$|\.cmake$|/libstepwatch\.so$|/usr/bin' >/dev/null ||
  fail "libstepwatch1 ships more than the library: $(dpkg -L libstepwatch1 | grep -E '\.h$|\.pc$|\.cmake$|/libstepwatch\.so$|/usr/bin')"
for f in /usr/include/stepwatch/stepwatch.h /usr/lib/$multiarch/libstepwatch.so \
  /usr/lib/$multiarch/pkgconfig/stepwatch.pc; do
  dpkg -L libstepwatch-dev | grep -qx "$f" || fail "libstepwatch-dev lacks $f"
done
! dpkg -L stepwatch | grep -E 'libstepwatch|/usr/include' >/dev/null ||
  fail "stepwatch ships library files: $(dpkg -L stepwatch | grep -E 'libstepwatch|/usr/include')"
for p in "${packages[@]}"; do
  [ -f "/usr/share/doc/$p/copyright" ] || fail "$p has no /usr/share/doc/$p/copyright"
done

# The man pages: stepwatch(1) and one per subcommand that --help lists, read by man (in ASCII on
# lines long enough that no option is hyphenated).
man() { LC_ALL=C MANWIDTH=1000 command man "$@"; }
[ "$(man -w stepwatch)" = /usr/share/man/man1/stepwatch.1.gz ] || fail "man -w stepwatch: $(man -w stepwatch 2>&1)"
grep -q "is this training job still making progress" <<<"$(man -P cat stepwatch 2>/dev/null)" ||
  fail "man stepwatch does not show stepwatch --help's description"
subs="$(stepwatch --help | awk '/^Subcommands:/ {on = 1; next} on && /^  [a-z]/ {print $1} on && /^$/ {on = 0}')"
[ "$(wc -w <<<"$subs")" -ge 8 ] || fail "stepwatch --help lists only: $subs"
for sub in $subs; do
  page="$(man -P cat "stepwatch-$sub" 2>/dev/null)" || fail "no man page stepwatch-$sub"
  for opt in $(stepwatch "$sub" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
    grep -qF -- "$opt" <<<"$page" || fail "man stepwatch-$sub lacks $opt (its --help has it)"
  done
done
say "man pages: stepwatch and $(wc -w <<<"$subs") subcommands, every option of their --help"

# The binary from PATH, the one version.
[ "$(command -v stepwatch)" = /usr/bin/stepwatch ] || fail "stepwatch on PATH is $(command -v stepwatch || echo nothing)"
[ "$(stepwatch --version)" = "stepwatch $version" ] || fail "stepwatch --version: $(stepwatch --version)"

# libstepwatch.so.1: SONAME, known to the loader (the package's ldconfig trigger).
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

# lintian prints nothing: no error, no warning, and no override hiding one (each package's own
# layout, as Debian's policy has it). Hardening is checked at its info level too (dpkg-buildflags).
say "lintian ${packages[*]}:"
lintian --fail-on error,warning --tag-display-limit 0 "${debs[@]}" >"$tmp/lintian.out" 2>&1 || {
  cat "$tmp/lintian.out" >&2
  fail "lintian failed"
}
# (As root it says that it would rather not be: that is this test's doing, not the packages'.)
sed -i '/^running with root privileges is not recommended!$/d' "$tmp/lintian.out"
[ ! -s "$tmp/lintian.out" ] || {
  cat "$tmp/lintian.out" >&2
  fail "lintian printed something"
}
# At the info level: no override, and no hardening tag but hardening-no-fortify-functions, which
# lintian gives a binary none of whose calls the compiler could check (libstepwatch.so.1 and the
# Python extension copy into buffers whose sizes are known only at run time); the command's calls
# prove the flags: it imports fortified (__*_chk) functions.
lintian --display-info --show-overrides --tag-display-limit 0 "${debs[@]}" >"$tmp/lintian-info.out" 2>&1 || true
! grep -E '^O: |hardening-' "$tmp/lintian-info.out" | grep -v 'hardening-no-fortify-functions' ||
  fail "lintian: a hardening tag or an override (above)"
! grep 'hardening-no-fortify-functions \[usr/bin/' "$tmp/lintian-info.out" || fail "lintian: the command is not fortified"
syms="$(readelf --dyn-syms -W /usr/bin/stepwatch)"
grep -q '__[a-z_]*_chk@' <<<"$syms" || fail "/usr/bin/stepwatch imports no fortified function"
grep -q 'FLAGS.*BIND_NOW' <<<"$(readelf -d /usr/bin/stepwatch)" || fail "/usr/bin/stepwatch is not linked -z now"
for p in "${packages[@]}"; do
  [ ! -e "/usr/share/lintian/overrides/$p" ] || fail "$p ships lintian overrides"
done

# Remove keeps the configuration, purge deletes it; neither touches the incident store.
if [ ! -d "$state" ]; then
  mkdir -m 0700 "$state"
  made_state=1
fi
echo "incident store of an earlier agent" >"$marker"
apt-get remove "${apt_opts[@]}" "${packages[@]}" >"$tmp/remove.log" 2>&1 || {
  cat "$tmp/remove.log" >&2
  fail "apt-get remove failed"
}
[ ! -e /usr/bin/stepwatch ] || fail "/usr/bin/stepwatch is left after remove"
[ ! -e "/usr/lib/$multiarch/libstepwatch.so.1" ] || fail "libstepwatch.so.1 is left after remove"
[ -f /etc/stepwatch/agent.toml ] || fail "remove deleted /etc/stepwatch/agent.toml (a conffile stays until purge)"
# No byte-code left behind either (postinst compiles it, prerm removes it).
[ ! -e /usr/lib/python3/dist-packages/stepwatch ] || fail "remove left $(find /usr/lib/python3/dist-packages/stepwatch | head -3)"
[ -f "$marker" ] || fail "remove deleted $marker"
# The library packages have no configuration: remove already took them whole (apt-get cannot
# name them any more: they came from files, not a repository).
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
for p in "${packages[@]}"; do
  status="$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)"
  [ "$status" = "" ] || [ "$status" = not-installed ] || fail "dpkg status of $p after purge: $status"
done

say "ok ($((SECONDS - start)) s)"
