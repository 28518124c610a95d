# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# The Debian packages (docs/install.md, "Debian packages"): `make package` configures the release
# build with the prefix /usr and runs cpack, which writes three packages into package/ in the
# build directory, as Debian lays out a program with a shared library (policy 8.1, 8.4):
#   - stepwatch_<version>_<arch>.deb: the command, its man pages, the unit, the Python package,
#     the rules and examples, the docs (install components Unspecified, i.e. everything
#     `make install` installs that is not the library's, and `deb` below);
#   - libstepwatch1_<version>_<arch>.deb: libstepwatch.so.1 alone (components `lib`, `lib-deb`),
#     named after its SONAME so that a new ABI can be installed beside it;
#   - libstepwatch-dev_<version>_<arch>.deb: what building a C or C++ trainer needs: the
#     libstepwatch.so link, headers, pkg-config and CMake files (components `dev`, `dev-deb`).
# The command and the Python package do not link the library: stepwatch needs neither of the
# others. The version is PROJECT_VERSION (the file VERSION), as for `stepwatch --version`.

# The license (Apache-2.0) for `make install` and `cmake --install`: its own component, which the
# package leaves out (its copyright file says the same, as Debian wants it).
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/stepwatch
  COMPONENT license)

# What only the package installs: component `deb`, EXCLUDE_FROM_ALL, so `make install` and
# `cmake --install` never write to /etc (only `--component deb` or cpack does).
set(sw_deb_dir ${PROJECT_SOURCE_DIR}/deploy/debian)
set(sw_deb_doc ${CMAKE_INSTALL_DATAROOTDIR}/doc/stepwatch)
# The agent's configuration, a conffile (deploy/debian/conffiles): an upgrade keeps the
# operator's edits. /etc whatever the prefix: the unit reads /etc/stepwatch/agent.toml.
install(FILES ${PROJECT_SOURCE_DIR}/deploy/agent.toml DESTINATION /etc/stepwatch
  COMPONENT deb EXCLUDE_FROM_ALL)
# Debian's per-package documentation. The changelog of a native package (no Debian revision in
# the version) is changelog.gz, compressed as Debian does (gzip -9n: no name, no time stamp).
set(sw_deb_changelog ${CMAKE_CURRENT_BINARY_DIR}/debian/changelog.gz)
install(CODE "
  file(MAKE_DIRECTORY \"${CMAKE_CURRENT_BINARY_DIR}/debian\")
  execute_process(COMMAND gzip -9nc \"${sw_deb_dir}/changelog\" OUTPUT_FILE \"${sw_deb_changelog}\"
    COMMAND_ERROR_IS_FATAL ANY)" COMPONENT deb EXCLUDE_FROM_ALL)
# Every package has its own copyright file and changelog (policy 12.5, 12.7).
install(FILES ${sw_deb_dir}/copyright ${sw_deb_changelog} DESTINATION ${sw_deb_doc}
  COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${sw_deb_dir}/copyright ${sw_deb_changelog}
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/libstepwatch1 COMPONENT lib-deb EXCLUDE_FROM_ALL)
install(FILES ${sw_deb_dir}/copyright ${sw_deb_changelog}
  DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/doc/libstepwatch-dev COMPONENT dev-deb EXCLUDE_FROM_ALL)
install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${sw_deb_doc} COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES
    ${PROJECT_SOURCE_DIR}/docs/api.md
    ${PROJECT_SOURCE_DIR}/docs/architecture.md
    ${PROJECT_SOURCE_DIR}/docs/contract.md
    ${PROJECT_SOURCE_DIR}/docs/deploy.md
    ${PROJECT_SOURCE_DIR}/docs/install.md
    ${PROJECT_SOURCE_DIR}/docs/kubernetes.md
    ${PROJECT_SOURCE_DIR}/docs/log-contract.md
    ${PROJECT_SOURCE_DIR}/docs/metrics.md
    ${PROJECT_SOURCE_DIR}/docs/multinode.md
    ${PROJECT_SOURCE_DIR}/docs/node-fault.md
    ${PROJECT_SOURCE_DIR}/docs/replay.md
    ${PROJECT_SOURCE_DIR}/docs/run.md
    ${PROJECT_SOURCE_DIR}/docs/slurm.md
    ${PROJECT_SOURCE_DIR}/docs/spec.md
  DESTINATION ${sw_deb_doc}/docs COMPONENT deb EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME stepwatch)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
# One package per group of install components (the groups are set after include(CPack)). Not the
# component `license`, whose text the packages carry in their copyright files (policy 12.5).
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_COMPONENTS_ALL Unspecified deb lib lib-deb dev dev-deb)
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
# The configured prefix: the library and Python directories depend on it (make package sets /usr;
# a bare cpack after `make install` would package /usr/local).
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
  OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
