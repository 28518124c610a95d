# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2154 # cc and cflags come from the caller
# Sourced by tests/install/install_test.sh and tests/package/deb_test.sh: tests/install/consumer.c
# built against an installed stepwatch, both ways docs/install.md shows. The caller sets `cc`,
# the array `cflags`, and a function `fail MESSAGE`; PKG_CONFIG_PATH and CMAKE_PREFIX_PATH as
# the installation needs (neither for /usr). The caller runs the programs.
consumers_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# build_pc_consumer OUT VERSION: through `pkg-config --cflags --libs stepwatch`.
build_pc_consumer() {
  local out="$1" version="$2" got
  got="$(pkg-config --modversion stepwatch)" || fail "pkg-config does not find stepwatch"
  [ "$got" = "$version" ] || fail "pkg-config --modversion stepwatch: $got, want $version"
  # shellcheck disable=SC2046 # pkg-config prints a list of flags
  "$cc" "${cflags[@]}" -std=c11 -Wall -Wextra -Wpedantic -Werror -o "$out" "$consumers_dir/consumer.c" \
    $(pkg-config --cflags --libs stepwatch) || fail "consumer.c does not build with pkg-config's flags"
  readelf -d "$out" | grep 'NEEDED.*\[libstepwatch.so.1\]' >/dev/null || fail "consumer does not need libstepwatch.so.1"
}

# build_cmake_consumer BUILD_DIR VERSION: a CMake project through find_package(stepwatch VERSION
# EXACT), C compiler only; the program is BUILD_DIR/consumer.
build_cmake_consumer() {
  local dir="$1" version="$2"
  cmake -S "$consumers_dir/cmake_consumer" -B "$dir" -DSTEPWATCH_VERSION="$version" \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="${cflags[*]}" >"$dir.log" 2>&1 &&
    cmake --build "$dir" >>"$dir.log" 2>&1 || {
    cat "$dir.log" >&2
    fail "the find_package(stepwatch) consumer did not build"
  }
}
