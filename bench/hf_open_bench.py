#!/usr/bin/python3
"""h5py over hubfs.open (no mount) against h5py over an fsspec HTTP file, on the bundled local
Hub server with a per-request latency and a per-connection bandwidth; and the requests a second
read with the same cache directory makes. Prints one JSON object.

    ./scripts/build.sh && /usr/bin/python3 bench/hf_open_bench.py [--latency-ms 50]
        [--bandwidth-mbps 400] [--frames 5] [--repeat 3]

The file: float32 (16, 8, 1024, 64), one frame per chunk (2 MiB), gzip level 1. Cold: an empty
cache directory for hubfs (fsspec's HTTP file caches nothing across opens). Timed: open + read of
frames 0:FRAMES, in this process.

    /usr/bin/python3 bench/hf_open_bench.py --opens [--rounds 5] [--baseline-python DIR]
        [--open-frames 30] [--dir DIR] [--cache-dir DIR]

--opens: issue 40's "opening 16 files" alone, as bench/training_loop.py measures it (16
sequential h5py.File() in a fresh process; its 16 zea-like files of --open-frames frames each),
for rclone's mount (--vfs-cache-mode full) and hf:// (hubfs.open) on the branch and at its
commit (the URLs' revision option: no pin), a warm-up round first, then
--rounds rounds alternating the contenders process by process (a loaded machine drifts; each
round sees the same load): per contender the median time, the opener's CPU and the requests the
Hub answered per process; with --baseline-python (another build's build/python), that build's
hf:// too (on the branch and at the commit), on the same cache directory; and for hf:// (and the
baseline) the median of each round's ratio to rclone and to the baseline, paired within a round.
Each opening process
prints its phases: loading the extension, the first open (the session: stack and pin), the
first h5py open, the other 15.
Needs root for rclone's mount (skipped with a message where it cannot start). --dir keeps the
generated files for the next run; --cache-dir puts hf://'s cache elsewhere (emptied first): the
files on a tmpfs --dir, the cache on disk, where its records' renames cost what they cost a user."""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO_ROOT, "build", "python"))
import hubfs  # noqa: E402

SERVER = os.path.join(REPO_ROOT, "tools", "hub_server.py")


def control(endpoint, method, path):
    req = urllib.request.Request(endpoint + path, method=method, data=b"{}" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read() or b"null")


# One opening process (bench/training_loop.py's, with its phases): argv paths, hubfs options (or
# null: local paths), the build's python directory. Prints a JSON object of (wall, CPU) seconds.
OPENER = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[3])
import h5py
paths, opts = json.loads(sys.argv[1]), json.loads(sys.argv[2])
if opts is not None:
    import hubfs
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
marks = [(time.perf_counter(), cpu())]
def mark():
    marks.append((time.perf_counter(), cpu()))
if opts is not None:
    hubfs._remote._core()  # what the first hubfs.open does first
mark()
for i, p in enumerate(paths):
    f = hubfs.open(p, **opts) if opts is not None else p
    if i == 0:
        mark()
    h5py.File(f, "r").close()
    if i == 0:
        mark()
