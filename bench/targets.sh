#!/usr/bin/env bash
# Runs every open issue's target benchmark once, each beside a baseline build measured in the
# same minutes, and keeps each one's output in OUT/*.log. Meant for a quiet machine (about 11
# minutes at 2 cores): the numbers in docs/benchmarks.md's "Every issue's targets on a quiet
# machine" sections come from it.
#
#   bench/targets.sh BASE_TREE [OUT_DIR]
#
# BASE_TREE is another checkout of hubfs, already built (its build/bin and build/python are the
# baseline). Needs root (the mounts); installs what the contenders need (scripts/deps.sh --bench). Each bench is the
# command its issue names; see each one's --help.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ ! -x "$1/build/bin/hubfs" ]; then
  echo "usage: bench/targets.sh BASE_TREE [OUT_DIR]: BASE_TREE must be a built hubfs checkout" \
       "(its build/bin/hubfs is missing)" >&2
  exit 2
fi
base=$(cd "$1" && pwd)
out=${2:-/tmp/hubfs-targets}
mkdir -p "$out"
py=/usr/bin/python3
./scripts/deps.sh --bench >/dev/null || { echo "scripts/deps.sh --bench failed: the contenders' packages are missing" >&2; exit 2; }
failed=0

# What moves this machine's numbers besides its load (docs/benchmarks.md, sessions 31 and 36): a
# guest that hands freed memory back to its host (every page written afresh then faults in
# again), and DAMON paging out page cache left unread for a while (a warm file read from disk).
reclaim=/sys/module/page_reporting/parameters
echo "# free page reporting: $( [ -r $reclaim/page_reporting_order ] && \
  echo "on (order $(cat $reclaim/page_reporting_order), $(( $(cat $reclaim/reported_kib) >> 20 )) GiB handed back so far)" || echo off)"
for k in /sys/kernel/mm/damon/admin/kdamonds/*/; do
  [ "$(cat "$k/state" 2>/dev/null)" = on ] && \
    echo "# DAMON: on, $(cat "$k"/contexts/*/schemes/*/action 2>/dev/null | tr '\n' ' ')of regions idle $(cat "$k"/contexts/*/schemes/*/access_pattern/age/min 2>/dev/null | head -1) aggregation intervals"
done

# One bench: its name, then the command; the load before it goes first in its log.
run() {
  local name=$1; shift
  echo "== $name ($(date -u +%H:%M:%S) UTC, load $(cut -d' ' -f1-3 /proc/loadavg))"
  { echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"; echo "# $*"; "$@"; } >"$out/$name.log" 2>&1
  local rc=$?
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/$name.log"
  if [ $rc -ne 0 ]; then echo "   FAILED (exit $rc): see $out/$name.log"; failed=1; fi
}

# Issue 39: a cold 16-frame h5chunk read of a Xet file against the direct limit.
run xet_peer "$py" bench/peer_bench.py --xet --contenders hubfs,base,direct \
  --baseline-bin "$base/build/bin" --workloads zea16 --repeat 5
run xet_hf "$py" bench/hf_h5chunk_bench.py --xet --only h5chunk_cli,h5chunk_cli_base,mount_h5chunk,direct_16 \
  --baseline-bin "$base/build/bin" --repeat 3 --cp-mb 0
# Issue 40: the training loop (this tree, then the base's tree the minute after) and opens.
run train "$py" bench/training_loop.py --contenders local,mount,hf --epochs 2
run train_base bash -c "cd '$base' && '$py' bench/training_loop.py --contenders local,hf --epochs 1"
run opens "$py" bench/hf_open_bench.py --opens --rounds 7 --baseline-python "$base/build/python"
# Issue 42: 50 ms / 400 Mbit/s, then 20 ms with no cap.
run peer50 "$py" bench/peer_bench.py --repeat 3 --workloads zea16 --contenders local,hubfs,base,rclone \
  --baseline-bin "$base/build/bin"
run hf50 "$py" bench/hf_h5chunk_bench.py --repeat 5 --cp-mb 0 --baseline-bin "$base/build/bin"
run peer20 "$py" bench/peer_bench.py --latency-ms 20 --bandwidth-mbps 0 --contenders hubfs,base,rclone \
  --workloads zea16,zea5 --repeat 3 --baseline-bin "$base/build/bin"
echo "logs in $out"
exit $failed
