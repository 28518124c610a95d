# `stepwatch incidents`, a small library of its own so its tests need not link the whole CLI.
# Included from src/cli/CMakeLists.txt; nlohmann-json stays inside incidents.cpp.
sw_add_library(incidents_cli
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/incidents.cpp
  DEPS stepwatch_store stepwatch_http)
target_link_libraries(stepwatch_incidents_cli PRIVATE nlohmann_json::nlohmann_json)