# The release build keeps debug information (RelWithDebInfo); the package's ELF files do not.
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER
  "Seed c5db383e maintainers <maintainers@users.noreply.a-seed-c5db383e.example>")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE https://github.com/stepwatch/stepwatch)
# All three are built from one source package, stepwatch (their changelog's).
set(CPACK_DEBIAN_PACKAGE_SOURCE stepwatch)
# dpkg-shlibdeps finds the shared libraries the ELF files need (libre2, libfmt, libsqlite3,
# libstdc++, ...).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# A shlibs file for libstepwatch.so.1 (in libstepwatch1), whose deploy/debian/triggers runs
# ldconfig, as debhelper has it.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# stepwatch: the command and everything around it.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME stepwatch)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "step-progress watchdog for GPU training jobs
stepwatch tells whether a GPU training job is still making progress: every
rank writes a beacon where it commits an optimizer step, and the watchdog
judges the job in step time, with GPU occupancy only as evidence. A stalled
job is paged, preempted and resumed from its last committed checkpoint.

This package contains the stepwatch command (run, agent, status, ack,
incidents, doctor, replay) with its man pages, the node agent's systemd unit
(not enabled), the Python package for python3, and Prometheus alert rules.
C and C++ trainers write beacons through libstepwatch1 (libstepwatch-dev).")
# The Python extension is built for Debian 12's python3 (3.11) only.
if(STEPWATCH_PYTHON)
  string(REPLACE "." ";" sw_py "${STEPWATCH_PYTHON_VERSION}")
  list(GET sw_py 0 sw_py_major)
  list(GET sw_py 1 sw_py_minor)
  math(EXPR sw_py_next_minor "${sw_py_minor} + 1")
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS
    "python3 (>= ${STEPWATCH_PYTHON_VERSION}), python3 (<< ${sw_py_major}.${sw_py_next_minor})")
endif()
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  ${sw_deb_dir}/conffiles ${sw_deb_dir}/postinst ${sw_deb_dir}/prerm ${sw_deb_dir}/postrm)

# libstepwatch1: the shared library, named after its SONAME.
set(CPACK_DEBIAN_LIB_PACKAGE_NAME libstepwatch1)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_DESCRIPTION "step-progress beacons for GPU training jobs (shared library)
libstepwatch lets a training program written in C or C++ commit its progress
(step, phase, loss, checkpoint) to a beacon in shared memory, where the
stepwatch watchdog reads it. No call blocks, allocates or throws.

This package contains the shared library, libstepwatch.so.1.")
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${sw_deb_dir}/triggers)
# CPack also writes ldconfig into its postinst and postrm; the trigger does that (lintian:
# maintscript-calls-ldconfig), so they are taken out once the package is built.
set(CPACK_POST_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/StepwatchDebPostBuild.cmake)

# libstepwatch-dev: what building against it needs.
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libstepwatch-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "step-progress beacons for GPU training jobs (development files)
libstepwatch lets a training program written in C or C++ commit its progress
(step, phase, loss, checkpoint) to a beacon in shared memory, where the
stepwatch watchdog reads it. No call blocks, allocates or throws.

This package contains the C and C++ headers, the libstepwatch.so link, and
the pkg-config and CMake (find_package(stepwatch)) files.")
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libstepwatch1 (= ${PROJECT_VERSION})")

include(CPack)
cpack_add_component_group(runtime)
cpack_add_component_group(lib)
cpack_add_component_group(dev)
cpack_add_component(Unspecified GROUP runtime)
cpack_add_component(deb GROUP runtime)
cpack_add_component(lib GROUP lib)
cpack_add_component(lib-deb GROUP lib)
cpack_add_component(dev GROUP dev)
cpack_add_component(dev-deb GROUP dev)
