# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# stepwatch: every target installs what it needs (scripts/setup-deps.sh) before building.
PRESET ?= release
BUILD := build/$(PRESET)
FUZZ_SECONDS ?= 10
JOBS ?= $(shell nproc)
# make install PREFIX=/usr DESTDIR=/tmp/stage (docs/install.md)
PREFIX ?= /usr/local

.PHONY: all deps build install package package-test test unit-test asan-build asan-test fuzz-build fuzz-test demo bench fuzz format format-check clean

all: build

deps:
	./scripts/setup-deps.sh

build: deps
	cmake --preset $(PRESET)
	cmake --build --preset $(PRESET) -j $(JOBS)

# The binary, libstepwatch.so, headers, pkg-config and CMake files, the systemd unit, the example
# agent configuration and the alert rules under PREFIX (DESTDIR, if set, is prepended to every
# path). PREFIX is given to cmake at configure time too: the library and Python directories
# depend on it (Debian's lib/<multiarch> and lib/python3/dist-packages under /usr). Run
# `ldconfig` after installing under /usr/local.
install: deps
	cmake --preset $(PRESET) -DCMAKE_INSTALL_PREFIX=$(PREFIX)
	cmake --build --preset $(PRESET) -j $(JOBS)
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD)

# The Debian package (docs/install.md): the release build configured with the prefix /usr, as
# `make install PREFIX=/usr` has it (nothing is recompiled for it), then cpack, which writes
# build/release/package/stepwatch_<VERSION>_<arch>.deb.
DEB := build/release/package/stepwatch_$(shell cat VERSION)_$(shell dpkg --print-architecture).deb
package: deps
	cmake --preset release -DCMAKE_INSTALL_PREFIX=/usr
	cmake --build --preset release -j $(JOBS)
	cpack --config build/release/CPackConfig.cmake

# Installs the package into this system with apt-get, checks it, and purges it (root).
package-test: package
	./tests/package/deb_test.sh $(DEB)

# Unit, concurrency, C-compiled, Python and end-to-end tests; the Debian package, installed and
# purged, with pip into fresh venvs; then the fuzzers for a bounded time; then the C++ tests
# again under AddressSanitizer + UBSan.
# The ASan and fuzz builds run beside the release and package tests at the lowest priority
# (nice 19): they take only the cores the tests leave idle, and the end-to-end tests spend most
# of their time waiting out stall budgets. On two cores that is about 4 of make test's minutes.
# Their output goes to build/background.log, shown if they fail.
test: format-check build
	@mkdir -p build; \
	nice -n 19 $(MAKE) --no-print-directory asan-build fuzz-build >build/background.log 2>&1 & bg=$$!; \
	$(MAKE) --no-print-directory unit-test package-test; rc=$$?; \
	if ! wait $$bg; then \
	  echo "make test: the ASan or fuzz build failed; the end of build/background.log:"; \
	  tail -n 60 build/background.log; exit 1; \
	fi; \
	exit $$rc
	$(MAKE) --no-print-directory fuzz-test asan-test

unit-test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# Every fuzz target (fuzz/README.md) for FUZZ_SECONDS each, JOBS at a time (each target still
# gets a core for its whole time): eight targets, about 40 s on two cores after the build: a
# smoke run of every property (the campaign is `make fuzz`).
fuzz-test: deps
	STEPWATCH_FUZZ_JOBS=$(JOBS) ./fuzz/run.sh $(FUZZ_SECONDS)

fuzz-build: deps
	./fuzz/run.sh --build-only

asan-build: deps
	cmake --preset asan
	cmake --build --preset asan -j $(JOBS)

asan-test: asan-build
	ctest --test-dir build/asan --output-on-failure -j $(JOBS)

# A long fuzz campaign, not part of make test; FUZZ_JOBS targets at a time.
fuzz: deps
	STEPWATCH_FUZZ_JOBS=$${FUZZ_JOBS:-1} ./fuzz/run.sh $${SECONDS_PER_TARGET:-600}

demo: build
	./examples/demo.sh $(BUILD)

bench: deps
	cmake --preset release
	cmake --build --preset release -j $(JOBS)
	/usr/bin/python3 bench/report.py --build-dir build/release
	./build/release/bench/detection/detection_bench
	./build/release/bench/probe_bench --fake-nvml build/release/tests/probe/fake_nvml/libnvidia-ml.so
	./build/release/bench/agent_bench
	./build/release/bench/coord/coord_bench
	./build/release/bench/coord/coord_scale_bench
	/usr/bin/python3 bench/multinode_latency.py --build-dir build/release

format:
	clang-format-14 -i $$(git ls-files '*.cpp' '*.h' '*.hpp' '*.c')

# Every C and C++ file git tracks against the checked-in .clang-format; the first difference
# fails it, with the file and line.
format-check: deps
	clang-format-14 --dry-run -Werror $$(git ls-files '*.cpp' '*.h' '*.hpp' '*.c')

clean:
	rm -rf build
