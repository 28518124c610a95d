// SPDX-FileCopyrightText: 2026 The stepwatch authors
// SPDX-License-Identifier: Apache-2.0
// The program that builds the tests' shared precompiled header (tests/CMakeLists.txt).
int main() {
  return 0;
}
