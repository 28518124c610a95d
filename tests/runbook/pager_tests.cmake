# The pager tests: real HTTP on 127.0.0.1 (port 0), real child processes.
# Included from tests/CMakeLists.txt; the tests run their own cpp-httplib receiver and client.
sw_add_test(runbook_pager_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/pager_test.cpp
  DEPS stepwatch_runbook_pager PkgConfig::HTTPLIB nlohmann_json::nlohmann_json Threads::Threads
  TIMEOUT 120)