mark()
names = ["extension", "first_open", "first_h5py", "rest"]
out = {n: (b[0] - a[0], b[1] - a[1]) for n, a, b in zip(names, marks, marks[1:])}
out["total"] = (marks[-1][0] - marks[0][0], marks[-1][1] - marks[0][1])
print(json.dumps(out))
"""


def opens(args):
    sys.path.insert(0, HERE)
    import peer_bench  # noqa: E402  (bench/: the local Hub, rclone's mount)
    import training_loop  # noqa: E402  (the workload's files)
    work = args.dir or tempfile.mkdtemp(prefix="hubfs-open-bench-")
    root = os.path.join(work, "hub")
    repo_dir = os.path.join(root, peer_bench.REPO)
    names = [f"{training_loop.SUBDIR}/rec{k:02d}.hdf5" for k in range(16)]
    if not all(os.path.exists(os.path.join(repo_dir, n)) for n in names):
        names = training_loop.write_files(repo_dir, 16, args.open_frames, 40)
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    hub = peer_bench.Hub(root, args.latency_ms, args.bandwidth_mbps, 0, os.path.join(work, "logs", "hub.log"))
    cache = args.cache_dir or os.path.join(work, "hf-cache")
    shutil.rmtree(cache, ignore_errors=True)
    urls = [f"hf://{peer_bench.REPO}/{n}" for n in names]
    hf = {"endpoint": hub.url, "cache_dir": cache, "token": False}
    contenders = {"hf://": (urls, hf, os.path.join(REPO_ROOT, "build", "python"))}
    # The same files at the branch's commit: no pin (a sha never moves), as a worker handed its
    # parent's commit opens them.
    with urllib.request.urlopen(f"{hub.url}/api/{peer_bench.REPO}/revision/main", timeout=10) as r:
        commit = json.loads(r.read())["sha"]
    contenders["hf:// @commit"] = (urls, dict(hf, revision=commit), os.path.join(REPO_ROOT, "build", "python"))
    if args.baseline_python:
        contenders["hf:// baseline"] = (urls, hf, os.path.abspath(args.baseline_python))
        contenders["hf:// base @commit"] = (urls, dict(hf, revision=commit), os.path.abspath(args.baseline_python))
    mount = None
    try:
        if shutil.which("rclone"):
            mnt = os.path.join(work, "rclone-mnt")
            os.makedirs(mnt, exist_ok=True)
            shutil.rmtree(os.path.join(work, "rclone-cache"), ignore_errors=True)
            try:
                mount = peer_bench.RcloneMount(hub, mnt, os.path.join(work, "rclone-cache"),
                                               os.path.join(work, "logs", "rclone.log"))
                os.listdir(os.path.join(mnt, training_loop.SUBDIR))
                contenders = dict({"rclone": ([os.path.join(mnt, n) for n in names], None, "")}, **contenders)
            except Exception as e:  # noqa: BLE001 (a contender that cannot start is reported)
                print(f"rclone: skipped ({e})")
        runs = {k: [] for k in contenders}
        for r in range(args.rounds + 1):  # round 0 warms the caches, untimed
            for name, (paths, options, python_dir) in contenders.items():
                before = hub.stats().get("requests", 0)
                p = subprocess.run(["/usr/bin/python3", "-c", OPENER, json.dumps(paths), json.dumps(options),
                                    python_dir], capture_output=True, text=True, timeout=600)
                if p.returncode != 0:
                    raise RuntimeError(f"{name}: {p.stderr}")
                hub.wait_quiet()
                if r:
                    runs[name].append(dict(json.loads(p.stdout), requests=hub.stats().get("requests", 0) - before))
    finally:
        if mount:
            mount.close()
        hub.stop()
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    med = {name: {k: (statistics.median(r[k][0] for r in rs), statistics.median(r[k][1] for r in rs))
                  for k in ("extension", "first_open", "first_h5py", "rest", "total")}
           for name, rs in runs.items()}
    print(f"opening 16 files, {args.latency_ms} ms/request; medians of {args.rounds} fresh processes, "
          f"contenders alternating; wall/CPU ms")
    for name, m in med.items():
        phases = "  ".join(f"{k} {1e3 * m[k][0]:.1f}/{1e3 * m[k][1]:.1f}"
                           for k in ("extension", "first_open", "first_h5py", "rest"))
        requests = statistics.median(r["requests"] for r in runs[name])
        ratio = f"; {m['total'][0] / med['rclone']['total'][0]:.2f} x rclone" if "rclone" in med and name != "rclone" else ""
        print(f"{name:15} {1e3 * m['total'][0]:6.1f} ms, CPU {1e3 * m['total'][1]:5.1f} ms, {requests:g} requests"
              f"{ratio}  ({phases})")
        # Each round's total, in round order: a loaded machine's outliers show here, not in the median.
        totals = [1e3 * r["total"][0] for r in runs[name]]
        print(f"{'':15} rounds: " + " ".join(f"{t:.1f}" for t in totals) + f"  (range {min(totals):.1f}-{max(totals):.1f})")
        # Paired by round (the contenders of a round ran one after the other, under about the same
        # load): the median of each round's ratio moves less with the machine's load than the
        # ratio of medians does.
        for other in ("rclone", "hf:// baseline"):
            if other in runs and other != name and name in ("hf://", "hf:// baseline"):
                paired = [a["total"][0] / b["total"][0] for a, b in zip(runs[name], runs[other])]
                print(f"{'':15} per-round ratio to {other}: median {statistics.median(paired):.3f} "
                      f"(range {min(paired):.2f}-{max(paired):.2f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-ms", type=int, default=50)
    ap.add_argument("--bandwidth-mbps", type=int, default=400)
    ap.add_argument("--frames", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--opens", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline-python", default="")
    ap.add_argument("--open-frames", type=int, default=30)
    ap.add_argument("--dir", default="")
    ap.add_argument("--cache-dir", default="")
    args = ap.parse_args()
    if args.opens:
        return opens(args)
    work = tempfile.mkdtemp(prefix="hubfs-hf-bench-")
    repo = os.path.join(work, "hub", "datasets", "lab", "bench")
    os.makedirs(repo)
    data = (np.random.default_rng(1).normal(size=(16, 8, 1024, 64)) * 100).astype("float32")
    with h5py.File(os.path.join(repo, "scan.hdf5"), "w") as f:
        f.create_dataset("data/raw_data", data=data, chunks=(1, 8, 1024, 64), compression="gzip",
                         compression_opts=1)
    proc = subprocess.Popen(["/usr/bin/python3", SERVER, "--root", os.path.join(work, "hub"), "--host", "127.0.0.1",
                             "--latency-ms", str(args.latency_ms), "--bandwidth-mbps", str(args.bandwidth_mbps),
                             "--exit-on-stdin-eof"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    endpoint = proc.stdout.readline().split()[1]
    url = "hf://datasets/lab/bench/scan.hdf5"
    want = data[0:args.frames]
    import fsspec
    results = {"hubfs_open_s": [], "fsspec_http_s": []}
    try:
        for i in range(args.repeat):
            cache = os.path.join(work, f"cache{i}")
            t0 = time.perf_counter()
            with hubfs.open(url, endpoint=endpoint, cache_dir=cache, token=False) as f, h5py.File(f) as h5:
                got = h5["data/raw_data"][0:args.frames]
            results["hubfs_open_s"].append(time.perf_counter() - t0)
            assert np.array_equal(got, want)
            t0 = time.perf_counter()
            with fsspec.open(f"{endpoint}/datasets/lab/bench/resolve/main/scan.hdf5", "rb") as f, h5py.File(f) as h5:
                got = h5["data/raw_data"][0:args.frames]
            results["fsspec_http_s"].append(time.perf_counter() - t0)
            assert np.array_equal(got, want)
        # A second read, in a new process, with the first run's cache directory.
        code = ("import sys, h5py; sys.path.insert(0, sys.argv[1]); import hubfs\n"
                "with hubfs.open(sys.argv[2], endpoint=sys.argv[3], cache_dir=sys.argv[4], token=False) as f, "
                "h5py.File(f) as h5: h5['data/raw_data'][0:int(sys.argv[5])]\n")
        control(endpoint, "POST", "/_hubfs/reset")
        subprocess.run([sys.executable, "-c", code, os.path.join(REPO_ROOT, "build", "python"), url, endpoint,
                        os.path.join(work, "cache0"), str(args.frames)], check=True)
        s = control(endpoint, "GET", "/_hubfs/stats")
        results["second_read_requests"] = {k: s[k] for k in ("requests", "api_requests", "resolve_requests",
                                                             "cdn_requests")}
    finally:
        proc.terminate()
        proc.wait()
        subprocess.run(["rm", "-rf", work])
    out = {"latency_ms": args.latency_ms, "bandwidth_mbps": args.bandwidth_mbps, "frames": args.frames,
           "hubfs_open_median_s": round(statistics.median(results["hubfs_open_s"]), 3),
           "fsspec_http_median_s": round(statistics.median(results["fsspec_http_s"]), 3),
           "runs": results}
    out["speedup"] = round(out["fsspec_http_median_s"] / out["hubfs_open_median_s"], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
