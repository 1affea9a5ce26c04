#!/usr/bin/python3
"""h5chunk on hf:// without a mount, against the seed's remote path and against a hubfs mount,
on the bundled local Hub server with a per-request latency and a per-connection bandwidth (the
issue's conditions: 50 ms, 400 Mbit/s). Prints one JSON object; ratios are from this run.

    ./scripts/deps.sh --bench && ./scripts/build.sh && /usr/bin/python3 bench/hf_h5chunk_bench.py [--latency-ms 50]
        [--bandwidth-mbps 400] [--repeat 3] [--no-mount] [--cp-mb 300] [--only-cp]
        [--baseline-bin OTHER/build/bin] [--xet] [--only CONTENDER,...]

The file: the zea-like workload of bench_mount, float32 (16, 24, 2048, 64, 1), one 12.6 MB frame
per chunk, Blosc lz4 clevel 5 byte shuffle (201 MB raw). Every contender reads all 16 frames
cold (a new cache directory for hubfs; fsspec caches nothing across opens). Every contender is a
process of its own, started the same way (a Python contender is this script run with --child:
interpreter start and imports included, as `h5chunk read`'s process start is), timed from its
start to its exit; its values are checked against the local file's (a CRC of the array):

- h5chunk_cli: `h5chunk read hf://... /data/raw_data 0:16` (the array stays in the process, as in
  the others; its values are checked once, untimed, written with -o);
- h5chunk_python: h5chunk.File("hf://...")["data/raw_data"][0:16];
- seed: the seed's remote path (zea's chunk_reader): h5py reads the metadata through an fsspec
  HTTP file, the chunks are fetched with fsspec's async _cat_file gathered at once, and decoded by
  numcodecs' Blosc straight into the output from a thread pool. It verifies nothing;
- mount_h5chunk: a hubfs mount (new cache directory), then `h5chunk read MOUNT/... 0:16`;
  needs root and /dev/fuse (--no-mount skips it). Then, warm: the same read again on that mount
  with the page cache dropped (mount_h5chunk_warm), and the same read of the local file with the
  page cache dropped (local_h5chunk). After each drop, untimed, the freed memory is backed again
  and `h5chunk` with the libraries it loads is read back into the page cache (drop_caches_before):
  the two rows compare reads, not this VM's page faults or its disk;
- h5chunk_cli_warm: `h5chunk read hf://` again on h5chunk_cli's cache, a new process: its
  requests to the server are counted (only the branch's pin is expected).

And the issue's h5py case, frames 0:5 of the same file: h5py.File(hubfs.open(...)) against
h5py over an fsspec HTTP file object.

With --xet the server stores the files on Xet (build/bin/hubfs-xet-pack packs them at startup):
hf:// and the mount read them natively (plans, xorb ranges); the seed and the direct limits still
fetch the file's own bytes from where the resolve redirects. Then `direct_16` runs too: the 16
frames' chunks as 16 byte ranges over 16 connections, fetched by peer_bench.py's direct limit
(`direct_fetch`, the `direct` contender of `peer_bench.py --xet --workloads zea16`), the limit
the issue's Xet target compares with (mount_h5chunk and h5chunk_cli at least 0.5 of it).

CPU (issue 42): for every contender, user + system CPU-seconds of its process (its rusage, from
wait4), plus for the mount the daemon's (utime + stime from /proc/PID/stat, read before the read
and after the daemon went idle after it); the local server's never. Printed per GB delivered (the
decoded array's bytes) beside the wall time. The local server runs pinned to one CPU (taskset,
--server-cpu; the last CPU by default when there are two or more) so that its own CPU does not
cap the contenders on the others; the output says which.

And `hubfs cp` of a --cp-mb MB random file (default 300; 0 skips it) into a new cache directory,
against the direct limit: the same bytes as 8 MiB ranges over 16 connections by curl
(--parallel --parallel-max 16, to /dev/null: no hashing, no disk writes), from where the resolve
redirects. With --baseline-bin, the `hubfs cp` of another build (the code before a change) runs in
the same loop, the two alternating first, each into a new cache directory; --only-cp runs nothing
else. --baseline-bin also runs that build's `h5chunk read hf://` cold (h5chunk_cli_base) among
the readers, which take turns going first: a before/after ratio measured in one run."""

