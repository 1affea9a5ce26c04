#!/usr/bin/env bash
# The stress and lifecycle tests in long mode: the fault rounds for SECONDS in all (default 180)
# over a larger repo, and 50 unmount-while-streaming cycles. They need root and /dev/fuse.
#   ./scripts/stress.sh [SECONDS]                 # RelWithDebInfo build in build/
#   HUBFS_STRESS_ASAN=1 ./scripts/stress.sh 180   # ASan+UBSan daemon and tests in build-asan/
# The same tests run in brief mode (about 2 minutes) inside ./scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export HUBFS_STRESS_SECONDS=${1:-180}
if [ "${HUBFS_STRESS_ASAN:-0}" = "1" ]; then
  BUILD_DIR=build-asan BUILD_TARGETS="hubfs test_integration" ./scripts/build.sh -DHUBFS_SANITIZE=ON
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  bin=build-asan/bin
else
  BUILD_TARGETS="hubfs test_integration" ./scripts/build.sh
  bin=build/bin
fi
"$bin/test_integration" --gtest_filter='StressTest.*:LifecycleTest.*'
