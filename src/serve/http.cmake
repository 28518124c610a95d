# Shared HTTP server plumbing (src/serve/http_server.h) for the ack endpoint and the agent API.
# Debian's cpp-httplib is a compiled library whose pkg-config flags change httplib's class
# layouts: every user takes them from PkgConfig::HTTPLIB. Included from the top level.
if(NOT TARGET PkgConfig::HTTPLIB)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET GLOBAL cpp-httplib)
endif()
sw_add_library(http
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/http_server.cpp
  DEPS stepwatch_common PkgConfig::HTTPLIB)
target_link_libraries(stepwatch_http PRIVATE nlohmann_json::nlohmann_json Threads::Threads)
