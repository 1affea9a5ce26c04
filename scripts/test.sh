#!/usr/bin/env bash
# The test suite, in two sizes:
#
#   ./scripts/test.sh          the full suite, what CI runs: installs what is needed, builds, and
#                              runs the slow tests (long fuzz runs, stress, quota windows: only
#                              here), the tests no sanitizer pass runs (label first_pass) and
#                              the local Hub server's own test; then the unit and
#                              integration tests (real FUSE mounts, the daemon and CLIs sanitized
#                              too) under AddressSanitizer + UndefinedBehaviorSanitizer (skip with
#                              HUBFS_SKIP_ASAN=1), and those that exercise concurrency
#                              (tests/CMakeLists.txt says which) under ThreadSanitizer (skip with
#                              HUBFS_SKIP_TSAN=1); pytest (on the plain build) beside the last of
#                              those passes. The unit and integration tests run in the
#                              sanitizer passes only: a third, plain run cost the first pass more
#                              CPU than any other part of it but the slow tests. (HUBFS_SKIP_ASAN=1
#                              runs every unit test plain; with HUBFS_SKIP_TSAN=1 too, the
#                              integration tests as well.)
#   ./scripts/test.sh --quick  the edit loop: an incremental build of the tests, then the unit and
#                              integration tests (not the slow ones) and the Python tests, no
#                              sanitizers.
#   ./scripts/test.sh --unit   the unit tests alone (label `unit`, not the slow ones): an
#                              incremental build of the unit test programs alone, no server, no
#                              mount, no Python, no sanitizers (after a one-file change in core/,
#                              ~70 CPU s: docs/benchmarks.md, "Suite time").
#
# Extra arguments after the mode go to ctest (e.g. -R BlockReader).
#
# Where the full suite's time goes (2 cores): compiling dominates, and the test passes leave
# part of the CPU idle (integration tests wait on mounts, paced servers and child processes;
# measured: the ASan build got through a third of its steps during the Release pass).
# So both sanitizer builds start in the background at once, before the first build, at low CPU
# priority (TSan's above ASan's, since its pass comes first): the first build and the passes
# before theirs keep the CPU they need, and the sanitizer builds take what they leave (the first
# build's own tail, where one compile runs alone, included). A build's output goes to
# build-<kind>/build.log, printed if it fails. (Not in a session of its own: where the kernel
# groups CPU time by session, nice would then count for nothing.)
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
unit_only=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
elif [ "${1:-}" = "--unit" ]; then
  quick=1
  unit_only=1
  shift
fi
CTEST_ARGS=("$@")

# Each step prints the wall time so far and the CPU time of the steps finished so far (user +
# system of every child waited for; a background build counts once it is waited for): on a
# shared machine the CPU seconds say where the time goes when the wall clock cannot.
times_file=$(mktemp)
step() {
  times >"$times_file"  # in this shell, not a subshell: its last line is the children's "XmY.YYYs XmY.YYYs"
  local cpu
  cpu=$(tail -n 1 "$times_file" | awk '{n = 0; for (i = 1; i <= 2; i++) { split($i, a, /[ms]/); n += a[1] * 60 + a[2] } printf "%d", n}')
  echo "== $1 ($(date +%T), ${SECONDS}s, CPU ${cpu}s)"
}

./scripts/deps.sh
./scripts/check_seams.sh  # time enters core/ only through the Env; no sleeps in unit tests (prints what fails)

