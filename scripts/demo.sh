#!/usr/bin/env bash
# The main job, offline: a local Hub server serves a sample dataset repo (zea-like ultrasound
# HDF5, Blosc-compressed, one file >= 100 MB) with 20 ms per request, hubfs mounts it, and HDF5
# tools read it cold and warm. Prints what it did, with times and upstream request counts.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

./scripts/deps.sh
echo "== building what the demo runs (hubfs, h5chunk, the Python packages; not the tests)"
BUILD_TARGETS="hubfs h5chunk_cli python" ./scripts/build.sh

WORK=${HUBFS_DEMO_DIR:-/tmp/hubfs-demo}
REPO=datasets/zea/sample-ultrasound
mkdir -p "$WORK"
if [ ! -f "$WORK/hub/$REPO/recordings/carotid.hdf5" ]; then
  echo "== writing the sample repo to $WORK/hub (once)"
  /usr/bin/python3 tools/make_sample_repo.py "$WORK/hub" --big-mb 240
fi

echo "== starting the local Hub server (20 ms per request)"
/usr/bin/python3 tools/hub_server.py --root "$WORK/hub" --port 0 --latency-ms 20 \
  >"$WORK/server.out" 2>"$WORK/server.err" &
SERVER_PID=$!
MNT="$WORK/mnt"
cleanup() {
  "$ROOT/build/bin/hubfs" unmount "$MNT" >/dev/null 2>&1 || true
  kill "$SERVER_PID" 2>/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 100); do
  grep -q listening "$WORK/server.out" 2>/dev/null && break
  sleep 0.1
done
ENDPOINT=$(awk '/listening/ {print $2}' "$WORK/server.out")
[ -n "$ENDPOINT" ] || { echo "the local Hub server did not start:"; cat "$WORK/server.err"; exit 1; }
echo "   $ENDPOINT"

stats() {  # "N requests, M MB" since the last reset
  curl -s "$ENDPOINT/_hubfs/stats" | /usr/bin/python3 -c \
    'import json,sys; s=json.load(sys.stdin); print("%d upstream requests, %.1f MB" % (s["requests"], s["bytes_sent"] / 1e6))'
}
reset() { curl -s -X POST "$ENDPOINT/_hubfs/reset" >/dev/null; }
timed() {  # prints seconds taken by "$@" (output discarded)
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l | xargs printf "%.2f s"
}

rm -rf "$WORK/cache"
mkdir -p "$MNT"
echo "== hubfs mount --endpoint $ENDPOINT --cache-dir $WORK/cache $REPO $MNT"
build/bin/hubfs mount --endpoint "$ENDPOINT" --cache-dir "$WORK/cache" "$REPO" "$MNT"

echo "== ls -lR $MNT"
ls -lR "$MNT"
echo "== getfattr-style: the content hash that keys the cache"
/usr/bin/python3 -c "import os,sys; print('   user.hubfs.sha256 =', os.getxattr(sys.argv[1], 'user.hubfs.sha256').decode())" \
  "$MNT/recordings/carotid.hdf5"
echo "== h5ls -r recordings/carotid.hdf5"
h5ls -r "$MNT/recordings/carotid.hdf5" | head -8 || true

H5="$MNT/recordings/carotid.hdf5"
# One row of frame 3 (h5dump reads element by element, so a large selection measures h5dump's
# formatting and HDF5's chunk re-decoding rather than hubfs: it is as slow on a local file).
SEL=(-d /data/raw_data -s 3,0,0,0,0 -c 1,1,1,128,1)
echo "== h5dump ${SEL[*]} (Blosc lz4 chunk of 11.5 MB), three times"
reset
t=$(timed h5dump "${SEL[@]}" "$H5"); echo "   cold: $t, $(stats)"
reset
t=$(timed h5dump "${SEL[@]}" "$H5"); echo "   warm: $t, $(stats)"
sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
reset
t=$(timed h5dump "${SEL[@]}" "$H5"); echo "   page cache dropped (served by the hubfs block cache): $t, $(stats)"
h5dump "${SEL[@]}" "$H5" | sed -n '/DATA {/,+2p' | head -3 || true

echo "== sha256sum of the whole $(du -h --apparent-size "$H5" | cut -f1) file, cold then warm"
reset
t=$(timed sha256sum "$H5"); echo "   cold: $t, $(stats)"
reset
t=$(timed sha256sum "$H5"); echo "   warm: $t, $(stats)"
echo "   through hubfs: $(sha256sum "$H5" | cut -c1-64)"
echo "   original:      $(sha256sum "$WORK/hub/$REPO/recordings/carotid.hdf5" | cut -c1-64)"

echo "== h5chunk read of frames 5:10 (parallel chunk reads, decoded into the output), cold then warm"
build/bin/hubfs unmount "$MNT"
rm -rf "$WORK/cache"; sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
build/bin/hubfs mount --endpoint "$ENDPOINT" --cache-dir "$WORK/cache" "$REPO" "$MNT"
reset
echo "   cold: $(build/bin/h5chunk read "$H5" /data/raw_data 5:10), $(stats)"
reset
echo "   warm: $(build/bin/h5chunk read "$H5" /data/raw_data 5:10), $(stats)"

echo "== Python: h5chunk next to h5py on the same frames 5:10 (PYTHONPATH=build/python)"
PYTHONPATH=build/python /usr/bin/python3 - "$H5" <<'PY'
import sys, time
import h5py, numpy as np
import h5chunk
with h5py.File(sys.argv[1], "r") as hf:
    t0 = time.perf_counter(); a = hf["data/raw_data"][5:10]; t1 = time.perf_counter()
    b = h5chunk.read(hf["data/raw_data"], np.s_[5:10]); t2 = time.perf_counter()
print(f"   h5py: {(t1 - t0) * 1e3:.0f} ms, h5chunk.read: {(t2 - t1) * 1e3:.0f} ms, {a.shape} {a.dtype},"
      f" equal: {np.array_equal(a, b)}")
PY

echo "== hubfs unmount $MNT"
build/bin/hubfs unmount "$MNT"
echo "done: cache kept in $WORK/cache ($(du -sh "$WORK/cache" | cut -f1))"
