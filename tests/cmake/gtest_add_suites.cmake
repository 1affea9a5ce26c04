# One CTest test per gtest suite (HUBFS_TESTS_PER_SUITE, every build of scripts/test.sh): the
# suite's tests run in one process, `PROGRAM --gtest_filter=Suite.*`, named "Suite.*" so the
# passes' -E patterns work as on per-test names. A process costs 0.1-0.3 s to start under a
# sanitizer (and its test program's static set-up in every build), and a suite's SetUpTestSuite
# (a local Hub, a memcached) runs once instead of once per test. Each slow test ("Slow" names)
# is a CTest test of its own, labelled "slow" (which only the Release pass runs), so the longest
# ones start first and in parallel.
#
# Run by CTest before it runs the tests (a TEST_INCLUDE_FILES script the build generates per test
# program, which sets the variables below); the list is made again only when the program is newer.
#   HUBFS_SUITES_EXE      the test program
#   HUBFS_SUITES_OUT      where the list of tests is written
#   HUBFS_SUITES_STAMP    a file whose change also remakes the list (the generated include; so
#                         does a change of this script)
#   HUBFS_SUITES_LABELS   the tests' labels (a CMake list)
#   HUBFS_SUITES_COST     their COST
#   HUBFS_SUITES_WORKDIR  their working directory
#   HUBFS_SUITES_EXCLUDE  gtest patterns of tests left out (':'-separated; may be empty)
#   HUBFS_SUITES_FIRST_PASS  a regex of suite names whose tests (not slow) also get the label
#                         "first_pass": the unsanitized pass runs them (may be empty)
if(NOT EXISTS "${HUBFS_SUITES_EXE}")
  get_filename_component(_name "${HUBFS_SUITES_EXE}" NAME)
  add_test("${_name}_NOT_BUILT" "${_name}_NOT_BUILT")
  return()
endif()
if(NOT EXISTS "${HUBFS_SUITES_OUT}" OR NOT "${HUBFS_SUITES_OUT}" IS_NEWER_THAN "${HUBFS_SUITES_EXE}"
   OR NOT "${HUBFS_SUITES_OUT}" IS_NEWER_THAN "${HUBFS_SUITES_STAMP}"
   OR NOT "${HUBFS_SUITES_OUT}" IS_NEWER_THAN "${CMAKE_CURRENT_LIST_FILE}")
  execute_process(COMMAND "${HUBFS_SUITES_EXE}" --gtest_list_tests
    WORKING_DIRECTORY "${HUBFS_SUITES_WORKDIR}" TIMEOUT 60
    OUTPUT_VARIABLE _listing ERROR_VARIABLE _errors RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "listing the tests of ${HUBFS_SUITES_EXE} failed (${_rc}): ${_errors}")
  endif()
  set(_script "")
  string(REPLACE "\n" ";" _lines "${_listing}")
  # As in per-test discovery (gtest_add_tests_no_skip.cmake): a skip is a failure.
  set(_common "TIMEOUT 900 WORKING_DIRECTORY \"${HUBFS_SUITES_WORKDIR}\" FAIL_REGULAR_EXPRESSION [==[\\[  SKIPPED \\]]==]")
  set(_exclude "")
  if(HUBFS_SUITES_EXCLUDE)
    set(_exclude ":${HUBFS_SUITES_EXCLUDE}")
  endif()
  set(_suite "")
  set(_suite_has_quick OFF)
  # A suite's line starts in column 0 and ends its name with '.'; its tests follow, indented
  # (a parameterized one's line ends with a comment: "  Name/0  # GetParam() = ...").
  foreach(_line IN LISTS _lines ITEMS "EOF.")  # EOF.: the last suite is written too
    if(_line MATCHES "^([A-Za-z0-9_/]+)\\.")
      set(_next_suite "${CMAKE_MATCH_1}")  # before another MATCHES below clears CMAKE_MATCH_1
      if(_suite_has_quick)
        set(_labels "${HUBFS_SUITES_LABELS}")
        if(HUBFS_SUITES_FIRST_PASS AND _suite MATCHES "^(${HUBFS_SUITES_FIRST_PASS})$")
          string(APPEND _labels ";first_pass")
        endif()
        string(APPEND _script
          "add_test([==[${_suite}.*]==] \"${HUBFS_SUITES_EXE}\" [==[--gtest_filter=${_suite}.*-*.Slow*${_exclude}]==])\n"
          "set_tests_properties([==[${_suite}.*]==] PROPERTIES LABELS \"${_labels}\""
          " COST ${HUBFS_SUITES_COST} ${_common})\n")
      endif()
      set(_suite "${_next_suite}")
      set(_suite_has_quick OFF)
    elseif(_line MATCHES "^  (Slow[A-Za-z0-9_/]*)")
      set(_name "${_suite}.${CMAKE_MATCH_1}")
      string(APPEND _script
        "add_test([==[${_name}]==] \"${HUBFS_SUITES_EXE}\" [==[--gtest_filter=${_name}]==])\n"
        "set_tests_properties([==[${_name}]==] PROPERTIES LABELS \"${HUBFS_SUITES_LABELS};slow\""
        " COST 10000 ${_common})\n")
    elseif(_line MATCHES "^  [A-Za-z0-9_/]")
      set(_suite_has_quick ON)
    endif()
  endforeach()
  file(WRITE "${HUBFS_SUITES_OUT}" "${_script}")
endif()
include("${HUBFS_SUITES_OUT}")