import argparse
import asyncio
import hashlib
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib
from concurrent.futures import ThreadPoolExecutor

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("HUBFS_BUILD_DIR", os.path.join(REPO_ROOT, "build"))
sys.path.insert(0, os.path.join(BUILD, "python"))
import h5chunk  # noqa: E402
import hubfs  # noqa: E402
import peer_bench  # noqa: E402  (bench/: its direct limit, direct_fetch)
import warm_pages  # noqa: E402  (bench/, beside this script)

SERVER = os.path.join(REPO_ROOT, "tools", "hub_server.py")
H5CHUNK = os.path.join(BUILD, "bin", "h5chunk")
HUBFS = os.path.join(BUILD, "bin", "hubfs")
SHAPE = (16, 24, 2048, 64, 1)
BLOSC = 32001


def write_zea_like(path):
    """bench_mount's file: echo-like signal plus noise, so it compresses like real data (~2x)."""
    rng = np.random.default_rng(3)
    sample = np.arange(2048, dtype=np.float32)[:, None]
    channel = np.arange(64, dtype=np.float32)[None, :]
    with h5py.File(path, "w") as f:
        d = f.create_dataset("data/raw_data", shape=SHAPE, dtype="float32", chunks=(1,) + SHAPE[1:],
                             compression=BLOSC, compression_opts=(2, 2, 4, 0, 5, 1, 1))
        for i in range(SHAPE[0]):
            frame = np.exp(-3 * sample / 2048) * np.sin(sample * 0.35 + channel * 0.1 + i)
            noise = rng.normal(0, 0.02, size=(SHAPE[1], 2048, 64)).astype(np.float32)
            d[i] = (frame[None] + noise).astype(np.float32)[..., None]


def seed_read(url, frames):
    """The seed's remote path (zea.data.chunk_reader's HTTPFetcher and decode), for frames 0:N."""
    import fsspec
    from fsspec.asyn import sync
    from numcodecs import blosc
    with fsspec.open(url, "rb") as raw, h5py.File(raw, "r") as h5:
        dset = h5["data/raw_data"]
        plist = dset.id.get_create_plist()
        assert [plist.get_filter(i)[0] for i in range(plist.get_nfilters())] == [BLOSC]
        ranges = []
        for i in range(frames):
            info = dset.id.get_chunk_info_by_coord((i, 0, 0, 0, 0))
            assert info.filter_mask == 0
            ranges.append((info.byte_offset, info.size))
        out = np.empty((frames,) + dset.shape[1:], dtype=dset.dtype)
    fs = fsspec.filesystem("http")
    fetched = [None] * len(ranges)

    async def one(index, offset, size):
        fetched[index] = await fs._cat_file(url, start=offset, end=offset + size)

    async def gather():
        await asyncio.gather(*(one(i, o, n) for i, (o, n) in enumerate(ranges)))

    sync(fs.loop, gather)
    flat = out.reshape(frames, -1)

    def decode(i):
        blosc.decompress(fetched[i], flat[i])  # straight into the output

    with ThreadPoolExecutor(min(16, os.cpu_count() or 4)) as pool:
        list(pool.map(decode, range(frames)))
    return out


def write_random(path, size):
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 8 << 20)
            f.write(os.urandom(n))
            left -= n


