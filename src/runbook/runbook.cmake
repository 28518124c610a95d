# The runbook module: artifact collection, preemption and restart hygiene (the pager and the ack
# server are listed by their own cmake file). Included from the top-level CMakeLists.txt after
# src/probe and src/spec, so its paths are spelled from this file's own directory.
set(_runbook_dir ${CMAKE_CURRENT_LIST_DIR})
sw_add_library(runbook
  SOURCES
    ${_runbook_dir}/proven.cpp
    ${_runbook_dir}/command.cpp
    ${_runbook_dir}/preempt.cpp
    ${_runbook_dir}/hygiene.cpp
    ${_runbook_dir}/artifact_sink.cpp
    ${_runbook_dir}/artifact.cpp
    ${_runbook_dir}/page_message.cpp
    ${_runbook_dir}/ledger.cpp
    ${_runbook_dir}/incident.cpp
  DEPS stepwatch_common stepwatch_probe stepwatch_spec stepwatch_contract stepwatch_detect
       stepwatch_store stepwatch_runbook_pager Threads::Threads)
