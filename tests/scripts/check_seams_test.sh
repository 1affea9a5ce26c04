#!/usr/bin/env bash
# scripts/check_seams.sh bites: on a copy of the tree, a core file given a real clock behind an
# alias, a sleep in a unit-test directory, a condition variable's timed wait, and an options
# struct defaulting to the real Env each make it fail and name the line; a wait on the Env's
# clock does not. The copy's other findings (if any)
# do not matter here: only whether the mutated lines are reported.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tree"
cp -r "$repo/core" "$repo/tests" "$tmp/tree/"

fail() { echo "FAIL: $*" >&2; exit 1; }
run() { # prints the script's report; its exit code in $rc
  rc=0
  out=$("$repo/scripts/check_seams.sh" "$tmp/tree" 2>&1) || rc=$?
}

run
case "$out" in *recent_keys.h*|*wait_probe*|*sleep_probe*|*block_cache.h*) fail "the unmutated copy already reports a file this test mutates:
$out" ;; esac

# 1. A real clock behind an alias, in a core file.
cat >>"$tmp/tree/core/reader/recent_keys.h" <<'CC'
namespace hubfs {
using C = std::chrono::steady_clock;
inline auto mutant_now() { return C::now(); }
}  // namespace hubfs
CC
run
[ "$rc" -ne 0 ] || fail "a steady_clock alias in core/reader/recent_keys.h passed the check"
grep -q "core/reader/recent_keys.h:[0-9]*:using C = std::chrono::steady_clock;" <<<"$out" ||
  fail "the report does not name the alias line:
$out"

# 2. A sleep in a unit-test directory (tests/reader is labelled unit).
cp "$repo/core/reader/recent_keys.h" "$tmp/tree/core/reader/recent_keys.h"
cat >"$tmp/tree/tests/reader/sleep_probe_test.cc" <<'CC'
#include <thread>
void probe() { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }
CC
run
[ "$rc" -ne 0 ] || fail "a sleep in tests/reader passed the check"
grep -q "tests/reader/sleep_probe_test.cc:2:" <<<"$out" || fail "the report does not name the sleep:
$out"
rm "$tmp/tree/tests/reader/sleep_probe_test.cc"

# 3. A condition variable's own timed wait in core/ is reported; the Env clock's is not.
cat >"$tmp/tree/core/common/wait_probe.h" <<'CC'
void env_wait(const hubfs::MonotonicClock& clock_, std::condition_variable& cv, std::unique_lock<std::mutex>& lock) {
  clock_.wait_until(cv, lock, clock_.now(), [] { return true; });
}
void real_wait(std::condition_variable& cv_, std::unique_lock<std::mutex>& lock, std::chrono::milliseconds d) {
  cv_.wait_for(lock, d);
}
CC
run
[ "$rc" -ne 0 ] || fail "a condition variable's wait_for in core/ passed the check"
grep -q "core/common/wait_probe.h:5:" <<<"$out" || fail "the report does not name the cv wait:
$out"
if grep -q "core/common/wait_probe.h:2:" <<<"$out"; then fail "a wait on the Env's clock was reported:
$out"; fi
rm "$tmp/tree/core/common/wait_probe.h"

# 4. An options struct in core/ defaulting to the real Env (what CacheOptions did).
grep -q '^  Env\* env = nullptr;$' "$tmp/tree/core/cache/block_cache.h" || fail "CacheOptions has no required env to mutate"
sed -i 's/^  Env\* env = nullptr;$/  Env* env = \&Env::real();/' "$tmp/tree/core/cache/block_cache.h"
run
[ "$rc" -ne 0 ] || fail "CacheOptions defaulting to Env::real() passed the check"
grep -q "core/cache/block_cache.h:[0-9]*:  Env\* env = &Env::real();" <<<"$out" ||
  fail "the report does not name the default:
$out"
sed -i 's/^  Env\* env = &Env::real();$/  Env* env = nullptr;/' "$tmp/tree/core/cache/block_cache.h"

# 5. A deadline on the real clock behind the Env's back (what xet_source.cc's Deadline::within did).
cat >"$tmp/tree/core/common/clock_probe.h" <<'CC'
#include "common/deadline.h"
inline hubfs::Deadline probe() { return hubfs::Deadline::after(std::chrono::seconds(1), hubfs::MonotonicClock::real()); }
CC
run
[ "$rc" -ne 0 ] || fail "MonotonicClock::real() in core/ passed the check"
grep -q "core/common/clock_probe.h:2:" <<<"$out" || fail "the report does not name the real clock:
$out"
rm "$tmp/tree/core/common/clock_probe.h"
echo "check_seams bites: alias, unit-test sleep, cv wait, a default to the real Env and the real clock by name reported; the Env clock's wait accepted"
