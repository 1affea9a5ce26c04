#!/usr/bin/python3
"""h5py over hubfs.open (no mount) against h5py over an fsspec HTTP file, on the bundled local
Hub server with a per-request latency and a per-connection bandwidth; and the requests a second
read with the same cache directory makes. Prints one JSON object.

    ./scripts/build.sh && /usr/bin/python3 bench/hf_open_bench.py [--latency-ms 50]
        [--bandwidth-mbps 400] [--frames 5] [--repeat 3]

The file: float32 (16, 8, 1024, 64), one frame per chunk (2 MiB), gzip level 1. Cold: an empty
cache directory for hubfs (fsspec's HTTP file caches nothing across opens). Timed: open + read of
frames 0:FRAMES, in this process."""

import argparse
import json
import os
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-ms", type=int, default=50)
    ap.add_argument("--bandwidth-mbps", type=int, default=400)
    ap.add_argument("--frames", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
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
