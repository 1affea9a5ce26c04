#!/usr/bin/env bash
# Configures and builds hubfs into build/ (binaries in build/bin). Extra args go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
# BUILD_TARGETS (space-separated) limits the build to those targets.
if [ -n "${BUILD_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target $BUILD_TARGETS
else
  cmake --build "$BUILD_DIR" -j"$(nproc)"
fi