# Sanitizer builds at -Og with line tables only; reports still name file and line. -Og, not
# -O1: with gcc an ASan+UBSan file compiles in two thirds of the time (core/hub/hub_json.cc: 10.9
# against 16.7 CPU s), and the sanitizer passes mostly wait on mounts and servers, not on the CPU.
# (clang, which builds them where it can, below, takes -Og as -O1. The test programs' own files
# compile at -O0 there: tests/CMakeLists.txt.)
SANITIZER_FLAGS=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-Og -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1")
# The compiler of each sanitizer build (cmake options): clang, whose LLVM TSan runtime (v3:
# fixed-size vector clocks) ran the TSan pass in ~0.6 of gcc-12's CPU and page faults, whose TSan
# build took ~0.8 of gcc's CPU and ASan+UBSan build ~0.9 (the suite's critical path: the last pass
# waits for it); docs/benchmarks.md, "Session 34: suite41" and "Session 34: the ASan+UBSan build
# with clang". gcc where clang or its runtime is missing (scripts/deps.sh installs both), said once.
sanitizer_compiler() {  # sanitizer (thread|address): prints the C compiler of that build, clang or gcc
  local probe rc=0
  if command -v clang >/dev/null && command -v clang++ >/dev/null; then
    probe=$(mktemp -d)
    echo 'int main() {}' >"$probe/p.cc"
    clang++ -fsanitize="$1" "$probe/p.cc" -o "$probe/p" >/dev/null 2>&1 || rc=$?
    rm -rf "$probe"
    if [ "$rc" -eq 0 ]; then
      echo clang
      return
    fi
    echo "test.sh: clang++ cannot link -fsanitize=$1 (libclang-rt-dev missing?): that build uses gcc" >&2
  else
    echo "test.sh: clang not found: the $1 sanitizer build uses gcc (slower: docs/benchmarks.md, \"Session 34: suite41\")" >&2
  fi
  echo gcc
}
# One test more than cores in the sanitizer passes: their integration tests mostly wait on a
# paced server or a mount.
SANITIZER_JOBS=$(( $(nproc) + 1 ))
run_asan=1; [ "$quick" = 0 ] && [ "${HUBFS_SKIP_ASAN:-0}" != "1" ] || run_asan=0
run_tsan=1; [ "$quick" = 0 ] && [ "${HUBFS_SKIP_TSAN:-0}" != "1" ] || run_tsan=0

# The sanitizer builds make every test program and what the tests drive (all_tests: the daemon
# and h5chunk run sanitized under the integration tests; a report aborts them, which fails the
# test). The local Hub server's own test is Python: nothing to sanitize.
start_background_build() {  # kind (asan|tsan), niceness, C compiler (clang|gcc), cmake options...
  local kind=$1 niceness=$2 cc=$3 cxx=clang++ cached; shift 3
  [ "$cc" = gcc ] && cxx=g++
  # A directory configured with the other compiler is configured afresh: CMake would switch it
  # itself, but then drops every other option given (the build would come out unsanitized).
  cached=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "build-$kind/CMakeCache.txt" 2>/dev/null || true)
  if [ -n "$cached" ] && [ "$(readlink -f "$cached")" != "$(readlink -f "$(command -v "$cxx")")" ]; then
    rm -rf "build-$kind/CMakeCache.txt" "build-$kind/CMakeFiles"
  fi
  mkdir -p "build-$kind"
  step "build ($kind, $cc) starts in the background (log: build-$kind/build.log)"
  BUILD_DIR=build-$kind BUILD_TARGETS="all_tests" nice -n "$niceness" ./scripts/build.sh \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" "$@" "${SANITIZER_FLAGS[@]}" >"build-$kind/build.log" 2>&1 &
  background_build[$kind]=$!
}
finish_background_build() {  # kind
  local kind=$1 rc=0
  step "waiting for the $kind build"
  wait "${background_build[$kind]}" || rc=$?
  unset "background_build[$kind]"
  if [ "$rc" -ne 0 ]; then
    tail -n 60 "build-$kind/build.log"
    echo "the $kind build failed (rc $rc): its whole log is build-$kind/build.log"
    exit "$rc"
  fi
}
kill_tree() { local child; for child in $(pgrep -P "$1"); do kill_tree "$child"; done; kill "$1" 2>/dev/null || true; }
# A failing pass ends the script; a build still running in the background ends with it.
declare -A background_build=()
trap 'for pid in "${background_build[@]}" ${py_pid:-}; do kill_tree "$pid"; done; rm -f "$times_file"' EXIT

# pytest with Debian's interpreter on the fresh build; its exit code (5: it collected nothing,
# which counts as a failure).
run_pytest() { PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python; }
check_pytest_rc() {
  if [ "$1" -eq 5 ]; then
    echo "pytest collected no tests in tests/python: treating that as a failure"
    exit 1
  fi
  [ "$1" -eq 0 ] || exit "$1"
}
# pytest in the background beside a ctest pass (both mostly wait on servers and mounts), its
# output printed once it has finished; finish_pytest sets py_rc.
start_pytest() {
  py_log=$(mktemp)
  run_pytest >"$py_log" 2>&1 &
  py_pid=$!
}
finish_pytest() {
  py_rc=0
  wait "$py_pid" || py_rc=$?
  step "Python tests (pytest) finished"
  cat "$py_log"
  rm -f "$py_log"
}

