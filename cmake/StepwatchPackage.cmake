# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# The Debian package (docs/install.md, "Debian package"): `make package` configures the release
# build with the prefix /usr and runs cpack, which installs everything `make install` does plus
# the install component `deb` below, and writes package/stepwatch_<version>_amd64.deb in the
# build directory. The version is PROJECT_VERSION (the file VERSION), as for `stepwatch --version`.

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
install(FILES ${sw_deb_dir}/copyright ${sw_deb_changelog} DESTINATION ${sw_deb_doc}
  COMPONENT deb EXCLUDE_FROM_ALL)
# The lintian warnings that the one-package layout raises, each with its reason.
install(FILES ${sw_deb_dir}/lintian-overrides DESTINATION ${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides
  RENAME stepwatch COMPONENT deb EXCLUDE_FROM_ALL)
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
# The whole project (every install rule of the default component), then the component `deb`:
# not `license`, whose text the package carries in its copyright file (Debian policy 12.5).
set(CPACK_INSTALL_CMAKE_PROJECTS
  "${CMAKE_BINARY_DIR};stepwatch;Unspecified;/"
  "${CMAKE_BINARY_DIR};stepwatch;deb;/")
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
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE https://github.com/stepwatch/stepwatch)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "step-progress watchdog for GPU training jobs")
# The extended description; CPack puts the summary line above it.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "stepwatch tells whether a GPU training job is still making progress: every
rank writes a beacon where it commits an optimizer step, and the watchdog
judges the job in step time, with GPU occupancy only as evidence. A stalled
job is paged, preempted and resumed from its last committed checkpoint.

This package contains the stepwatch command (run, agent, status, ack,
incidents, doctor, replay), the node agent's systemd unit (not enabled),
libstepwatch.so.1 with its C and C++ headers, pkg-config and CMake files,
the Python package for python3, and Prometheus alert rules.")
# dpkg-shlibdeps finds the shared libraries the ELF files need (libre2, libfmt, libsqlite3,
# libstdc++, ...). The Python extension is built for Debian 12's python3 (3.11) only.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
if(STEPWATCH_PYTHON)
  string(REPLACE "." ";" sw_py "${STEPWATCH_PYTHON_VERSION}")
  list(GET sw_py 0 sw_py_major)
  list(GET sw_py 1 sw_py_minor)
  math(EXPR sw_py_next_minor "${sw_py_minor} + 1")
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
    "python3 (>= ${STEPWATCH_PYTHON_VERSION}), python3 (<< ${sw_py_major}.${sw_py_next_minor})")
endif()
# A shlibs file for libstepwatch.so.1. CPack writes ldconfig calls into postinst and postrm only
# when the package brings neither; ours do, so deploy/debian/triggers runs ldconfig (as
# debhelper does).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${sw_deb_dir}/conffiles ${sw_deb_dir}/triggers ${sw_deb_dir}/postinst ${sw_deb_dir}/prerm
  ${sw_deb_dir}/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
