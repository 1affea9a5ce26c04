#!/usr/bin/env bash
# Installs what is needed, builds, and runs every test: unit tests, the local Hub server's own
# test, and the integration tests on real FUSE mounts; then the unit tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer (skip with HUBFS_SKIP_ASAN=1).
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/deps.sh
echo "== build (RelWithDebInfo)"
./scripts/build.sh
echo "== tests"
ctest --test-dir build --output-on-failure -j2 --timeout 900

# --- Python packages (h5chunk, hubfs): pytest with Debian's interpreter on the fresh build.
echo "== Python tests (pytest)"
py_rc=0
PYTHONPATH=build/python /usr/bin/python3 -m pytest -q tests/python || py_rc=$?
if [ "$py_rc" -eq 5 ]; then
  echo "pytest collected no tests in tests/python: treating that as a failure"
  exit 1
fi
[ "$py_rc" -eq 0 ] || exit "$py_rc"
# --- end Python

if [ "${HUBFS_SKIP_ASAN:-0}" != "1" ]; then
  echo "== build (ASan + UBSan)"
  # The unit tests, and the daemon itself under the FUSE integration tests: a sanitizer report
  # aborts the daemon, which fails the mount's tests.
  BUILD_DIR=build-asan BUILD_TARGETS="test_net test_hub test_cache test_reader test_h5chunk test_plugins test_server test_integration hubfs h5chunk_cli" \
    ./scripts/build.sh -DHUBFS_SANITIZE=ON
  echo "== unit and integration tests under ASan + UBSan"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j2 --timeout 900 -LE server
fi
