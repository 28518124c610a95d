# The runbook's tests run real processes and real signals (sleep, sh, python3, gdb when present).
# Included from tests/CMakeLists.txt, so sources are spelled from this file's directory.
set(_rb_tests ${CMAKE_CURRENT_LIST_DIR})
sw_add_test(runbook_incident_test SOURCES ${_rb_tests}/incident_test.cpp DEPS stepwatch_runbook TIMEOUT 60)
sw_add_test(runbook_preempt_test SOURCES ${_rb_tests}/preempt_test.cpp DEPS stepwatch_runbook TIMEOUT 60)
sw_add_test(runbook_command_test SOURCES ${_rb_tests}/command_test.cpp DEPS stepwatch_runbook TIMEOUT 60)
sw_add_test(runbook_hygiene_test SOURCES ${_rb_tests}/hygiene_test.cpp DEPS stepwatch_runbook TIMEOUT 60)
sw_add_test(runbook_artifact_test SOURCES ${_rb_tests}/artifact_test.cpp DEPS stepwatch_runbook TIMEOUT 60)
if(TARGET stepwatch_doctor_cli)
  sw_add_test(runbook_doctor_test SOURCES ${_rb_tests}/doctor_test.cpp DEPS stepwatch_doctor_cli TIMEOUT 60)
endif()