def cdn_location(endpoint, repo_path):
    """Where the resolve of repo_path redirects (the CDN), without following it."""
    u = urllib.parse.urlsplit(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.request("GET", "/" + repo_path)
        resp = conn.getresponse()
        resp.read()
        assert resp.status in (302, 307), "resolve answered %d" % resp.status
        location = resp.getheader("Location")
    finally:
        conn.close()
    return urllib.parse.urljoin(endpoint + "/", location)


def curl_ranges(location, size, piece=8 << 20, connections=16):
    """The direct limit: every 8 MiB range of the file at once over `connections` connections."""
    # -r, -o and -w hold for one transfer only when --next separates the transfers (without it the
    # last -r wins for every URL); --parallel and --parallel-max are global.
    cmd = ["curl", "--parallel", "--parallel-max", str(connections)]
    for a in range(0, size, piece):
        if a:
            cmd.append("--next")
        cmd += ["-s", "-f", "-w", "%{size_download}\n", "-r", "%d-%d" % (a, min(size, a + piece) - 1),
                "-o", "/dev/null", location]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, "curl: exit %d %s" % (r.returncode, r.stderr[-300:])
    got = sum(int(x) for x in r.stdout.split())
    assert got == size, "curl fetched %d bytes of %d" % (got, size)


# How much memory settle() touches and frees before each contender (warm_pages.py). 0: none.
WARM_PAGES_MB = warm_pages.DEFAULT_MB


def settle(endpoint):
    """Between contenders, untimed: the in-process hf:// sessions end (their queued cache writes
    and read-ahead finish instead of running on into the next contender's time), the server has
    no request left in flight, and the guest's free memory is backed by the host again
    (warm_pages.py says why; --no-warm-pages turns that off)."""
    hubfs.close_sessions()
    warm_pages.warm_free_pages(WARM_PAGES_MB)
    u = urllib.parse.urlsplit(endpoint)
    for _ in range(500):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        try:
            conn.request("GET", "/_hubfs/stats")
            in_flight = json.loads(conn.getresponse().read())["in_flight"]
        finally:
            conn.close()
        if in_flight <= 1:  # this request itself
            return
        time.sleep(0.01)


def timed(fn):
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


def crc(array):
    return zlib.crc32(memoryview(np.ascontiguousarray(array)).cast("B"))


def child_main(argv):
    """A Python contender in a process of its own: reads, prints {"bytes", "crc"} as JSON."""
    name = argv[0]
    if name == "h5chunk_python":
        url, endpoint, cache_dir = argv[1:4]
        with h5chunk.File(url, endpoint=endpoint, cache_dir=cache_dir, token=False) as f:
            got = f["data/raw_data"][0:16]
    elif name == "seed":
        got = seed_read(argv[1], 16)
    elif name == "h5py_hubfs_open_5":
        url, endpoint, cache_dir = argv[1:4]
        with hubfs.open(url, endpoint=endpoint, cache_dir=cache_dir, token=False) as f, h5py.File(f) as h5:
            got = h5["data/raw_data"][0:5]
    elif name == "h5py_fsspec_5":
        import fsspec
        with fsspec.open(argv[1], "rb") as f, h5py.File(f) as h5:
            got = h5["data/raw_data"][0:5]
    else:
        raise SystemExit("unknown child " + name)
    print(json.dumps({"bytes": int(got.nbytes), "crc": crc(got)}))


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid):
    """User + system CPU-seconds of a running process, all its threads (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14 and 15)


def idle_cpu(pid, quiet_s=0.2, most_s=5.0):
    """The process's CPU once it stopped using any for quiet_s (its cache writes and read-ahead
    after the read returned belong to the read), waiting at most most_s."""
    last, deadline = process_cpu(pid), time.monotonic() + most_s
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = process_cpu(pid)
        if now == last:
            break
        last = now
    return last


def mount_status(mnt):
    return json.loads(os.getxattr(mnt, "user.hubfs.status"))


def daemon_pid(mnt):
    return mount_status(mnt)["pid"]


def run_contender(cmd, env, daemon=None):
    """Runs cmd as a child; returns (wall seconds, CPU-seconds: the child's, plus the daemon's over
    the same read when given, stdout, stderr, exit status)."""
    d0 = process_cpu(daemon) if daemon else 0.0
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    out, err = [], []
    readers = [threading.Thread(target=lambda s=s, b=b: b.append(s.read())) for s, b in ((p.stdout, out), (p.stderr, err))]
    for t in readers:
        t.start()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    for t in readers:
        t.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    if daemon:
        cpu += idle_cpu(daemon) - d0
    return wall, cpu, "".join(out), "".join(err), p.returncode


def drop_caches_before(program):
    """Before a warm read that must not be served by the kernel's copy (through the mount: the
    daemon's tiers; local: the disk): the page cache dropped, then, untimed, the memory that freed
    backed again (warm_pages.py: here the host takes freed pages back at once, and the read's output
    landed on them at up to twice the read's CPU) and `program` loaded back (load_program)."""
    peer_bench.drop_caches()
    warm_pages.warm_free_pages(WARM_PAGES_MB)
    load_program(program)


def load_program(path):
    """Reads the program at `path` and the shared libraries it loads into the page cache (as
    for a program the user just ran), untimed: after drop_caches the program's own load from disk
    varied by 50-280 ms a run on this VM, for every contender (docs/benchmarks.md, session 36).
    Touches no data file."""
    ldd = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    for lib in [path] + re.findall(r"=> (/\S+)", ldd):
        with open(lib, "rb") as f:
            while f.read(1 << 20):
                pass


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency-ms", type=int, default=50)
    ap.add_argument("--bandwidth-mbps", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-mount", action="store_true")
    ap.add_argument("--cp-mb", type=int, default=300, help="size of hubfs cp's file in MB (0: no cp run)")
    ap.add_argument("--only-cp", action="store_true", help="run only hubfs cp and its direct limit")
    ap.add_argument("--no-warm-pages", action="store_true",
                    help="do not touch and free memory before each contender (warm_pages.py)")
    ap.add_argument("--baseline-bin", help="a build's bin directory whose hubfs cp and h5chunk read hf:// "
                    "run beside this one's (h5chunk_cli_base)")
    ap.add_argument("--xet", action="store_true", help="the server stores the files on Xet (see above)")
    ap.add_argument("--trace", metavar="DIR", help="save the server's request log (/_hubfs/trace, seconds from "
                    "the read's start) of each cold h5chunk_cli and h5chunk_cli_base read to DIR, and print "
                    "when its first request went out, its first data answer ended and its last byte came")
    ap.add_argument("--only", help="comma-separated contenders to run (h5chunk_cli, h5chunk_cli_base, "
                    "h5chunk_python, seed, mount_h5chunk, h5py_hubfs_open, h5py_fsspec, direct_16); all by "
                    "default. With --xet, `--only h5chunk_cli,mount_h5chunk,direct_16 --cp-mb 0` is the Xet "
                    "target's run")
    ap.add_argument("--server-cpu", type=int, default=(os.cpu_count() or 1) - 1,
                    help="the CPU the local server is pinned to (taskset); -1: not pinned")
    ap.add_argument("--server-nice", type=int, default=0,
                    help="run the local server at this nice value (e.g. -15), as peer_bench.py --server-nice")
    args = ap.parse_args()
    global WARM_PAGES_MB
    if args.no_warm_pages:
        WARM_PAGES_MB = 0
    load_before = os.getloadavg()
    work = tempfile.mkdtemp(prefix="hubfs-h5hf-bench-")
    repo = os.path.join(work, "hub", "datasets", "lab", "zea")
    os.makedirs(repo)
    path = os.path.join(repo, "scan.hdf5")
    write_zea_like(path)
    with h5py.File(path) as h5:
        want16 = h5["data/raw_data"][0:16]
        frame_ranges = []
        for k in range(16):
            info = h5["data/raw_data"].id.get_chunk_info_by_coord((k, 0, 0, 0, 0))
            frame_ranges.append((info.byte_offset, info.size))
    cp_size = args.cp_mb * 1000 * 1000
    if cp_size:
        write_random(os.path.join(repo, "big.bin"), cp_size)
        with open(os.path.join(repo, "big.bin"), "rb") as f:
            cp_sha = hashlib.file_digest(f, "sha256").hexdigest()
    # The server on one CPU of its own (issue 42): on two cores it otherwise takes CPU the
    # contenders need, and its share would move with theirs.
    pin = ["taskset", "-c", str(args.server_cpu)] if args.server_cpu >= 0 and shutil.which("taskset") else []
    if args.server_nice:  # ahead of the VM's other work (peer_bench.py --server-nice)
        pin = ["nice", "-n", str(args.server_nice)] + pin
    proc = subprocess.Popen(pin + ["/usr/bin/python3", SERVER, "--root", os.path.join(work, "hub"), "--host", "127.0.0.1",
                             "--latency-ms", str(args.latency_ms), "--bandwidth-mbps", str(args.bandwidth_mbps),
                             "--exit-on-stdin-eof"]
                            + (["--xet", "--xet-pack", os.path.join(BUILD, "bin", "hubfs-xet-pack")] if args.xet else []),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    endpoint = proc.stdout.readline().split()[1]
    url = "hf://datasets/lab/zea/scan.hdf5"
    http = f"{endpoint}/datasets/lab/zea/resolve/main/scan.hdf5"
    env = {**os.environ, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}
    runs = {k: [] for k in ("h5chunk_cli", "h5chunk_cli_base", "h5chunk_cli_warm", "h5chunk_python", "seed",
                            "mount_h5chunk", "mount_h5chunk_warm", "local_h5chunk", "h5py_hubfs_open_5",
                            "h5py_fsspec_5", "direct_16", "cp", "cp_base", "cp_direct")}
    warm_tiers = []  # per warm mount read: the daemon's memory and disk tier hits
    cpu_runs = {k: [] for k in runs}  # CPU-seconds per run (the process's, + the daemon's for the mount)
    delivered = {}  # bytes each contender hands back (the decoded array)
    warm_requests = {"h5chunk_cli_warm": [], "mount_h5chunk_warm": []}  # requests to the server per warm read
    can_drop = os.geteuid() == 0
    unread = {"mount_h5chunk": []}  # read-ahead bytes fetched and never read, per cold mount read
    copiers = {"cp": HUBFS}
    if args.baseline_bin:
        copiers["cp_base"] = os.path.join(args.baseline_bin, "hubfs")
    out_bin = os.path.join(work, "out.bin")

    def check_cli_values(extra, cache_dir):
        """The command's values, checked once, untimed: written with -o and compared. The timed
        runs keep the array in the process (no -o), as the seed and h5chunk.File do: writing 200
        MB, even to /dev/null (68 ms on the test VM), is not part of reading it."""
        r = subprocess.run([H5CHUNK, "read"] + extra + ["-o", out_bin], capture_output=True, text=True, env=env)
        assert r.returncode == 0, r.stderr
        assert np.array_equal(np.fromfile(out_bin, dtype="float32").reshape(want16.shape), want16)
        os.remove(out_bin)
        if cache_dir:
            shutil.rmtree(cache_dir, ignore_errors=True)

    if not args.only_cp:
        check_cli_values([url, "/data/raw_data", "0:16", "--endpoint", endpoint, "--cache-dir",
                          os.path.join(work, "cache-check")], os.path.join(work, "cache-check"))
    try:
        for i in range(args.repeat):
            cache = lambda name: os.path.join(work, f"cache-{name}-{i}")  # noqa: E731
            if not args.only_cp:
                me = [sys.executable, os.path.abspath(__file__), "--child"]

                def record(name, wall, cpu, out, err, status, want):
                    assert status == 0, "%s: exit %d: %s" % (name, status, err[-500:])
                    line = json.loads(out.strip().splitlines()[-1])
                    if "crc" in line:
                        assert line["crc"] == crc(want) and line["bytes"] == want.nbytes, name
                    else:
                        assert line["bytes"] == want.nbytes and line["fast_path"], line
                    runs[name].append(wall)
                    cpu_runs[name].append(cpu)
                    delivered[name] = want.nbytes

                def traced(name, cmd):
                    # A cold read, with --trace its request log saved (the server's clock starts at
                    # the reset, just before the read).
                    if not args.trace:
                        return run_contender(cmd, env)
                    server_reset(endpoint)
                    started = time.perf_counter()
                    reset_at = started
                    got = run_contender(cmd, env)
                    save_trace(endpoint, args.trace, name, len(runs[name]) + 1, started - reset_at, got[0])
                    return got

                def h5chunk_cli():
                    # h5chunk read hf:// (its own process: session, open, read, exit).
                    cmd = [H5CHUNK, "read", url, "/data/raw_data", "0:16", "--endpoint", endpoint,
                           "--cache-dir", cache("cli")]
                    record("h5chunk_cli", *traced("h5chunk_cli", cmd), want16)
                    # Again in a new process on the same cache: warm, its requests counted.
                    settle(endpoint)
                    server_reset(endpoint)
                    record("h5chunk_cli_warm", *run_contender(cmd, env), want16)
                    warm_requests["h5chunk_cli_warm"].append(server_stats(endpoint)["requests"])

                def h5chunk_python():
                    record("h5chunk_python", *run_contender(me + ["h5chunk_python", url, endpoint, cache("py")], env),
                           want16)

                def seed():
                    record("seed", *run_contender(me + ["seed", http], env), want16)

                def mount_h5chunk():
                    mnt = os.path.join(work, f"mnt{i}")
                    os.makedirs(mnt)
                    target = os.path.join(mnt, "scan.hdf5")
                    cmd = [H5CHUNK, "read", target, "/data/raw_data", "0:16"]
                    with hubfs.mount("datasets/lab/zea", mnt, endpoint=endpoint, cache_dir=cache("mount")):
                        pid = daemon_pid(mnt)
                        record("mount_h5chunk", *run_contender(cmd, env, daemon=pid), want16)
                        # Read-ahead fetched and never read (a hinting reader should leave none).
                        unread["mount_h5chunk"].append(mount_status(mnt).get("read_ahead_unread_bytes"))
                        if i == 0:  # its values once, untimed, read again (warm) after the timed read
                            check_cli_values([target, "/data/raw_data", "0:16"], "")
                        if can_drop:
                            # Warm through the mount: the page cache dropped, the block cache kept.
                            settle(endpoint)
                            drop_caches_before(H5CHUNK)
                            server_reset(endpoint)
                            st0 = mount_status(mnt)
                            record("mount_h5chunk_warm", *run_contender(cmd, env, daemon=pid), want16)
                            st1 = mount_status(mnt)
                            # Where the warm read's blocks came from: the daemon's memory or its disk tier.
                            warm_tiers.append({k: st1.get(k, 0) - st0.get(k, 0) for k in ("memory_hits", "disk_hits")})
                            warm_requests["mount_h5chunk_warm"].append(server_stats(endpoint)["requests"])
                    if can_drop:
                        drop_caches_before(H5CHUNK)
                        record("local_h5chunk", *run_contender([H5CHUNK, "read", path, "/data/raw_data", "0:16"], env),
                               want16)

                def h5py_hubfs_open():
                    record("h5py_hubfs_open_5", *run_contender(me + ["h5py_hubfs_open_5", url, endpoint, cache("open")],
                                                               env), want16[0:5])

                def h5py_fsspec():
                    record("h5py_fsspec_5", *run_contender(me + ["h5py_fsspec_5", http], env), want16[0:5])

                # The readers take turns going first: on this VM a run's time depends on what ran
                # just before it (memory the previous run freed costs the next one a host fault
                # per page once the host has taken it back), and a fixed order would charge that
                # to the same contender every round.
                def direct_16():
                    # peer_bench's direct limit itself (the reference): 16 threads, one
                    # connection each, reading into a reused buffer. It was curl --parallel, a
                    # different fetcher than the one the target names (docs/benchmarks.md,
                    # "Issue 39: cold 16 frames, session 27").
                    location = cdn_location(endpoint, "datasets/lab/zea/resolve/main/scan.hdf5")
                    runs["direct_16"].append(peer_bench.direct_fetch(None, location, frame_ranges))

                def h5chunk_cli_base():
                    # The baseline build's `h5chunk read hf://` (--baseline-bin), cold, in the same loop.
                    cmd = [os.path.join(args.baseline_bin, "h5chunk"), "read", url, "/data/raw_data", "0:16",
                           "--endpoint", endpoint, "--cache-dir", cache("cli_base")]
                    record("h5chunk_cli_base", *traced("h5chunk_cli_base", cmd), want16)

                readers = [h5chunk_cli, h5chunk_python, seed, h5py_hubfs_open, h5py_fsspec]
                if args.baseline_bin:
                    readers.insert(1, h5chunk_cli_base)
                if args.xet:
                    readers.append(direct_16)
                if not args.no_mount:
                    readers.insert(3, mount_h5chunk)
                if args.only:
                    keep = set(args.only.split(","))
                    readers = [r for r in readers if r.__name__ in keep]
                k = i % len(readers)
                for reader in readers[k:] + readers[:k]:
                    reader()
                    settle(endpoint)

            if cp_size:
                location = cdn_location(endpoint, "datasets/lab/zea/resolve/main/big.bin")
                settle(endpoint)
                t, _ = timed(lambda: curl_ranges(location, cp_size))
                runs["cp_direct"].append(t)
                order = list(copiers) if i % 2 == 0 else list(reversed(copiers))
                for name in order:
                    dest = os.path.join(work, "big.copy")
                    settle(endpoint)
                    t, r = timed(lambda: subprocess.run(
                        [copiers[name], "cp", "hf://datasets/lab/zea/big.bin", dest, "--endpoint", endpoint,
                         "--cache-dir", cache(name), "-q"], capture_output=True, text=True, env=env))
                    assert r.returncode == 0, r.stderr
                    runs[name].append(t)
                    with open(dest, "rb") as f:
                        assert hashlib.file_digest(f, "sha256").hexdigest() == cp_sha, "hubfs cp: wrong bytes"
                    os.unlink(dest)
                    subprocess.run(["rm", "-rf", cache(name)])
    finally:
        proc.terminate()
        proc.wait()
        subprocess.run(["rm", "-rf", work])
    med = {k: round(statistics.median(v), 3) for k, v in runs.items() if v}
    cpu_med = {k: statistics.median(v) for k, v in cpu_runs.items() if v}
    cpu_per_gb = {k: round(c / (delivered[k] / 1e9), 3) for k, c in cpu_med.items()}
    out = {"latency_ms": args.latency_ms, "bandwidth_mbps": args.bandwidth_mbps, "repeat": args.repeat, "warm_pages_mb": WARM_PAGES_MB,
           "server_cpu": args.server_cpu if args.server_cpu >= 0 and shutil.which("taskset") else "not pinned",
           "server_nice": args.server_nice,
           "load_before_after": [round(x, 2) for x in load_before] + [round(x, 2) for x in os.getloadavg()],
           "median_s": med, "runs_s": {k: [round(x, 3) for x in v] for k, v in runs.items() if v},
           "cpu_s_per_gb": cpu_per_gb, "median_cpu_s": {k: round(v, 3) for k, v in cpu_med.items()},
           "cpu_runs_s": {k: [round(x, 3) for x in v] for k, v in cpu_runs.items() if v},
           "warm_requests": warm_requests, "mount_h5chunk_warm_tier_hits": warm_tiers,
           "read_ahead_unread_bytes": unread, "ratios": {}}
    if "seed" in med:
        out["ratios"].update({
            "seed / h5chunk_cli (target >= 1.5)": round(med["seed"] / med["h5chunk_cli"], 2),
            "seed / h5chunk_python": round(med["seed"] / med["h5chunk_python"], 2),
            "h5py_fsspec_5 / h5py_hubfs_open_5 (target >= 3)": round(med["h5py_fsspec_5"] / med["h5py_hubfs_open_5"], 2),
        })
    if "cp" in med:
        out["ratios"]["cp_direct / cp, %d MB (target >= 0.7)" % args.cp_mb] = round(med["cp_direct"] / med["cp"], 2)
    if "cp_base" in med:
        out["ratios"]["cp_direct / cp_base (the baseline build)"] = round(med["cp_direct"] / med["cp_base"], 2)
        out["ratios"]["cp_base / cp (this build against the baseline)"] = round(med["cp_base"] / med["cp"], 2)
    if "h5chunk_cli_base" in med:
        out["ratios"]["h5chunk_cli_base / h5chunk_cli (this build against the baseline)"] = round(
            med["h5chunk_cli_base"] / med["h5chunk_cli"], 2)
    if "direct_16" in med:
        out["ratios"]["direct_16 / h5chunk_cli (Xet target >= 0.5)"] = round(med["direct_16"] / med["h5chunk_cli"], 2)
        if "h5chunk_cli_base" in med:
            out["ratios"]["direct_16 / h5chunk_cli_base (the baseline build)"] = round(
                med["direct_16"] / med["h5chunk_cli_base"], 2)
        if "mount_h5chunk" in med:
            out["ratios"]["direct_16 / mount_h5chunk (Xet target >= 0.5)"] = round(med["direct_16"] / med["mount_h5chunk"], 2)
    if "mount_h5chunk" in med and "h5chunk_cli" in med:
        out["ratios"]["mount_h5chunk / h5chunk_cli (target <= 1.15)"] = round(med["mount_h5chunk"] / med["h5chunk_cli"], 2)
        out["ratios"]["CPU/GB mount_h5chunk / h5chunk_cli (target <= 1.3)"] = round(
            cpu_per_gb["mount_h5chunk"] / cpu_per_gb["h5chunk_cli"], 2)
    if "mount_h5chunk_warm" in med and "local_h5chunk" in med:
        out["ratios"]["mount_h5chunk_warm / local_h5chunk (target <= 1.3)"] = round(
            med["mount_h5chunk_warm"] / med["local_h5chunk"], 2)
    print(json.dumps(out, indent=1))


def server_stats(endpoint):
    u = urllib.parse.urlsplit(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("GET", "/_hubfs/stats")
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def save_trace(endpoint, trace_dir, name, run, started, seconds):
    """--trace: the server's request log since the last reset to trace_dir/<name>-<run>.json
    (begin and end of each request in seconds from the read's start), and a line to stderr: the
    first request, the end of the first data answer (block 0's: a xorb range or the bridge's), the
    last byte and the time after it."""
    u = urllib.parse.urlsplit(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("GET", "/_hubfs/trace")
        entries = json.loads(conn.getresponse().read())
    finally:
        conn.close()
    for e in entries:
        for f in ("begin", "end"):
            if e.get(f) is not None:
                e[f] = round(e[f] - started, 4)
    os.makedirs(trace_dir, exist_ok=True)
    with open(os.path.join(trace_dir, "%s-%d.json" % (name, run)), "w") as f:
        json.dump({"name": name, "seconds": seconds, "requests": entries}, f, indent=1)
    data = sorted((e for e in entries if e.get("end") is not None and e.get("range")), key=lambda e: e["begin"])
    last = max((e["end"] for e in entries if e.get("end") is not None), default=0.0)
    print("trace %s run %d (%.3f s): %d requests, first at %.3f s, first data answer %s %.3f-%.3f s, last byte "
          "%.3f s, %.3f s after it" % (
              name, run, seconds, len(entries), min((e["begin"] for e in entries), default=0.0),
              data[0]["kind"] if data else "-", data[0]["begin"] if data else -1, data[0]["end"] if data else -1,
              last, seconds - last), file=sys.stderr)


def server_reset(endpoint):
    u = urllib.parse.urlsplit(endpoint)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    try:
        conn.request("POST", "/_hubfs/reset")
        conn.getresponse().read()
    finally:
        conn.close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
    else:
        main()