# Label "first_pass" (tests/CMakeLists.txt): tests the sanitizer passes leave out, which the first
# pass runs, e.g. check_seams_bites (scripts/check_seams.sh on a copy of the tree: the same test
# whatever the build; under each sanitizer it ran again, ~4 s each) and MutationFuzz's.

# Every build registers one CTest test per gtest suite and one per slow test (tests/CMakeLists.txt,
# HUBFS_TESTS_PER_SUITE): given here too, so a build directory configured before that was the
# default gets it.
PER_SUITE=(-DHUBFS_TESTS_PER_SUITE=ON)

if [ "$unit_only" = 1 ]; then
  # The unit test programs alone (target unit_tests), not all_tests: a change in core/ would
  # otherwise relink the daemon, the integration tests' programs and the benchmarks' libraries.
  step "incremental build of the unit test programs"
  BUILD_TARGETS="unit_tests" ./scripts/build.sh "${PER_SUITE[@]}"
  step "unit tests (not slow)"
  ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 600 -L '^unit$' -LE slow "${CTEST_ARGS[@]}"
  step "unit tests passed"
  exit 0
elif [ "$quick" = 1 ]; then
  step "incremental build of the tests and the Python packages"
  BUILD_TARGETS="all_tests python" ./scripts/build.sh "${PER_SUITE[@]}"
  # The Python tests run beside ctest (their output is printed after it): the integration tests
  # mostly wait on mounts and servers, and the edit loop's budget is wall time.
  step "unit and integration tests (not slow), and pytest beside them"
  start_pytest
  ctest_rc=0
  ctest --test-dir build --output-on-failure -j"$(( $(nproc) + 1 ))" --timeout 600 -LE slow "${CTEST_ARGS[@]}" || ctest_rc=$?
  finish_pytest
  [ "$ctest_rc" -eq 0 ] || exit "$ctest_rc"
  check_pytest_rc "$py_rc"
  step "quick suite passed"
  exit 0
else
  # Not the benchmarks: nothing here runs them (./scripts/build.sh alone builds everything).
  # With the ASan+UBSan pass to come, this build makes only what its own pass runs (target
  # release_pass: the programs with slow tests, the server's tests, the daemon and CLIs pytest and
  # the package use); every unit test program is built and run under ASan+UBSan instead of here
  # as well (tests/CMakeLists.txt).
  release_targets="all_tests python"
  [ "$run_asan" = 1 ] && release_targets="release_pass python"
  [ "$run_tsan" = 1 ] && start_background_build tsan 10 "$(sanitizer_compiler thread)" -DHUBFS_TSAN=ON "${PER_SUITE[@]}"
  [ "$run_asan" = 1 ] && start_background_build asan 19 "$(sanitizer_compiler address)" -DHUBFS_SANITIZE=ON "${PER_SUITE[@]}"
  step "build (RelWithDebInfo): the programs, the Python packages and the tests ($release_targets)"
  BUILD_TARGETS="$release_targets" ./scripts/build.sh "${PER_SUITE[@]}"
  # The Python tests run beside the last test pass: the sanitizer builds take whatever the
  # passes before it leave idle, but nothing runs beside the last one, whose waits on mounts and
  # servers left a quarter of the cores idle (docs/benchmarks.md, "Session 30: suite41"). They
  # need only build/, which nothing builds in by then.
  last_pass=release
  [ "$run_tsan" = 1 ] && last_pass=tsan
  [ "$run_asan" = 1 ] && last_pass=asan
  [ "$last_pass" = release ] && start_pytest
  if [ "$run_asan" = 1 ] || [ "$run_tsan" = 1 ]; then
    # Any label matching: slow tests (of every tier), the local Hub server's test and the doors
    # without a mount (test_server, label "server"), and the tests no sanitizer pass runs (label
    # "first_pass": MutationFuzz's, check_seams_bites). The other unit and integration tests run
    # under the sanitizers below (test_h5chunk's unit tests as every other program's: in this
    # pass too they cost ~18 CPU s, docs/benchmarks.md, "Session 28: suite41"). Without the ASan
    # pass every unit test runs here (of the programs built above: a program not built registers
    # only an unlabelled placeholder, which -L leaves out).
    step "slow tests (integration ones included), the Hub server's tests, the tests no sanitizer runs"
    labels='^(slow|server|first_pass)$'
    [ "$run_asan" = 1 ] || labels='^(unit|slow|server)$'
    ctest --test-dir build --output-on-failure -j2 --timeout 900 -L "$labels" "${CTEST_ARGS[@]}"
  else
    step "tests, slow ones included"
    ctest --test-dir build --output-on-failure -j2 --timeout 900 "${CTEST_ARGS[@]}"
  fi
