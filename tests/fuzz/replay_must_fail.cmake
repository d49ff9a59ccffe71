# SPDX-License-Identifier: GPL-2.0-or-later
# ctest helper (cmake -P): runs REPLAY [ARG] and passes only if it fails with a message matching
# EXPECT. With EMPTY, ARG is first made an empty directory (in the build tree).
if(EMPTY)
  file(REMOVE_RECURSE "${ARG}")
  file(MAKE_DIRECTORY "${ARG}")
endif()
if(DEFINED ARG)
  execute_process(COMMAND "${REPLAY}" "${ARG}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
else()
  execute_process(COMMAND "${REPLAY}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
endif()
if(rc EQUAL 0 OR NOT err MATCHES "${EXPECT}")
  message(FATAL_ERROR "expected a failure saying '${EXPECT}'; got exit ${rc}:\n${err}${out}")
endif()
message(STATUS "failed as expected (exit ${rc}): ${err}")
