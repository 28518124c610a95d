#!/usr/bin/env bash
# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# Installs every build and test dependency of stepwatch from Debian packages,
# only when something is missing. Safe to run again; needs root for apt-get.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libfmt-dev libre2-dev libtomlplusplus-dev libcli11-dev libcpp-httplib-dev
  nlohmann-json3-dev libsqlite3-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  clang-14 libclang-rt-14-dev clang-format-14
  python3-dev python3-numpy python3-torch
  procps iproute2 gdb
  prometheus prometheus-alertmanager
  chromium
  etcd-server etcd-client
  # a real two-node Slurm in the tests (tests/e2e/slurm_support.py), auth/none: no munge daemon
  slurmctld slurmd slurm-client
  # the Kubernetes examples are validated against their published schemas (tests/deploy)
  python3-jsonschema python3-yaml
  # make package: CPack finds the ELF files with file, their Depends with dpkg-shlibdeps; lintian;
  # the man pages from --help (help2man), read back with man (man-db)
  file dpkg-dev lintian help2man man-db
  python3-venv python3-pip-whl python3-setuptools-whl python3-wheel-whl  # pip install python/ offline into a venv (tests/package)
)

missing=()
for p in "${packages[@]}"; do
  # dpkg-query prints "install ok installed" only for a fully installed package.
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "setup-deps: missing packages and not root; run as root or install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# Package scripts must not start system daemons here (etcd-server's postinst would start an etcd
# on :2379; there may be no init at all): a policy-rc.d that refuses every start, for the
# install only. An existing policy-rc.d is kept and put back.
policy=/usr/sbin/policy-rc.d
saved=""
if [ -e "$policy" ]; then
  saved=$(mktemp)
  cp -p "$policy" "$saved"
fi
restore_policy() {
  if [ -n "$saved" ]; then mv -f "$saved" "$policy"; else rm -f "$policy"; fi
}
trap restore_policy EXIT
printf '#!/bin/sh\nexit 101\n' >"$policy"
chmod 755 "$policy"
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
