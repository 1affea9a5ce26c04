#!/usr/bin/python3
"""h5chunk vs h5py from Python, on the same reads, in one run; prints a table and the ratios.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_h5chunk.py [--repeat R] [--dir DIR]
        [--no-mount] [--latency-ms 50] [--bandwidth-mbps 400]

Files (written once into DIR, default /tmp/h5chunk_py_bench): zea-like (frames, tx, ax, el, ch)
= (16, 24, 2048, 64, 1), one frame per chunk, as bench/h5chunk_local.cc writes them: float32
Blosc lz4 + byte shuffle, float32 Blosc zstd + bit shuffle, int16 Blosc lz4 + byte shuffle.

1. Local file (page cache warm), 16 and 5 frames: h5py ds[sel] vs h5chunk ds[sel], each
   allocating its result (as a user's code would), best of R, contenders interleaved.
2. 4 Python threads each reading 4 single frames at once vs the same 16 reads one after another.
3. Through a hubfs mount of the bundled local Hub server (--latency-ms per request,
   --bandwidth-mbps per connection): cold = fresh mount, empty block cache and
   `echo 3 > /proc/sys/vm/drop_caches` before each read; warm = the same read again.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO_ROOT, "build", "python"))
import h5chunk  # noqa: E402
import hubfs  # noqa: E402

SHAPE = (16, 24, 2048, 64, 1)
CHUNK = (1, 24, 2048, 64, 1)
BLOSC = 32001
FILES = {
    # name: (dtype, blosc cd_values: clevel, shuffle (1 byte, 2 bit), compressor (1 lz4, 5 zstd))
    "f32_lz4_shuffle": ("float32", (0, 0, 0, 0, 5, 1, 1)),
    "f32_zstd_bitshuffle": ("float32", (0, 0, 0, 0, 7, 2, 5)),
    "i16_lz4_shuffle": ("int16", (0, 0, 0, 0, 5, 1, 1)),
}
DATASET = "/data/raw_data"


def zea_like(dtype):
    """RF-like samples: integer ADC counts of decaying echoes plus noise (as the C++ bench)."""
    rng = np.random.default_rng(7)
    sample = np.arange(SHAPE[2], dtype=np.float32)[:, None]
    channel = np.arange(SHAPE[3], dtype=np.float32)[None, :]
    echo = 1500 * np.exp(-sample / 700) * np.sin(sample * 0.31 + channel * 0.05)
    out = np.empty(SHAPE, dtype)
    for f in range(SHAPE[0]):
        frame = echo[None, :, :, None] + rng.normal(0, 6, size=SHAPE[1:]).astype(np.float32)
        out[f] = np.round(frame).astype(dtype)
    return out


def write_files(directory):
    os.makedirs(directory, exist_ok=True)
    paths = {}
    for name, (dtype, cd) in FILES.items():
        path = os.path.join(directory, name + ".hdf5")
        if not os.path.exists(path):
            tmp = path + ".tmp"
            with h5py.File(tmp, "w") as f:
                f.create_dataset(DATASET, data=zea_like(dtype), chunks=CHUNK, compression=BLOSC,
                                 compression_opts=cd)
            os.rename(tmp, path)
        paths[name] = path
    return paths


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def timed_cpu(fn):
    """(wall s, CPU s of the whole process, all threads): on a shared machine the wall time
    swings with the neighbours, the CPU a read costs does not."""
    c0, t0 = time.process_time(), time.perf_counter()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def load():
    return os.getloadavg()[0]


def bench_local(paths, repeat):
    print(f"1. local file, page cache warm, best of {repeat} (load average {load():.1f})")
    print(f"   {'file':22} {'frames':>6} {'MB':>6} {'h5py ms':>9} {'h5chunk ms':>11} {'ratio':>6}"
          f"   {'CPU ms/read: h5py':>17} {'h5chunk':>8}")
    rows = []
    for name, path in paths.items():
        with h5py.File(path, "r") as hf, h5chunk.File(path) as f:
            hds, ds = hf[DATASET], f[DATASET]
            for frames in (16, 5):
                sel = np.s_[0:frames]
                assert np.array_equal(ds[sel], hds[sel])  # the same answer, then the clock
                best_h5py = best_h5chunk = 1e9
                cpu_h5py = cpu_h5chunk = 0.0
                for _ in range(repeat):
                    wall, cpu = timed_cpu(lambda: hds[sel])
                    best_h5py, cpu_h5py = min(best_h5py, wall), cpu_h5py + cpu / repeat
                    wall, cpu = timed_cpu(lambda: ds[sel])
                    best_h5chunk, cpu_h5chunk = min(best_h5chunk, wall), cpu_h5chunk + cpu / repeat
                mb = ds[0].nbytes * frames / 1e6
                ratio = best_h5py / best_h5chunk
                rows.append((name, frames, ratio))
                print(f"   {name:22} {frames:>6} {mb:>6.0f} {best_h5py * 1e3:>9.1f} {best_h5chunk * 1e3:>11.1f}"
                      f" {ratio:>5.2f}x   {cpu_h5py * 1e3:>17.0f} {cpu_h5chunk * 1e3:>8.0f}")
    return rows


def bench_threads(paths, repeat):
    path = paths["f32_lz4_shuffle"]
    print(f"\n2. 16 single-frame reads of {os.path.basename(path)}: 4 Python threads at once vs one"
          f" after another, best of {repeat}")
    with h5chunk.File(path) as f:
        ds = f[DATASET]

        def serial():
            for i in range(16):
                ds[i]

        def threaded():
            def worker(k):
                for i in range(k, 16, 4):
                    ds[i]
            ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()

        best_serial = best_threads = 1e9
        for _ in range(repeat):
            best_serial = min(best_serial, timed(serial))
            best_threads = min(best_threads, timed(threaded))
    ratio = best_serial / best_threads
    print(f"   serial {best_serial * 1e3:.1f} ms, 4 threads {best_threads * 1e3:.1f} ms:"
          f" threads {ratio:.2f}x serial's speed")
    return ratio


def drop_caches():
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def start_hub(root, latency_ms, bandwidth_mbps):
    proc = subprocess.Popen(
        ["/usr/bin/python3", os.path.join(REPO_ROOT, "tools", "hub_server.py"), "--root", root,
         "--host", "127.0.0.1", "--latency-ms", str(latency_ms), "--bandwidth-mbps", str(bandwidth_mbps),
         "--exit-on-stdin-eof"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline().split()
    if len(line) != 4 or line[0] != "listening":
        proc.kill()
        raise RuntimeError("the local Hub server did not start")
    return proc, line[1]


def bench_mount(paths, repeat, latency_ms, bandwidth_mbps, work):
    root = os.path.join(work, "hub")
    repo_dir = os.path.join(root, "datasets", "zea", "bench")
    os.makedirs(repo_dir, exist_ok=True)
    names = ["f32_lz4_shuffle", "f32_zstd_bitshuffle"]
    for name in names:
        link = os.path.join(repo_dir, name + ".hdf5")
        if not os.path.exists(link):
            os.link(paths[name], link) if os.stat(paths[name]).st_dev == os.stat(repo_dir).st_dev \
                else shutil.copy(paths[name], link)
    proc, endpoint = start_hub(root, latency_ms, bandwidth_mbps)
    can_drop = drop_caches()
    print(f"\n3. through hubfs: local Hub server at {latency_ms} ms/request, {bandwidth_mbps} Mbit/s per"
          f" connection; cold = fresh mount + empty cache{' + drop_caches' if can_drop else ' (drop_caches NOT possible)'}"
          f", best of {repeat}")
    print(f"   {'file':22} {'frames':>6} {'h5py cold':>10} {'h5chunk cold':>13} {'ratio':>6}"
          f" {'h5py warm':>10} {'h5chunk warm':>13} {'ratio':>6}")
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt, exist_ok=True)
    rows = []
    try:
        for name in names:
            for frames in (16, 5):
                sel = np.s_[0:frames]
                best = {}
                for _ in range(repeat):
                    for who in ("h5py", "h5chunk"):
                        cache = tempfile.mkdtemp(prefix="hubfs-bench-cache-", dir=work)
                        with hubfs.mount("datasets/zea/bench", mnt, endpoint=endpoint, cache_dir=cache):
                            path = os.path.join(mnt, name + ".hdf5")
                            drop_caches()
                            for phase in ("cold", "warm"):
                                if who == "h5py":
                                    with h5py.File(path, "r") as hf:
                                        t = timed(lambda: hf[DATASET][sel])
                                else:
                                    with h5chunk.File(path) as f:
                                        t = timed(lambda: f[DATASET][sel])
                                key = (who, phase)
                                best[key] = min(best.get(key, 1e9), t)
                        shutil.rmtree(cache, ignore_errors=True)
                cold = best[("h5py", "cold")] / best[("h5chunk", "cold")]
                warm = best[("h5py", "warm")] / best[("h5chunk", "warm")]
                rows.append((name, frames, cold, warm))
                print(f"   {name:22} {frames:>6} {best[('h5py', 'cold')] * 1e3:>8.0f}ms"
                      f" {best[('h5chunk', 'cold')] * 1e3:>11.0f}ms {cold:>5.2f}x"
                      f" {best[('h5py', 'warm')] * 1e3:>8.0f}ms {best[('h5chunk', 'warm')] * 1e3:>11.0f}ms"
                      f" {warm:>5.2f}x")
    finally:
        proc.stdin.close()
        proc.terminate()
        proc.wait(timeout=10)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--mount-repeat", type=int, default=2)
    p.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "h5chunk_py_bench"))
    p.add_argument("--no-mount", action="store_true")
    p.add_argument("--latency-ms", type=int, default=50)
    p.add_argument("--bandwidth-mbps", type=int, default=400)
    args = p.parse_args()
    if not h5py.h5z.filter_avail(BLOSC):
        sys.exit("the HDF5 Blosc plugin is missing (apt-get install hdf5-filter-plugin-blosc-serial)")
    paths = write_files(args.dir)
    print(f"h5chunk {os.cpu_count()} cores, {h5chunk.File(paths['f32_lz4_shuffle']).threads} workers per read\n")
    local = bench_local(paths, args.repeat)
    threads = bench_threads(paths, args.repeat)
    mount = [] if args.no_mount else bench_mount(paths, args.mount_repeat, args.latency_ms,
                                                 args.bandwidth_mbps, args.dir)
    print("\nsummary (targets: local >= 2x h5py, cold mount >= 3x h5py, 4 threads >= 1x serial)")
    print(f"   local:  {min(r[2] for r in local):.2f}x - {max(r[2] for r in local):.2f}x h5py")
    print(f"   threads: {threads:.2f}x serial")
    if mount:
        print(f"   mount cold: {min(r[2] for r in mount):.2f}x - {max(r[2] for r in mount):.2f}x h5py;"
              f" warm: {min(r[3] for r in mount):.2f}x - {max(r[3] for r in mount):.2f}x")


if __name__ == "__main__":
    main()