fi

# --- Python packages (h5chunk, hubfs): pytest with Debian's interpreter on the fresh build, here
# when it ran beside the first pass (no sanitizer pass), else after the last sanitizer pass.
if [ "$last_pass" = release ]; then
  finish_pytest
  check_pytest_rc "$py_rc"
fi
# --- end Python

# --- The Debian package, on the build the tests above used: scripts/package_test.sh builds it
# from build/, lints it, installs it with apt-get, checks what it promises and purges it. It runs
# here, while only the sanitizer builds run beside it: no test is running that could see what it
# installs system-wide (the HDF5 plugins), it has purged it before the next pass starts, and the
# builds take the CPU its waits leave (at the end of the suite, alone, it left a core idle:
# docs/benchmarks.md, "Issue 41's suite time, round 4"). HUBFS_SKIP_PACKAGE=1 skips it (it needs
# root: it installs a package).
if [ "$quick" = 0 ] && [ "${HUBFS_SKIP_PACKAGE:-0}" != "1" ]; then
  step "the Debian package: build, lintian, install, check, purge"
  ./scripts/package_test.sh
fi

# TSan's pass before ASan's: its build is the smaller (~320 CPU s against ~550 at 46ca961), so
# it is done first, and its pass waits the most (215 s of wall time for 321 CPU s): beside the
# ASan build still running, the CPU it leaves goes to that build, and the shorter ASan pass is
# the one that runs at the end, with pytest beside it.
if [ "$run_tsan" = 1 ]; then
  finish_background_build tsan
  [ "$last_pass" = tsan ] && start_pytest
  step "unit and integration tests under TSan (the test programs that exercise concurrency)"
  # Suppressed: only races reported inside libraries built without TSan (see the file).
  # The TSan build leaves out the single-threaded hostile-file tests (mutation fuzz, damaged
  # indexes, random selections, patched dimensions), which ASan+UBSan covers, runs a smaller
  # codec sweep, and of the integration tests those whose subject is concurrency in the daemon
  # (parallel readers, the shared cache, unmounts while streaming), without their one-command
  # tests: tests/CMakeLists.txt, HUBFS_TSAN_SKIPPED_TEST_FILES and HUBFS_TSAN_EXCLUDED_TESTS;
  # tests/h5chunk/equality_test.cc.
  TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:suppressions=$PWD/scripts/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -j"$SANITIZER_JOBS" --timeout 900 -LE "slow|server|first_pass" \
      "${CTEST_ARGS[@]}"
fi

if [ "$run_asan" = 1 ]; then
  finish_background_build asan
  [ "$last_pass" = asan ] && start_pytest
  step "unit and integration tests under ASan + UBSan"
  # The mutation fuzz runs in the Release pass only: under ASan a damaged size makes libhdf5's
  # and h5chunk's children ask for over 1 TiB, which ASan aborts rather than refuses (its label
  # first_pass says so too, but only where tests are registered per suite).
  # A 16 MiB quarantine, not ASan's 256: freed memory is held back from reuse until 16 MiB more
  # has been freed, so a use after free is still reported as one within that (a later one may be
  # reported as an overflow or missed), and a test that allocates and frees MiBs reuses warm pages
  # instead of faulting in fresh ones, which cost this VM's kind much system time
  # (docs/benchmarks.md, "Session 33: suite41"). Each thread's own quarantine 256 KiB, not 1 MiB,
  # for the same reason.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:quarantine_size_mb=16:thread_local_quarantine_size_kb=256 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp" \
    ctest --test-dir build-asan --output-on-failure -j"$SANITIZER_JOBS" --timeout 900 -LE "slow|server|first_pass" \
      -E "^MutationFuzz\." "${CTEST_ARGS[@]}"
fi

if [ "$last_pass" != release ]; then
  finish_pytest
  check_pytest_rc "$py_rc"
fi

step "full suite passed"
