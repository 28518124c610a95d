# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# Every third-party package stepwatch uses, found once (the main build and fuzz/ include this
# file); all of them Debian packages that scripts/setup-deps.sh installs.
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(fmt REQUIRED)
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(SQLite3 REQUIRED)
# Debian ships toml++ as a compiled library (TOML_HEADER_ONLY=0), which keeps the files that
# include it sub-second compiles.
find_package(tomlplusplus REQUIRED)
# Debian's cpp-httplib is a compiled library (libcpp-httplib.so) built with OpenSSL, zlib and
# brotli; its pkg-config Cflags define CPPHTTPLIB_OPENSSL_SUPPORT & co., which change the layout
# of httplib's classes, so every user must take them from PkgConfig::HTTPLIB (never a bare
# #include <httplib.h>).
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
