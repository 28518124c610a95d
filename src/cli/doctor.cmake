# `stepwatch doctor`: restart hygiene on demand, a library of its own (like check_spec) so its
# tests need not link the whole CLI. Included from src/cli/CMakeLists.txt; needs the runbook
# library (src/runbook/runbook.cmake, included at the top level before src/cli).
sw_add_library(doctor_cli
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/doctor.cpp
  DEPS stepwatch_runbook stepwatch_spec stepwatch_contract)
