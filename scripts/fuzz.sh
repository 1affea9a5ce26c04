#!/usr/bin/env bash
# Builds the h5chunk decoder fuzz targets (libFuzzer + ASan + UBSan, clang) into build-fuzz/,
# writes their seed corpus, and runs each for FUZZ_SECONDS (default 20). Any crash, sanitizer
# report or violated invariant fails the script; the reproducer lands in build-fuzz/artifacts/.
#
#   ./scripts/fuzz.sh                      # every target, 20 s each
#   FUZZ_SECONDS=600 ./scripts/fuzz.sh lz4 # one target, longer
#   FUZZ_JOBS=2 ./scripts/fuzz.sh          # two targets at a time
#
# The corpus each run grows is kept in build-fuzz/corpus/<target>, so later runs resume it.
set -euo pipefail
# libFuzzer comes with clang: install it if this machine lacks it (scripts/deps.sh installs it
# for test.sh's sanitizer builds; the normal build uses gcc).
if ! command -v clang++ >/dev/null; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends clang
fi
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-fuzz}
SECONDS_EACH=${FUZZ_SECONDS:-20}
JOBS=${FUZZ_JOBS:-1}
ALL_TARGETS="blosc lz4 zstd deflate shuffle bitshuffle fletcher32 pipeline"
TARGETS=${*:-$ALL_TARGETS}

cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHUBFS_FUZZERS=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
build_targets="fuzz_seeds"
for t in $TARGETS; do build_targets="$build_targets fuzz_$t"; done
# shellcheck disable=SC2086
cmake --build "$BUILD_DIR" -j"${FUZZ_BUILD_JOBS:-2}" --target $build_targets

corpus="$BUILD_DIR/corpus"
seeds="$BUILD_DIR/seeds"
artifacts="$BUILD_DIR/artifacts"
mkdir -p "$corpus" "$artifacts"
rm -rf "$seeds"
"$BUILD_DIR/bin/fuzz_seeds" "$seeds"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
run_one() {
  local t=$1
  mkdir -p "$corpus/$t" "$artifacts/$t"
  local log="$BUILD_DIR/fuzz_$t.log"
  # -rss_limit_mb: the decoders allocate at most a few output sizes of 4 MiB; far more is a bug.
  if "$BUILD_DIR/bin/fuzz_$t" -max_total_time="$SECONDS_EACH" -rss_limit_mb=2048 -timeout=20 \
      -print_final_stats=1 -artifact_prefix="$artifacts/$t/" \
      "$corpus/$t" "$seeds/$t" >"$log" 2>&1; then
    local runs
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    echo "fuzz_$t: ok, $runs inputs in ${SECONDS_EACH} s, corpus $(ls "$corpus/$t" | wc -l) files"
  else
    echo "fuzz_$t: FAILED (log: $log, reproducer in $artifacts/$t/)"
    grep -m 20 -E 'ERROR|SUMMARY|invariant|==[0-9]+==' "$log" || tail -20 "$log"
    return 1
  fi
}

failed=0
pids=()
for t in $TARGETS; do
  if [ "$JOBS" -gt 1 ]; then
    run_one "$t" &
    pids+=($!)
    if [ "${#pids[@]}" -ge "$JOBS" ]; then
      wait "${pids[0]}" || failed=1
      pids=("${pids[@]:1}")
    fi
  else
    run_one "$t" || failed=1
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit $failed
