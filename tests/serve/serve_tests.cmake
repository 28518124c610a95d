# The serve tests: the /metrics exposition and the Prometheus alert rules. Included from
# tests/CMakeLists.txt. promtool comes from Debian's `prometheus` package (scripts/setup-deps.sh);
# when it is missing the rules test fails and says so, rather than being skipped.
find_program(STEPWATCH_PROMTOOL promtool)

sw_add_test(serve_ack_routes_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/ack_routes_test.cpp
  DEPS stepwatch_http PkgConfig::HTTPLIB nlohmann_json::nlohmann_json Threads::Threads
  TIMEOUT 120)
sw_add_test(serve_json_views_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/json_views_test.cpp
  DEPS stepwatch_http nlohmann_json::nlohmann_json)
sw_add_test(serve_metrics_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics_test.cpp
  DEPS stepwatch_serve_metrics)
if(STEPWATCH_PROMTOOL)
  target_compile_definitions(serve_metrics_test PRIVATE STEPWATCH_PROMTOOL="${STEPWATCH_PROMTOOL}")
  add_test(NAME serve_rules_test
    COMMAND ${STEPWATCH_PROMTOOL} test rules tests/serve/rules_test.yml
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  add_test(NAME serve_rules_check
    COMMAND ${STEPWATCH_PROMTOOL} check rules deploy/prometheus/stepwatch-rules.yml
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
else()
  add_test(NAME serve_rules_test
    COMMAND sh -c "echo 'serve_rules_test: promtool not found; install the Debian package prometheus (scripts/setup-deps.sh) and re-run cmake' >&2; exit 1")
endif()
