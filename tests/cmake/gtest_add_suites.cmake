# One CTest test per gtest suite (HUBFS_TESTS_PER_SUITE, the sanitizer builds of
# scripts/test.sh): the suite's tests run in one process, `PROGRAM --gtest_filter=Suite.*`, named
# "Suite.*" so the passes' -E patterns work as on per-test names. Under a sanitizer a process
# costs 0.1-0.3 s to start, and a suite's SetUpTestSuite (a local Hub, a memcached) runs once
# instead of once per test. The slow tests are not registered: they run in the Release pass only.
#
# Run by CTest before it runs the tests (a TEST_INCLUDE_FILES script the build generates per test
# program, which sets the variables below); the list is made again only when the program is newer.
#   HUBFS_SUITES_EXE      the test program
#   HUBFS_SUITES_OUT      where the list of tests is written
#   HUBFS_SUITES_STAMP    a file whose change also remakes the list (the generated include)
#   HUBFS_SUITES_LABELS   the tests' labels (a CMake list)
#   HUBFS_SUITES_COST     their COST
#   HUBFS_SUITES_WORKDIR  their working directory
if(NOT EXISTS "${HUBFS_SUITES_EXE}")
  get_filename_component(_name "${HUBFS_SUITES_EXE}" NAME)
  add_test("${_name}_NOT_BUILT" "${_name}_NOT_BUILT")
  return()
endif()
if(NOT EXISTS "${HUBFS_SUITES_OUT}" OR NOT "${HUBFS_SUITES_OUT}" IS_NEWER_THAN "${HUBFS_SUITES_EXE}"
   OR NOT "${HUBFS_SUITES_OUT}" IS_NEWER_THAN "${HUBFS_SUITES_STAMP}")
  execute_process(COMMAND "${HUBFS_SUITES_EXE}" --gtest_list_tests "--gtest_filter=-*.Slow*"
    WORKING_DIRECTORY "${HUBFS_SUITES_WORKDIR}" TIMEOUT 60
    OUTPUT_VARIABLE _listing ERROR_VARIABLE _errors RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "listing the tests of ${HUBFS_SUITES_EXE} failed (${_rc}): ${_errors}")
  endif()
  set(_script "")
  string(REPLACE "\n" ";" _lines "${_listing}")
  foreach(_line IN LISTS _lines)
    # A suite's line starts in column 0 and ends its name with '.'; its tests follow, indented.
    if(_line MATCHES "^([A-Za-z0-9_/]+)\\.")
      set(_suite "${CMAKE_MATCH_1}")
      string(APPEND _script
        "add_test([==[${_suite}.*]==] \"${HUBFS_SUITES_EXE}\" [==[--gtest_filter=${_suite}.*-*.Slow*]==])\n"
        "set_tests_properties([==[${_suite}.*]==] PROPERTIES LABELS \"${HUBFS_SUITES_LABELS}\""
        " COST ${HUBFS_SUITES_COST} TIMEOUT 900 WORKING_DIRECTORY \"${HUBFS_SUITES_WORKDIR}\""
        # As in per-test discovery (gtest_add_tests_no_skip.cmake): a skip is a failure.
        " FAIL_REGULAR_EXPRESSION [==[\\[  SKIPPED \\]]==])\n")
    endif()
  endforeach()
  file(WRITE "${HUBFS_SUITES_OUT}" "${_script}")
endif()
include("${HUBFS_SUITES_OUT}")
