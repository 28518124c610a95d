# The runbook's pager: stepwatch_runbook_pager. Included from the top level
# (after src/spec) as include(src/runbook/pager.cmake).
#
# Debian's cpp-httplib is a compiled library (libcpp-httplib.so) built with OpenSSL, zlib and
# brotli; its pkg-config Cflags define CPPHTTPLIB_OPENSSL_SUPPORT & co., which change the layout
# of httplib's classes, so every user must take them from pkg-config (never a bare
# #include <httplib.h>). GLOBAL: the tests' directory links it too.
if(NOT TARGET PkgConfig::HTTPLIB)
  pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET GLOBAL cpp-httplib)
endif()

# httplib stays inside pager_http.cpp (client); nlohmann-json inside pager.cpp (STYLE rule 11).
sw_add_library(runbook_pager
  SOURCES
    ${CMAKE_CURRENT_LIST_DIR}/pager.cpp
    ${CMAKE_CURRENT_LIST_DIR}/pager_http.cpp
    ${CMAKE_CURRENT_LIST_DIR}/alert_keeper.cpp
  DEPS stepwatch_common stepwatch_spec stepwatch_runbook)
target_link_libraries(stepwatch_runbook_pager
  PRIVATE PkgConfig::HTTPLIB nlohmann_json::nlohmann_json Threads::Threads)
