#!/usr/bin/env bash
# Time enters core/ one way: through the stack's Env (core/common/env.h). Fails (exit 1, printing
# the offending lines) on
#   - any mention of a real clock (steady_clock, system_clock, high_resolution_clock, also behind
#     an alias such as `using Clock = std::chrono::steady_clock`, clock_gettime, gettimeofday,
#     time(nullptr)), a sleep (sleep_for, sleep_until, usleep, nanosleep, sleep()), or a wait
#     with a limit on a condition variable or future (`x.wait_until(`, `x.wait_for(`), in core/
#     outside the files that are the real Env: common/env.{h,cc}, common/deadline.{h,cc} (the
#     clock seam and the real clock), common/timer.{h,cc} (the real Env's timer thread) and
#     common/log.cc (log timestamps). A wait with a limit goes through the Env's clock instead:
#     Deadline::wait or MonotonicClock::wait_until (`clock.wait_until(cv, lock, ...)`), which a
#     test's manual clock ends when it moves;
#   - the real Env or its clock named (`Env::real()`, `MonotonicClock::real()`) in core/ outside
#     common/env.{h,cc} and common/deadline.{h,cc} (where the real clock is defined): no component and no
#     options struct defaults to it, and the composition root (core/stack) takes its Env from its
#     caller too; the mains (tools/, fuse/, python/) pass the real one, tests theirs;
#   - a sleep in a unit-test directory (tests/<dir> whose tests are labelled `unit` in
#     tests/CMakeLists.txt): unit tests move a manual clock instead of waiting for time to pass.
# Mains (tools/, fuse/, bench/) may use the real clock: they are not in core/.
#
# Usage: scripts/check_seams.sh [ROOT]   (ROOT: a tree with core/ and tests/; default: this repo)
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$root"

clock='steady_clock|system_clock|high_resolution_clock|clock_gettime|gettimeofday|\btime\((nullptr|NULL|0)\)'
sleep='sleep_for|sleep_until|usleep|nanosleep|\bsleep\('
# A condition variable's or future's own timed wait (its object is not a clock).
timed_wait='(\.|->)(wait_until|wait_for)\('
clock_wait='[A-Za-z_]*clock[A-Za-z_]*(\(\))?(\.|->)wait_until\('
allowed='^core/common/(env\.h|env\.cc|deadline\.h|deadline\.cc|timer\.h|timer\.cc|log\.cc):'
real_env='\b(Env|MonotonicClock)::real\(\)'
real_env_allowed='^core/common/(env\.h|env\.cc|deadline\.h|deadline\.cc):'

failed=0
report() {  # $1: what, $2: the offending lines (none: fine)
  if [ -n "$2" ]; then
    echo "check_seams: $1:" >&2
    echo "$2" >&2
    failed=1
  fi
}

core_files() { find core -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cpp' -o -name '*.hpp' \) | sort; }

report "the real clock or a sleep in core/ (time comes from the stack's Env: core/common/env.h)" \
  "$(core_files | xargs grep -nE "$clock|$sleep" /dev/null | grep -vE "$allowed" || true)"
report "a wait with a real-clock limit in core/ (wait on the Env's clock: Deadline::wait)" \
  "$(core_files | xargs grep -nE "$timed_wait" /dev/null | grep -vE "$allowed" | grep -vE "$clock_wait" || true)"
report "the real Env named in core/ (take the stack's Env from the caller: no default to the real one)" \
  "$(core_files | xargs grep -nE "$real_env" /dev/null | grep -vE "$real_env_allowed" || true)"

# Unit-test directories, as tests/CMakeLists.txt labels them: hubfs_test_dir(NAME unit ...).
unit_dirs=$(sed -nE 's/^[[:space:]]*hubfs_test_dir\(([a-z0-9_]+)[[:space:]]+unit\b.*/\1/p' tests/CMakeLists.txt)
if [ -z "$unit_dirs" ]; then
  echo "check_seams: found no unit-test directory in tests/CMakeLists.txt" >&2
  exit 1
fi
for d in $unit_dirs; do
  [ -d "tests/$d" ] || continue
  report "a sleep in the unit-test directory tests/$d (move a ManualEnv instead: tests/support/manual_env.h)" \
    "$(find "tests/$d" -type f \( -name '*.h' -o -name '*.cc' \) | sort | xargs grep -nE "$sleep" /dev/null || true)"
done

exit $failed
