# SPDX-FileCopyrightText: 2026 The stepwatch authors
# SPDX-License-Identifier: Apache-2.0
# One helper per kind of target so every module is built the same way.

# sw_add_library(NAME SOURCES... [DEPS ...]): static library stepwatch_<NAME>.
function(sw_add_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(stepwatch_${name} STATIC ${ARG_SOURCES})
  target_include_directories(stepwatch_${name} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(stepwatch_${name} PRIVATE ${STEPWATCH_WARNINGS})
  target_link_libraries(stepwatch_${name} PUBLIC ${ARG_DEPS})
endfunction()

# sw_add_test(NAME SOURCES... DEPS ...): a GoogleTest binary registered with ctest.
function(sw_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  # -pthread and fmt (its FMT_SHARED) for every test, as for their shared precompiled header
  # (tests/CMakeLists.txt): most tests have both through the modules they link (RE2's pkg-config
  # flags, stepwatch_common), and a header compiled with other macros is refused.
  target_compile_options(${name} PRIVATE ${STEPWATCH_WARNINGS} -pthread)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} fmt::fmt GTest::gtest GTest::gmock GTest::gtest_main)
  if(TARGET stepwatch_test_pch)
    target_precompile_headers(${name} REUSE_FROM stepwatch_test_pch)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set(timeout 300)
  if(ARG_TIMEOUT)
    set(timeout ${ARG_TIMEOUT})
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${timeout}
    ENVIRONMENT "STEPWATCH_BUILD_DIR=${PROJECT_BINARY_DIR};STEPWATCH_SOURCE_DIR=${PROJECT_SOURCE_DIR}")
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()

# sw_install_configured(SOURCE DESTINATION DIR [COMPONENT C] [REPLACE OLD NEW]...): installs
# SOURCE (its name without a trailing .in) into DIR, first replacing each OLD by NEW and then
# @prefix@, @bindir@, @libdir@, @includedir@ and @version@ by what they are at install time. So the
# installed file names the prefix it went to, `cmake --install --prefix P` included, and never
# DESTDIR. COMPONENT: the install component (default: the default one), of both steps.
function(sw_install_configured source)
  cmake_parse_arguments(ARG "" "DESTINATION;COMPONENT" "REPLACE" ${ARGN})
  set(component)
  if(ARG_COMPONENT)
    set(component COMPONENT ${ARG_COMPONENT})
  endif()
  get_filename_component(source ${source} ABSOLUTE)
  get_filename_component(name ${source} NAME)
  string(REGEX REPLACE "[.]in$" "" name ${name})
  set(out ${CMAKE_CURRENT_BINARY_DIR}/configured/${name})
  set(code "file(READ \"${source}\" content)\n")
  while(ARG_REPLACE)
    list(POP_FRONT ARG_REPLACE old new)
    string(APPEND code "string(REPLACE \"${old}\" \"${new}\" content \"\${content}\")\n")
  endwhile()
  # CMP0053 NEW: @bindir@ in a REPLACE argument stays text until string(CONFIGURE).
  install(CODE "
    cmake_policy(PUSH)
    cmake_policy(SET CMP0053 NEW)
    set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
    set(bindir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
    set(libdir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
    set(includedir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_INCLUDEDIR}\")
    set(version \"${PROJECT_VERSION}\")
    ${code}
    string(CONFIGURE \"\${content}\" content @ONLY)
    file(WRITE \"${out}\" \"\${content}\")
    cmake_policy(POP)" ${component})
  install(FILES ${out} DESTINATION ${ARG_DESTINATION} ${component})
endfunction()
