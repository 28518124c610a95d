# The NVML probe's tests run the real dlopen/dlsym path against fake libnvidia-ml.so builds of
# tests/fakes/fake_nvml.c, each in its own directory so every file is named libnvidia-ml.so.

# sw_fake_nvml(TARGET [DEFINES ...]): the fake built as <build>/tests/probe/TARGET/libnvidia-ml.so.
function(sw_fake_nvml target)
  cmake_parse_arguments(ARG "" "" "DEFINES" ${ARGN})
  add_library(${target} SHARED ${PROJECT_SOURCE_DIR}/tests/fakes/fake_nvml.c)
  target_compile_options(${target} PRIVATE ${STEPWATCH_WARNINGS} -fvisibility=hidden)
  target_compile_definitions(${target} PRIVATE ${ARG_DEFINES})
  set_target_properties(${target} PROPERTIES
    OUTPUT_NAME nvidia-ml
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/${target})
endfunction()

sw_fake_nvml(fake_nvml)                                                   # every symbol
sw_fake_nvml(fake_nvml_noprocs DEFINES FAKE_NVML_OMIT_PROCESSES)          # optional one missing
sw_fake_nvml(fake_nvml_v1procs DEFINES FAKE_NVML_OMIT_PROCESSES_V3)       # v1 struct fallback
sw_fake_nvml(fake_nvml_nocount DEFINES FAKE_NVML_OMIT_COUNT)              # required one missing

set(fake_nvml_paths
  FAKE_NVML_LIB="$<TARGET_FILE:fake_nvml>"
  FAKE_NVML_NOPROCS_LIB="$<TARGET_FILE:fake_nvml_noprocs>"
  FAKE_NVML_V1PROCS_LIB="$<TARGET_FILE:fake_nvml_v1procs>"
  FAKE_NVML_NOCOUNT_LIB="$<TARGET_FILE:fake_nvml_nocount>")

sw_add_test(probe_nvml_test SOURCES nvml_test.cpp DEPS stepwatch_probe ${CMAKE_DL_LIBS})
target_compile_definitions(probe_nvml_test PRIVATE ${fake_nvml_paths})
add_dependencies(probe_nvml_test fake_nvml fake_nvml_noprocs fake_nvml_v1procs fake_nvml_nocount)

sw_add_test(probe_gpu_test SOURCES gpu_probe_test.cpp DEPS stepwatch_probe ${CMAKE_DL_LIBS})
target_compile_definitions(probe_gpu_test PRIVATE ${fake_nvml_paths})
add_dependencies(probe_gpu_test fake_nvml fake_nvml_noprocs fake_nvml_v1procs fake_nvml_nocount)
# The tool is tested against the fake too, when src/probe/tools is part of the build.
if(TARGET stepwatch-gpu-probe)
  target_compile_definitions(probe_gpu_test PRIVATE GPU_PROBE_BIN="$<TARGET_FILE:stepwatch-gpu-probe>")
  add_dependencies(probe_gpu_test stepwatch-gpu-probe)
endif()
