# tools/expect_exit2.cmake — CTest helper: runs EXE with ARGS (a ;-list) and
# fails unless it exits with status 2 and its output matches EXPECT.
#   cmake -DEXE=... -DARGS=a;b -DEXPECT=regex -P expect_exit2.cmake
execute_process(COMMAND ${EXE} ${ARGS}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("exit status: ${rc}\nstdout: ${out}\nstderr: ${err}")
if(NOT rc STREQUAL "2")
  message(FATAL_ERROR "expected exit status 2, got '${rc}'")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECT}")
  message(FATAL_ERROR "output does not match '${EXPECT}'")
endif()
