# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# Debian's hardening flags, from dpkg-buildflags with hardening=+all, on every optimized build
# (the release preset, which `make package` packages): _FORTIFY_SOURCE=2, -fstack-protector-strong,
# format checks, and a read-only GOT bound at load time (-z relro -z now). PIE, stack-clash and
# CET protection are Debian GCC's defaults already. The build type keeps its own -O and -g, and
# paths stay absolute (-ffile-prefix-map is for reproducible builds, not hardening). Not for the
# sanitizer builds (ASan replaces the fortified functions) nor -O0 (_FORTIFY_SOURCE needs the
# optimizer).
set(sw_optimized OFF)
if(CMAKE_BUILD_TYPE MATCHES "^(RelWithDebInfo|Release|MinSizeRel)$")
  set(sw_optimized ON)
endif()
option(STEPWATCH_HARDENING "Compile and link with dpkg-buildflags' hardening flags" ${sw_optimized})
if(NOT STEPWATCH_HARDENING)
  return()
endif()
find_program(STEPWATCH_DPKG_BUILDFLAGS dpkg-buildflags)
if(NOT STEPWATCH_DPKG_BUILDFLAGS)
  message(FATAL_ERROR "STEPWATCH_HARDENING: dpkg-buildflags not found (Debian package dpkg-dev, "
                      "scripts/setup-deps.sh); configure with -DSTEPWATCH_HARDENING=OFF to build without")
endif()
foreach(sw_kind CPPFLAGS CFLAGS CXXFLAGS LDFLAGS)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env DEB_BUILD_MAINT_OPTIONS=hardening=+all
            ${STEPWATCH_DPKG_BUILDFLAGS} --get ${sw_kind}
    OUTPUT_VARIABLE sw_flags OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  separate_arguments(sw_flags UNIX_COMMAND "${sw_flags}")
  list(FILTER sw_flags EXCLUDE REGEX "^-g[0-9]?$|^-O[0-9sgz]?$|^-ffile-prefix-map=")
  set(sw_${sw_kind} ${sw_flags})
endforeach()
add_compile_options(${sw_CPPFLAGS} "$<$<COMPILE_LANGUAGE:C>:${sw_CFLAGS}>"
                    "$<$<COMPILE_LANGUAGE:CXX>:${sw_CXXFLAGS}>")
add_link_options(${sw_LDFLAGS})
list(JOIN sw_CPPFLAGS " " sw_shown)
foreach(sw_kind CXXFLAGS LDFLAGS)
  list(JOIN sw_${sw_kind} " " sw_more)
  string(APPEND sw_shown " " "${sw_more}")
endforeach()
message(STATUS "stepwatch: hardening (dpkg-buildflags): ${sw_shown}")
