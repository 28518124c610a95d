# `stepwatch check-spec`, a small library of its own so its tests need not link the whole CLI.
# Included from src/cli/CMakeLists.txt; nlohmann-json stays inside check_spec.cpp.
sw_add_library(check_spec
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/check_spec.cpp
  DEPS stepwatch_spec)
target_link_libraries(stepwatch_check_spec PRIVATE nlohmann_json::nlohmann_json)
