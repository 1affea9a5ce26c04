#!/usr/bin/env bash
# The test suite, in two sizes:
#
#   ./scripts/test.sh          the full suite, what CI runs: installs what is needed, builds, and
#                              runs every test (unit, integration on real FUSE mounts, the local Hub
#                              server's own test, slow tests, Python); then the unit and
#                              integration tests again under AddressSanitizer + UndefinedBehavior-
#                              Sanitizer (skip with HUBFS_SKIP_ASAN=1) and under ThreadSanitizer
#                              (skip with HUBFS_SKIP_TSAN=1). Slow tests run once, in the first pass.
#   ./scripts/test.sh --quick  the edit loop: an incremental build of the tests, then the unit and
#                              integration tests (not the slow ones) and the Python tests, no
#                              sanitizers.
#
# Extra arguments after the mode go to ctest (e.g. -R BlockReader).
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
if [ "${1:-}" = "--quick" ]; then
  quick=1
  shift
fi
CTEST_ARGS=("$@")

step() { echo "== $1 ($(date +%T), ${SECONDS}s)"; }

./scripts/deps.sh

if [ "$quick" = 1 ]; then
  step "incremental build of the tests and the Python packages"
  BUILD_TARGETS="all_tests python" ./scripts/build.sh
  step "unit and integration tests (not slow)"
  ctest --test-dir build --output-on-failure -j"$(( $(nproc) + 1 ))" --timeout 600 -LE slow "${CTEST_ARGS[@]}"
else
  step "build (RelWithDebInfo)"
  ./scripts/build.sh
  step "tests, slow ones included"
  ctest --test-dir build --output-on-failure -j2 --timeout 900 "${CTEST_ARGS[@]}"
fi

# --- Python packages (h5chunk, hubfs): pytest with Debian's interpreter on the fresh build.
step "Python tests (pytest)"
py_rc=0
PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python || py_rc=$?
if [ "$py_rc" -eq 5 ]; then
  echo "pytest collected no tests in tests/python: treating that as a failure"
  exit 1
fi
[ "$py_rc" -eq 0 ] || exit "$py_rc"
# --- end Python

if [ "$quick" = 1 ]; then
  step "quick suite passed"
  exit 0
fi

# Sanitizer builds at -O1 with line tables only: a third less compile time on 2 cores, and
# reports still name file and line.
SANITIZER_FLAGS=(-DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1")
# One test more than cores in the sanitizer passes: their integration tests mostly wait on a
# paced server or a mount.
SANITIZER_JOBS=$(( $(nproc) + 1 ))

# The sanitizer passes build every test program and what the tests drive (all_tests: the
# daemon and h5chunk run sanitized under the integration tests; a report aborts them, which
# fails the test). The local Hub server's own test is Python: nothing to sanitize.
if [ "${HUBFS_SKIP_ASAN:-0}" != "1" ]; then
  step "build (ASan + UBSan)"
  BUILD_DIR=build-asan BUILD_TARGETS="all_tests" ./scripts/build.sh -DHUBFS_SANITIZE=ON "${SANITIZER_FLAGS[@]}"
  step "unit and integration tests under ASan + UBSan"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$SANITIZER_JOBS" --timeout 900 -LE "slow|server" "${CTEST_ARGS[@]}"
fi

if [ "${HUBFS_SKIP_TSAN:-0}" != "1" ]; then
  step "build (TSan)"
  BUILD_DIR=build-tsan BUILD_TARGETS="all_tests" ./scripts/build.sh -DHUBFS_TSAN=ON "${SANITIZER_FLAGS[@]}"
  step "unit and integration tests under TSan (the test programs that exercise concurrency)"
  # Suppressed: only races reported inside libraries built without TSan (see the file).
  TSAN_OPTIONS="halt_on_error=1:abort_on_error=1:suppressions=$PWD/scripts/tsan.supp" \
    ctest --test-dir build-tsan --output-on-failure -j"$SANITIZER_JOBS" --timeout 900 -LE "slow|server" "${CTEST_ARGS[@]}"
fi
step "full suite passed"
