# `stepwatch agent`, a small library of its own so its tests need not link the whole CLI.
# Included from src/cli/CMakeLists.txt.
sw_add_library(agent_cli
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/agent_cmd.cpp
  DEPS stepwatch_agent stepwatch_probe stepwatch_serve_metrics)
