# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# Run by cpack after it wrote the packages (CPACK_POST_BUILD_SCRIPTS, cmake/StepwatchPackage.cmake),
# with CPACK_PACKAGE_FILES naming them. CPackDeb gives a package that ships a shared library and
# has no postinst or postrm of its own scripts that call ldconfig; lintian warns at that
# (maintscript-calls-ldconfig), since Debian runs ldconfig from a trigger, which libstepwatch1
# declares (deploy/debian/triggers). CPack has no switch for it, so libstepwatch1 is unpacked, its
# two generated scripts are removed (after checking that ldconfig is all they do) and it is
# packed again with dpkg-deb. Nothing else in it changes.
foreach(deb IN LISTS CPACK_PACKAGE_FILES)
  get_filename_component(name "${deb}" NAME)
  if(NOT name MATCHES "^libstepwatch1_.*[.]deb$")
    continue()
  endif()
  get_filename_component(dir "${deb}" DIRECTORY)
  set(tree "${dir}/libstepwatch1-unpacked")
  file(REMOVE_RECURSE "${tree}")
  execute_process(COMMAND dpkg-deb -R "${deb}" "${tree}" COMMAND_ERROR_IS_FATAL ANY)
  foreach(script postinst postrm)
    set(path "${tree}/DEBIAN/${script}")
    if(NOT EXISTS "${path}")
      continue()
    endif()
    file(STRINGS "${path}" lines)
    foreach(line IN LISTS lines)
      string(STRIP "${line}" line)
      if(NOT line MATCHES "^(#!/bin/sh|set -e|if \\[ \"\\$1\" = \"(configure|remove)\" \\]; then|ldconfig|fi|)$")
        message(FATAL_ERROR "${name}: its ${script} does more than ldconfig (\"${line}\"): not removed")
      endif()
    endforeach()
    file(REMOVE "${path}")
  endforeach()
  execute_process(COMMAND dpkg-deb --root-owner-group -b "${tree}" "${deb}"
    OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
  file(REMOVE_RECURSE "${tree}")
  message(STATUS "stepwatch: ${name}: ldconfig through its trigger, not maintainer scripts")
endforeach()
