#!/usr/bin/env bash
# Configures and builds hubfs into build/ (binaries in build/bin). Extra args go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
# Ninja for new build directories (its no-op and incremental builds take well under a second,
# make's several seconds: that is the edit loop of `test.sh --quick`); a directory configured
# earlier keeps its generator, since CMake refuses to switch one.
GENERATOR=()
if command -v ninja >/dev/null && ! grep -qs '^CMAKE_GENERATOR:INTERNAL=Unix Makefiles' "$BUILD_DIR/CMakeCache.txt"; then
  GENERATOR=(-G Ninja)
fi
cmake -S . -B "$BUILD_DIR" "${GENERATOR[@]}" -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-RelWithDebInfo} "$@" >/dev/null
# BUILD_TARGETS (space-separated) limits the build to those targets.
if [ -n "${BUILD_TARGETS:-}" ]; then
  # shellcheck disable=SC2086
  cmake --build "$BUILD_DIR" -j"$(nproc)" --target $BUILD_TARGETS
else
  cmake --build "$BUILD_DIR" -j"$(nproc)"
fi
