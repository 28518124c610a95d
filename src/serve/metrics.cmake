# The Prometheus exposition of the agent (/metrics): stepwatch_serve_metrics. Included from the
# top level after src/supervise as include(src/serve/metrics.cmake). Pure rendering: no HTTP here.
sw_add_library(serve_metrics
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/metrics.cpp
  DEPS stepwatch_detect stepwatch_probe)
target_link_libraries(stepwatch_serve_metrics PRIVATE fmt::fmt)
