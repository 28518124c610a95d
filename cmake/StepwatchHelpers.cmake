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
  target_compile_options(${name} PRIVATE ${STEPWATCH_WARNINGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
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
