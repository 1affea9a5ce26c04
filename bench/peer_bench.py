#!/usr/bin/python3
"""hubfs against a peer (an rclone mount) and against the network's limit, cold and warm, in one
run over the bundled local Hub server; prints a table and the ratios the issue asks for.

    ./scripts/build.sh && /usr/bin/python3 bench/peer_bench.py        # root: mounts, drop_caches
        [--latency-ms 50] [--bandwidth-mbps 400] [--host-mbps 0] [--repeat 3] [--seq-mb 300]
        [--big-mb 3000] [--dir DIR] [--json OUT.json] [--contenders local,hubfs,rclone,direct]
        [--workloads zea16,zea5,seq]     # the default; also mmap300, mmap3g
        [--contenders hubfs,base --baseline-bin OTHER/build/bin]
        [--xet --contenders hubfs,bridge,direct --workloads zea16]   # Xet-stored files
        [--trace DIR]    # each cold read's requests, as the server saw them, and a timeline
    /usr/bin/python3 bench/peer_bench.py --latency-ms 20 --bandwidth-mbps 0   # "nothing worse"
    # issue 20's over-read targets: the host, not the connection, is the limit
    /usr/bin/python3 bench/peer_bench.py --workloads zea5,mmap300,mmap3g --host-mbps 800 \
        --contenders local,hubfs,base,rclone,direct --baseline-bin OTHER/build/bin

Workloads (files written once into DIR/data, default /tmp/hubfs_peer_bench):
  zea16    all 16 frames of a zea-like dataset: float32 (16, 24, 2048, 64, 1), one frame per
           chunk, Blosc lz4 clevel 5 + byte shuffle (the generator of bench/mount.cc);
  zea5     frames 0:5 of it;
  seq      a --seq-mb MB random file read front to back in 1 MiB read()s, as cat does;
  mmap300  100 random 64 KiB slices of that same file through mmap: mmap.mmap(fd, 0,
           prot=PROT_READ), each slice copied out, no madvise. Offsets from random.Random(20),
           uniform over the file, not aligned (a record read out of a mapped array is not);
  mmap3g   the same on a --big-mb MB random file (default 3000), written and served only
           when this workload is named.
  Every read is checked: h5py's values and the mmap slices against the local file's (the
  slices against os.pread of it), every reader's byte count, h5chunk's fast path.
Readers: h5py and `h5chunk read` (zea), read() (seq), mmap (mmap300, mmap3g).
Contenders:
  local          the file on local disk (page cache dropped): h5py, `h5chunk read`, read(), mmap;
  hubfs          `hubfs mount` of the Hub API: + h5py, + `h5chunk read`, + read(), + mmap;
  rclone         `rclone mount :http:` (--vfs-cache-mode full) of the server's plain HTTP view
                 (/_plain/...): + h5py, + `h5chunk read`, + read(), + mmap;
  base           with --baseline-bin DIR: the same as hubfs with DIR's hubfs and h5chunk (another
                 commit's build/bin), for before/after ratios measured in one run;
  bridge         with --xet: hubfs with HF_HUB_DISABLE_XET=1, reading the Xet-stored files through
                 the server's bridge (the resolve redirect), as before native Xet reads;
  direct         the limit: the same byte ranges (each chunk of the selection as one range; the
                 sequential file in 8 MiB ranges; the 100 mmap slices as 100 ranges) fetched
                 straight from the CDN origin over 16 connections (Python threads, http.client),
                 no FUSE, no decoding.
With --xet the server stores the files as Xet (xorbs of content-defined chunks, packed by
build/bin/hubfs-xet-pack at startup): hubfs reads them natively (reconstruction plans, xorb
ranges, every chunk's hash checked), the direct limit still fetches the file's own byte ranges
from where the resolve redirects.
Cold: fresh mount, empty cache directory, `echo 3 > /proc/sys/vm/drop_caches`. Warm: a second
read on the same mount with the page cache dropped again (hubfs's block cache, rclone's VFS
cache kept). Every figure is the median of --repeat runs; contenders are interleaved within a
run so load from other processes spreads over all of them, and take turns going first. Every
reader is a process of its own, started the same way and timed from its start to its exit:
`h5chunk read` (no -o), and h5py, read() and mmap as this script run with --child (interpreter
start and imports included; the child checks nothing, it reports a checksum the parent compares).
CPU (issue 42): "CPU s/GB" is the reader process's user + system CPU-seconds (wait4's rusage)
plus, through a mount, its daemon's (hubfs's or rclone's utime + stime in /proc/PID/stat, from
before the read until the daemon went idle after it), per GB the reader handed back, and the
daemon's part of it is printed after the table; the local server's CPU never counts. The
server runs pinned to one CPU (taskset, --server-cpu; the last CPU by default on two or more),
so its work does not cap the contenders on the others; with --server-nice N at nice N too, so a
VM's other work does not starve it (the real Hub and CDN do not share our CPUs: on a loaded VM,
requests the readers had sent began at the server up to 1.4 s late, docs/benchmarks.md session
28). MB/s are
the bytes the reader needed on the wire (zea: the chunks' stored sizes; seq: the file; mmap:
the slices, overlaps once), so every row compares with the direct limit.
Over-read: "fetched MB" is what the server sent during a cold read (its body bytes, counted
from a reset with nothing in flight until nothing is in flight again, so read-ahead landing
after the read returned counts too), "x needed" that over the bytes needed; the direct limit
fetches what is needed (1.00; a little more where two mmap slices overlap, as it fetches each).
A reader that cancels open-ended ranges (rclone) is charged what the server wrote before the
connection closed, as a real link would carry it. The ratios below the table check issue 20's targets:
hubfs+h5py's over-read on zea5 at most 1.5x, at most 10% of the big file fetched by mmap3g, no
slower than rclone there, and no slower than --baseline-bin (today) on zea5 and mmap300.
Shaping: --latency-ms per request and --bandwidth-mbps per connection, as the server applies
them; --host-mbps caps all connections together (the server's one shared token bucket: a
shared NIC or a metered egress, where fetching more than needed costs time, not just bytes).

Every mount is unmounted and the server killed on the way out, also on an error or Ctrl-C.
"""

import argparse
import collections
import datetime
import http.client
import json
import mmap
import os
import random
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib

import h5py
import numpy as np

import warm_pages  # bench/, beside this script

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
BIN = os.path.join(REPO_ROOT, "build", "bin")
SERVER = os.path.join(REPO_ROOT, "tools", "hub_server.py")

REPO = "datasets/bench/peer"
SHAPE = (16, 24, 2048, 64, 1)
CHUNK = (1,) + SHAPE[1:]
DATASET = "/data/raw_data"
BLOSC = 32001
BLOSC_LZ4_SHUFFLE = (0, 0, 0, 0, 5, 1, 1)  # clevel 5, byte shuffle, lz4
ZEA, SEQ, BIG = "zea.hdf5", "seq.bin", "big.bin"
WORKLOADS = ("zea16", "zea5", "seq", "mmap300", "mmap3g")  # in the order they run and print
FRAMES = {"zea16": 16, "zea5": 5}  # frames read from the start of the dataset
FILE_OF = {"zea16": ZEA, "zea5": ZEA, "seq": SEQ, "mmap300": SEQ, "mmap3g": BIG}
READERS_OF = {"zea16": ("h5py", "h5chunk"), "zea5": ("h5py", "h5chunk"), "seq": ("read",),
              "mmap300": ("mmap",), "mmap3g": ("mmap",)}
# The mmap workloads: this many slices of this size at offsets drawn from this seed, uniform over
# the file and not aligned to anything (a record read out of a memory-mapped array is not).
MMAP_SLICES, MMAP_SLICE, MMAP_SEED = 100, 64 << 10, 20
PIECE = 8 << 20  # the direct limit's range size for the sequential file (hubfs's largest request)
READ_SIZE = 1 << 20
CONNECTIONS = 16
TRACE_PRINTED = 60  # --trace: requests of a read printed in the log (all of them go to its file)

# Bounds on everything that waits, so a wedged mount or server ends the run instead of hanging.
MOUNT_WAIT_S = 30
COMMAND_TIMEOUT_S = 600
QUIET_WAIT_S = 20
HTTP_TIMEOUT_S = 120
UNMOUNT_TRIES = 50


def log(msg):
    print(msg, flush=True)


# --------------------------------------------------------------------------------------------
# Files


def write_zea(path):
    """The zea-like file of bench/mount.cc: decaying echoes plus noise, so it compresses like
    real RF data (~0.8 with Blosc lz4 + shuffle)."""
    rng = np.random.default_rng(3)
    sample = np.arange(SHAPE[2], dtype=np.float32)[None, :, None, None]
    element = np.arange(SHAPE[3], dtype=np.float32)[None, None, :, None]
    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as f:
        ds = f.create_dataset(DATASET, shape=SHAPE, dtype="float32", chunks=CHUNK, compression=BLOSC,
                              compression_opts=BLOSC_LZ4_SHUFFLE)
        for frame in range(SHAPE[0]):
            echo = np.exp(-3 * sample / SHAPE[2]) * np.sin(sample * 0.35 + element * 0.1 + frame)
            ds[frame] = echo.astype(np.float32) + rng.normal(0, 0.02, size=SHAPE[1:]).astype(np.float32)
    os.rename(tmp, path)


def write_random(path, size, seed=1):
    rng = np.random.default_rng(seed)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for off in range(0, size, PIECE):
            f.write(rng.bytes(min(PIECE, size - off)))
    os.rename(tmp, path)


def prepare_files(data_dir, seq_bytes, big_bytes=None):
    """The data files, written once and kept between runs: {name: path}. The big file only when
    big_bytes is given (only mmap3g reads it: 3 GB nobody else needs)."""
    os.makedirs(data_dir, exist_ok=True)
    files = {name: os.path.join(data_dir, name) for name in (ZEA, SEQ) + ((BIG,) if big_bytes else ())}
    if not os.path.exists(files[ZEA]):
        log("writing %s ..." % files[ZEA])
        write_zea(files[ZEA])
    for name, size, seed in ((SEQ, seq_bytes, 1), (BIG, big_bytes, 2)):
        if name in files and (not os.path.exists(files[name]) or os.path.getsize(files[name]) != size):
            log("writing %s ..." % files[name])
            write_random(files[name], size, seed)
    return files


def mmap_offsets(file_size):
    """The mmap workloads' slice offsets: MMAP_SLICES of them from a fixed seed, so every run
    and every contender reads the same slices."""
    rng = random.Random(MMAP_SEED)
    return [rng.randrange(0, file_size - MMAP_SLICE + 1) for _ in range(MMAP_SLICES)]


def union_bytes(ranges):
    """Bytes covered by (offset, length) ranges, overlaps counted once."""
    total, end = 0, 0
    for offset, length in sorted(ranges):
        total += max(0, offset + length - max(offset, end))
        end = max(end, offset + length)
    return total


def chunk_ranges(zea, frames):
    """(offset, length) of the stored chunks holding frames [0, frames)."""
    with h5py.File(zea, "r") as f:
        ds = f[DATASET]
        out = []
        for frame in range(frames):
            info = ds.id.get_chunk_info_by_coord((frame,) + (0,) * (len(SHAPE) - 1))
            out.append((info.byte_offset, info.size))
        return out


def checksum(array):
    return zlib.crc32(memoryview(np.ascontiguousarray(array)).cast("B"))


# --------------------------------------------------------------------------------------------
# The server


class Hub:
    def __init__(self, root, latency_ms, bandwidth_mbps, host_mbps, log_file, xet=False, cpu=-1, nice=0):
        # --exit-on-stdin-eof: if this script dies without its finally blocks (SIGKILL), the
        # server still goes with it.
        extra = ["--xet", "--xet-pack", os.path.join(BIN, "hubfs-xet-pack")] if xet else []
        # On one CPU of its own (issue 42): on two cores it otherwise takes CPU the contenders need.
        self.pinned = cpu >= 0 and shutil.which("taskset") is not None
        pin = ["taskset", "-c", str(cpu)] if self.pinned else []
        if nice:  # --server-nice: the Hub's stand-in ahead of the VM's other work (see --help)
            pin = ["nice", "-n", str(nice)] + pin
        with open(log_file, "w") as err:
            self.proc = subprocess.Popen(
                pin + ["/usr/bin/python3", SERVER, "--root", root, "--latency-ms", str(latency_ms),
                 "--bandwidth-mbps", str(bandwidth_mbps), "--host-mbps", str(host_mbps),
                 "--exit-on-stdin-eof"] + extra,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        words = self.proc.stdout.readline().split()
        if len(words) != 4 or words[0] != "listening":
            self.stop()
            raise RuntimeError("the local Hub server did not start")
        self.url, self.cdn = words[1], words[3]
        self.host, self.port = urllib.parse.urlsplit(self.url).hostname, urllib.parse.urlsplit(self.url).port

    def request(self, method, path, headers=None):
        if self.proc.poll() is not None:
            raise RuntimeError("the local Hub server exited with status %s (its log is in the run's"
                               " logs/ directory; --keep keeps it)" % self.proc.returncode)
        conn = http.client.HTTPConnection(self.host, self.port, timeout=HTTP_TIMEOUT_S)
        try:
            conn.request(method, path, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def stats(self):
        return json.loads(self.request("GET", "/_hubfs/stats")[2])

    def reset(self):
        self.request("POST", "/_hubfs/reset")

    def wait_quiet(self):
        """Until nothing has been in flight for three polls in a row: read-ahead a read started
        may still be landing after the read returned, and belongs to that read."""
        quiet, deadline = 0, time.monotonic() + QUIET_WAIT_S
        while quiet < 3 and time.monotonic() < deadline:
            quiet = quiet + 1 if self.stats()["in_flight"] == 0 else 0
            time.sleep(0.05)

    def cdn_location(self, rel):
        status, headers, _ = self.request("GET", "/%s/resolve/main/%s" % (REPO, rel))
        if status != 302:
            raise RuntimeError("resolve %s: expected a 302 to the CDN, got %d" % (rel, status))
        return headers["Location"]

    def stop(self):
        # SIGTERM, not SIGKILL: the server removes the Xet store it made (~450 MB for --xet) only
        # when it stops cleanly; a killed one leaves it in /tmp for every run.
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


# --------------------------------------------------------------------------------------------
# Mounts


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def force_unmount(mnt):
    for tool in (["fusermount3", "-u", "-z", mnt], ["fusermount", "-u", "-z", mnt], ["umount", "-l", mnt]):
        if not os.path.ismount(mnt):
            return
        subprocess.run(tool, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)


class HubfsMount:
    def __init__(self, hub, mnt, cache, max_requests, log_file, bin_dir=BIN, bridge=False, extra_args=()):
        self.mnt = mnt
        self.bin_dir = bin_dir
        env = dict(os.environ)
        env.pop("HF_HUB_DISABLE_XET", None)
        if bridge:
            env["HF_HUB_DISABLE_XET"] = "1"
        r = subprocess.run([os.path.join(bin_dir, "hubfs"), "mount", REPO, mnt, "--endpoint", hub.url,
                            "--cache-dir", cache, "--max-requests", str(max_requests),
                            "--log-file", log_file, *extra_args],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=MOUNT_WAIT_S * 2,
                           env=env)
        if r.returncode != 0:
            raise RuntimeError("hubfs mount failed: %s" % (r.stderr or r.stdout).strip())
        self.pid = self.status()["pid"]  # the daemon, for its CPU

    def status(self):
        return json.loads(os.getxattr(self.mnt, "user.hubfs.status"))

    def close(self):
        for _ in range(UNMOUNT_TRIES):
            if not os.path.ismount(self.mnt):
                return
            r = subprocess.run([os.path.join(self.bin_dir, "hubfs"), "unmount", self.mnt], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=60)
            if r.returncode == 0:
                return
            time.sleep(0.1)
        force_unmount(self.mnt)


class RcloneMount:
    def __init__(self, hub, mnt, cache, log_file):
        self.mnt = mnt
        config = os.path.join(cache, "rclone.conf")  # empty: the remote is all on the command line
        os.makedirs(cache, exist_ok=True)
        open(config, "w").close()
        self.args = ["rclone", "mount", ":http:", mnt, "--config", config,
                     "--http-url", "%s/_plain/%s/main/" % (hub.url, REPO),
                     "--vfs-cache-mode", "full", "--cache-dir", os.path.join(cache, "vfs"),
                     "--read-only", "--log-file", log_file]
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        self.pid = self.proc.pid  # the daemon, for its CPU
        deadline = time.monotonic() + MOUNT_WAIT_S
        while not os.path.ismount(mnt):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("rclone mount did not come up; see %s" % log_file)
            time.sleep(0.05)

    def close(self):
        # SIGTERM makes rclone unmount and exit; the lazy unmount is for an rclone that did not.
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        force_unmount(self.mnt)


# --------------------------------------------------------------------------------------------
# Readers: each returns (seconds, bytes produced, check value)


def read_h5py(path, frames):
    t0 = time.perf_counter()
    with h5py.File(path, "r") as f:
        a = f[DATASET][0:frames]
    return time.perf_counter() - t0, a.nbytes, checksum(a)


def read_sequential(path, _frames):
    buf = bytearray(READ_SIZE)
    total = 0
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        while True:
            n = f.readinto(buf)
            if not n:
                break
            total += n
    return time.perf_counter() - t0, total, None


def read_mmap(path, offsets):
    """The slices at offsets through a read-only shared mapping of the whole file, each copied
    out (no madvise: the kernel's read-around is what it is). Returns them all for the check."""
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as m:
            slices = [m[o:o + MMAP_SLICE] for o in offsets]
    finally:
        os.close(fd)
    return time.perf_counter() - t0, sum(len(b) for b in slices), slices


READERS = {"h5py": read_h5py, "read": read_sequential, "mmap": read_mmap}


def child_main(argv):
    """A reader in a process of its own (--child READER PATH ARG-JSON): prints its bytes and a
    value the parent checks (h5py: the array's checksum; mmap: each slice's CRC)."""
    reader, path, arg = argv[0], argv[1], json.loads(argv[2])
    _, got, value = READERS[reader](path, arg)
    if reader == "mmap":
        value = [zlib.crc32(b) for b in value]
    print(json.dumps({"bytes": got, "value": value}))


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid):
    """User + system CPU-seconds of a running process, all its threads (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14 and 15)


def idle_cpu(pid, quiet_s=0.2, most_s=5.0):
    """The process's CPU once it used none for quiet_s (its cache writes and read-ahead after the
    read returned belong to the read), waiting at most most_s."""
    last, deadline = process_cpu(pid), time.monotonic() + most_s
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        now = process_cpu(pid)
        if now == last:
            break
        last = now
    return last


def run_reader(cmd, daemon=None):
    """Runs a reader process; returns (wall seconds from start to exit, CPU-seconds: its own plus
    the daemon's over the read when given, the daemon's part of them (0 without one), its
    stdout). Raises on a failed exit."""
    d0 = process_cpu(daemon) if daemon else 0.0
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = [], []
    pumps = [threading.Thread(target=lambda f=f, b=b: b.append(f.read())) for f, b in ((p.stdout, out), (p.stderr, err))]
    for t in pumps:
        t.start()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    for t in pumps:
        t.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError("%s failed (exit %d): %s" % (" ".join(cmd[:3]), p.returncode, "".join(err).strip()[-500:]))
    cpu = usage.ru_utime + usage.ru_stime
    daemon_cpu = idle_cpu(daemon) - d0 if daemon else 0.0
    return wall, cpu + daemon_cpu, daemon_cpu, "".join(out)


def direct_fetch(hub, location, ranges):
    """The limit: every range GET from the CDN over CONNECTIONS connections at once, each range
    checked for status and length. Returns seconds (connection setup included, as for a cold
    mount; the resolve that produced `location` is not)."""
    u = urllib.parse.urlsplit(location)
    target = u.path + "?" + u.query
    work = collections.deque(ranges)
    lock = threading.Lock()
    errors = []

    def worker():
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=HTTP_TIMEOUT_S)
        buf = memoryview(bytearray(PIECE))
        try:
            while not errors:
                with lock:
                    if not work:
                        return
                    offset, length = work.popleft()
                conn.request("GET", target, headers={"Range": "bytes=%d-%d" % (offset, offset + length - 1)})
                resp = conn.getresponse()
                got = 0
                while True:
                    n = resp.readinto(buf)
                    if not n:
                        break
                    got += n
                if resp.status != 206 or got != length:
                    errors.append("range %d+%d: status %d, %d bytes" % (offset, length, resp.status, got))
        except Exception as e:  # reported below; one failed range fails the measurement
            errors.append(repr(e))
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(CONNECTIONS, len(ranges)))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(COMMAND_TIMEOUT_S)
    s = time.perf_counter() - t0
    if errors or any(t.is_alive() for t in threads):
        raise RuntimeError("direct fetch failed: %s" % (errors[:3] or "timed out"))
    return s


# --------------------------------------------------------------------------------------------
# The run


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = tempfile.mkdtemp(prefix="run-", dir=args.dir)
        self.mnt = os.path.join(self.work, "mnt")
        os.makedirs(self.mnt)
        self.logs = os.path.join(self.work, "logs")
        os.makedirs(self.logs)
        self.hub = None
        self.mount = None  # the one mount open at any time, closed by the finally blocks
        # (contender, reader, workload, phase) -> list of {"s", "requests", "peak", "mean_in_flight"}
        self.results = collections.defaultdict(list)

    def bin_dir(self, contender):
        """The programs a contender runs: --baseline-bin's for "base", this tree's otherwise."""
        return self.args.baseline_bin if contender == "base" else BIN

    def save_trace(self, key, started):
        """With --trace: the server's request log of the read just recorded (begin and end of each
        request, seconds since the read's start) to DIR/<key>-<run>.json, and its timeline to the
        log: where requests wait on each other and how many are in flight."""
        if not self.args.trace or key[3] != "cold":
            return
        run = len(self.results[key])
        entries = json.loads(self.hub.request("GET", "/_hubfs/trace")[2])
        for e in entries:
            for f in ("begin", "end"):
                if e.get(f) is not None:
                    e[f] = round(e[f] - started, 4)
        os.makedirs(self.args.trace, exist_ok=True)
        name = os.path.join(self.args.trace, "%s-%d.json" % ("-".join(key[:3]), run))
        with open(name, "w") as f:
            json.dump({"key": list(key), "seconds": self.results[key][-1]["s"], "requests": entries}, f, indent=1)
        done = [e for e in entries if e.get("end") is not None]
        seconds = self.results[key][-1]["s"]
        last = max((e["end"] for e in done), default=0.0)
        log("trace of %s run %d (%.3f s): %d requests, the first sent at %.3f s, the last byte at %.3f s, "
            "%.3f s after it; seconds from the read's start:" % (
                "/".join(key[:3]), run, seconds, len(entries), min((e["begin"] for e in entries), default=0.0),
                last, seconds - last))
        for e in entries[:TRACE_PRINTED]:
            log("  %7.3f %7.3f %-8s %-4s %s %s %s" % (e["begin"], e.get("end") or -1, e["kind"], e["method"],
                                                    e.get("status"), e["path"][-40:], e.get("range") or ""))
        if len(entries) > TRACE_PRINTED:
            log("  ... %d more in %s" % (len(entries) - TRACE_PRINTED, name))

    def record(self, key, seconds, before_stats=None, cpu=None):
        """Stores a read's time and, for reads through the server (before_stats given: the
        counters right after the reset that preceded the read), what the server did for it:
        the counters were zeroed with nothing in flight, and are read once nothing is again, so
        bytes_sent is exactly this read's (its read-ahead included), not a running total."""
        entry = {"s": seconds}
        if cpu is not None:
            entry["cpu_s_per_gb"] = cpu / (self.produced_bytes(key[2]) / 1e9)
        if before_stats is not None:
            self.hub.wait_quiet()
            s = self.hub.stats()
            entry["requests"] = s["requests"]
            entry["data_requests"] = s["resolve_requests"] + s["cdn_requests"] + s["plain_requests"]
            entry["peak"] = s["peak_concurrency"]
            entry["mean_in_flight"] = (s["in_flight_seconds"] - before_stats["in_flight_seconds"]) / seconds
            entry["bytes_sent"] = s["bytes_sent"]
        self.results[key].append(entry)

    def reader_arg(self, workload):
        """What a reader is given besides the path: frames (zea), slice offsets (mmap), or None."""
        if workload in FRAMES:
            return FRAMES[workload]
        return self.offsets.get(workload)

    def produced_bytes(self, workload):
        """The bytes a reader hands back for the workload (decoded, for zea)."""
        if workload in FRAMES:
            return FRAMES[workload] * self.frame_bytes
        if workload in self.offsets:
            return MMAP_SLICES * MMAP_SLICE
        return self.file_size[FILE_OF[workload]]

    def check(self, reader, workload, got_bytes, value):
        want_bytes = self.produced_bytes(workload)
        if got_bytes != want_bytes:
            raise RuntimeError("%s %s: %d bytes, expected %d" % (reader, workload, got_bytes, want_bytes))
        if reader == "h5py" and value != self.reference[workload]:
            raise RuntimeError("h5py %s: the values differ from the local file's" % workload)
        if reader == "h5chunk" and value is not True:
            raise RuntimeError("h5chunk %s fell back to H5Dread" % workload)
        if reader == "mmap":
            for i, (got, want) in enumerate(zip(value, self.reference[workload])):
                if got != zlib.crc32(want):
                    raise RuntimeError("mmap %s: slice %d (offset %d) differs from the local file's"
                                       % (workload, i, self.offsets[workload][i]))

    def timed_read(self, key, path):
        contender, reader, workload, phase = key
        drop_caches()
        if self.hub is not None:
            self.hub.wait_quiet()
            self.hub.reset()
        reset_at = time.perf_counter()
        self.warm_pages()
        before = self.hub.stats() if self.hub is not None else None
        # A read on a wedged FUSE mount would block forever; the alarm interrupts it (FUSE reads
        # are interruptible) and the finally blocks unmount.
        signal.alarm(COMMAND_TIMEOUT_S)
        daemon = self.mount.pid if self.mount is not None else None
        hubfs_mount = isinstance(self.mount, HubfsMount)
        unread_before = self.mount.status().get("read_ahead_unread_bytes", 0) if hubfs_mount else None
        started = time.perf_counter() - reset_at  # the trace's times are from the reset
        try:
            if reader == "h5chunk":
                # No -o: the array stays in the process, as h5py's does (writing 200 MB even to
                # /dev/null took 68 ms on the test VM, a cost of this kernel, not of the read).
                seconds, cpu, daemon_cpu, out = run_reader([os.path.join(self.bin_dir(contender), "h5chunk"), "read", path, DATASET,
                                                            "0:%d" % FRAMES[workload]], daemon)
                line = json.loads(out.strip().splitlines()[-1])
                got, value = line["bytes"], line["fast_path"]
            else:
                seconds, cpu, daemon_cpu, out = run_reader([sys.executable, os.path.abspath(__file__), "--child", reader,
                                                            path, json.dumps(self.reader_arg(workload))], daemon)
                line = json.loads(out.strip().splitlines()[-1])
                got, value = line["bytes"], line["value"]
        finally:
            signal.alarm(0)
        self.check(reader, workload, got, value)
        self.record(key, seconds, before if contender != "local" else None, cpu)
        if daemon:  # the mount's own share of the CPU above (printed after the table)
            self.results[key][-1]["daemon_cpu_s_per_gb"] = daemon_cpu / (self.produced_bytes(workload) / 1e9)
        if contender != "local":
            self.save_trace(key, started)
        if hubfs_mount:  # read-ahead fetched during this read and never read: its waste
            self.results[key][-1]["unread_bytes"] = self.mount.status().get("read_ahead_unread_bytes", 0) - unread_before

    def warm_pages(self):
        """Every timed read starts on host-backed free memory (warm_pages.py)."""
        if not self.args.no_warm_pages:
            warm_pages.warm_free_pages()

    def mounted_reads(self, contender, reader, workload, rep):
        cache = os.path.join(self.work, "cache-%s-%s-%s-%d" % (contender, reader, workload, rep))
        log_file = os.path.join(self.logs, os.path.basename(cache) + ".log")
        try:
            if contender in ("hubfs", "base", "bridge"):
                self.mount = HubfsMount(self.hub, self.mnt, cache, self.args.requests, log_file,
                                        self.bin_dir(contender), bridge=contender == "bridge",
                                        extra_args=shlex.split(self.args.hubfs_args) if contender == "hubfs" else ())
            else:
                self.mount = RcloneMount(self.hub, self.mnt, cache, log_file)
            path = os.path.join(self.mnt, FILE_OF[workload])
            for phase in ("cold", "warm"):
                self.timed_read((contender, reader, workload, phase), path)
        finally:
            if self.mount is not None:
                self.mount.close()
                self.mount = None
            shutil.rmtree(cache, ignore_errors=True)

    def run(self):
        args = self.args
        self.seq_bytes = args.seq_mb * 1000 * 1000
        self.files = prepare_files(os.path.join(args.dir, "data"), self.seq_bytes,
                                   args.big_mb * 1000 * 1000 if "mmap3g" in args.workloads else None)
        self.file_size = {name: os.path.getsize(path) for name, path in self.files.items()}
        self.frame_bytes = int(np.prod(CHUNK)) * 4
        # What the direct limit fetches, and (wire_bytes) what the reader needed: the frames'
        # stored chunks, the whole sequential file, the mmap slices' bytes (overlaps once).
        self.ranges = {w: chunk_ranges(self.files[ZEA], n) for w, n in FRAMES.items()}
        self.ranges["seq"] = [(o, min(PIECE, self.seq_bytes - o)) for o in range(0, self.seq_bytes, PIECE)]
        self.offsets = {w: mmap_offsets(self.file_size[FILE_OF[w]])
                        for w in ("mmap300", "mmap3g") if FILE_OF[w] in self.files}
        for w, offsets in self.offsets.items():
            self.ranges[w] = [(o, MMAP_SLICE) for o in offsets]
        self.wire_bytes = {w: union_bytes(r) for w, r in self.ranges.items()}
        self.reference = {}
        with h5py.File(self.files[ZEA], "r") as f:
            for w, n in FRAMES.items():
                self.reference[w] = checksum(f[DATASET][0:n])
        for w, offsets in self.offsets.items():  # the local file's bytes, read without mmap
            fd = os.open(self.files[FILE_OF[w]], os.O_RDONLY)
            try:
                self.reference[w] = [os.pread(fd, MMAP_SLICE, o) for o in offsets]
            finally:
                os.close(fd)

        repo_dir = os.path.join(self.work, "hub", REPO)
        os.makedirs(repo_dir)
        for src in self.files.values():  # hard links: the server serves the very bytes the local rows read
            dst = os.path.join(repo_dir, os.path.basename(src))
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy(src, dst)
        self.hub = Hub(os.path.join(self.work, "hub"), args.latency_ms, args.bandwidth_mbps, args.host_mbps,
                       os.path.join(self.logs, "hub_server.log"), xet=args.xet, cpu=args.server_cpu,
                       nice=args.server_nice)
        # Listing the repo once makes the server hash the files now, not inside a timed read.
        self.hub.request("GET", "/api/%s/tree/main?recursive=true" % REPO)
        self.load_before = os.getloadavg()
        self.started = datetime.datetime.now(datetime.timezone.utc)
        log("local Hub %s: %s; %d runs; load %.1f %.1f %.1f\n"
            % (self.hub.url, self.shaping(), args.repeat, *self.load_before))

        combos = [(r, w) for w in WORKLOADS if w in args.workloads for r in READERS_OF[w]
                  if not args.readers or r in args.readers]
        for rep in range(args.repeat):
            log("run %d/%d" % (rep + 1, args.repeat))
            # The contenders take turns going first: on this VM a read's time depends on what ran
            # just before it (the direct limit ends each round; memory a run frees costs the
            # next one a host fault per page once the host has taken it back), and a fixed order
            # charged that to the first contender every round.
            order = [c for c in ("local", "hubfs", "base", "bridge", "rclone") if c in args.contenders]
            order = order[rep % len(order):] + order[:rep % len(order)] if order else order
            for reader, workload in combos:
                path = self.files[FILE_OF[workload]]
                for contender in order:
                    if contender == "local":
                        self.timed_read(("local", reader, workload, "cold"), path)
                    else:
                        self.mounted_reads(contender, reader, workload, rep)
            for workload in WORKLOADS:
                if "direct" not in args.contenders or workload not in args.workloads:
                    continue
                location = self.hub.cdn_location(FILE_OF[workload])  # before the reset: not counted
                drop_caches()  # the server reads the file from disk, as for the mounts' cold reads
                self.hub.wait_quiet()
                self.hub.reset()
                reset_at = time.perf_counter()
                self.warm_pages()
                before = self.hub.stats()
                started = time.perf_counter() - reset_at
                s = direct_fetch(self.hub, location, self.ranges[workload])
                self.record(("direct", "ranges", workload, "cold"), s, before)
                self.save_trace(("direct", "ranges", workload, "cold"), started)
            self.progress(rep)
        self.load_after = os.getloadavg()
        self.report()

    def progress(self, rep):
        for key, runs in sorted(self.results.items()):
            if key[3] == "cold" and key[1] in ("h5chunk", "read", "mmap", "ranges"):
                log("   %-30s %7.3f s" % (" ".join(key), runs[rep]["s"]))

    # ----------------------------------------------------------------------------------------

    def median(self, key, field="s"):
        runs = self.results.get(key)
        if not runs or field not in runs[0]:
            return None
        return statistics.median(r[field] for r in runs)

    def shaping(self):
        a = self.args
        return "%g ms per request, %s per connection, %s for the host; %s" % (
            a.latency_ms, "%g Mbit/s" % a.bandwidth_mbps if a.bandwidth_mbps else "unlimited",
            "%g Mbit/s" % a.host_mbps if a.host_mbps else "no cap",
            "no memory warmed" if a.no_warm_pages else "%d MiB warmed before each read" % warm_pages.DEFAULT_MB)

    def describe_workloads(self):
        out = []
        for w in WORKLOADS:
            if w not in self.args.workloads:
                continue
            if w in FRAMES:
                out.append("%s %.0f MB raw, %.0f MB stored" % (w, FRAMES[w] * self.frame_bytes / 1e6,
                                                               self.wire_bytes[w] / 1e6))
            elif w in self.offsets:
                out.append("%s %d x %d KiB slices of %.0f MB (%.1f MB needed)" % (
                    w, MMAP_SLICES, MMAP_SLICE >> 10, self.file_size[FILE_OF[w]] / 1e6, self.wire_bytes[w] / 1e6))
            else:
                out.append("%s %.0f MB" % (w, self.wire_bytes[w] / 1e6))
        return "; ".join(out)

    def report(self):
        a = self.args
        print()
        print("peer benchmark, %s UTC; load average %.1f/%.1f/%.1f before, %.1f/%.1f/%.1f after; %d cores"
              % (self.started.strftime("%Y-%m-%d %H:%M"), *self.load_before, *self.load_after, os.cpu_count()))
        print("server: %s; %s; hubfs --max-requests %d%s; rclone %s" % (
            self.shaping(), ("pinned to CPU %d (taskset)" % a.server_cpu if self.hub.pinned else "not pinned")
            + (", nice %d" % a.server_nice if a.server_nice else ""),
            a.requests, " (contender hubfs also %s)" % a.hubfs_args if a.hubfs_args else "", rclone_version()))
        print("median of %d; MB/s = bytes the reader needed / s (zea: the frames' stored chunks, seq: the"
              " file, mmap: the slices); %s" % (a.repeat, self.describe_workloads()))
        print("requests: data requests to the server during the read (cold/warm); in flight: peak and"
              " mean over the cold read;\nfetched MB: bytes the server sent during the cold read"
              " (read-ahead included); x needed: fetched / needed\n")
        rows = [(c, r) for c in ("local", "hubfs", "base", "bridge", "rclone")
                for r in ("h5py", "h5chunk", "read", "mmap")] + [("direct", "ranges")]
        header = "%-16s %-7s %9s %8s %9s %8s %13s %12s %10s %8s %13s" % (
            "contender", "work", "cold s", "MB/s", "warm s", "MB/s", "requests c/w", "in flight",
            "fetched MB", "x needed", "CPU s/GB c/w")
        print(header)
        print("-" * len(header))
        for contender, reader in rows:
            for workload in WORKLOADS:
                key = (contender, reader, workload, "cold")
                cold = self.median(key)
                if cold is None:
                    continue
                warm = self.median((contender, reader, workload, "warm"))
                mb = self.wire_bytes[workload] / 1e6
                reqs = self.median(key, "data_requests")
                reqs_w = self.median((contender, reader, workload, "warm"), "data_requests")
                peak = self.median(key, "peak")
                mean = self.median(key, "mean_in_flight")
                fetched = self.median(key, "bytes_sent")
                cpu = self.median(key, "cpu_s_per_gb")
                cpu_w = self.median((contender, reader, workload, "warm"), "cpu_s_per_gb")
                print("%-16s %-7s %9.3f %8.0f %9s %8s %13s %12s %10s %8s %13s" % (
                    "%s+%s" % (contender, reader) if contender != "direct" else "direct (limit)", workload,
                    cold, mb / cold,
                    "%.3f" % warm if warm is not None else "-", "%.0f" % (mb / warm) if warm is not None else "-",
                    ("%d/%s" % (reqs, "%d" % reqs_w if reqs_w is not None else "-")) if reqs is not None else "-",
                    "%d, %.1f" % (peak, mean) if peak is not None else "-",
                    "%.1f" % (fetched / 1e6) if fetched is not None else "-",
                    "%.2f" % (fetched / self.wire_bytes[workload]) if fetched is not None else "-",
                    ("%.2f/%s" % (cpu, "%.2f" % cpu_w if cpu_w is not None else "-")) if cpu is not None else "-"))
        print()
        self.print_daemon_cpu(rows)
        self.print_ratios()

    def print_daemon_cpu(self, rows):
        """The mount daemon's part of the CPU s/GB column (hubfs's or rclone's own process): what
        a cold read costs the mount beyond the reader, which both cores' other work competes with."""
        parts = []
        for contender, reader in rows:
            for workload in WORKLOADS:
                cold = self.median((contender, reader, workload, "cold"), "daemon_cpu_s_per_gb")
                if cold is None:
                    continue
                warm = self.median((contender, reader, workload, "warm"), "daemon_cpu_s_per_gb")
                parts.append("%s+%s %s %.2f/%s" % (contender, reader, workload, cold,
                                                   "%.2f" % warm if warm is not None else "-"))
        if parts:
            print("the mount daemon's part of CPU s/GB, cold/warm:")
            for part in parts:
                print("   " + part)
            print()

    def print_ratios(self):
        def t(contender, reader, workload, phase="cold"):
            return self.median((contender, reader, workload, phase))

        def ratio(a, b):
            return a / b if a is not None and b is not None else None

        def fetched(contender, reader, workload):
            return self.median((contender, reader, workload, "cold"), "bytes_sent")

        # (name, value, target, unit, at_most): met when value >= target, or <= with at_most.
        checks = [
            ("hubfs+h5chunk vs rclone+h5py, 16 frames cold", ratio(t("rclone", "h5py", "zea16"), t("hubfs", "h5chunk", "zea16")), 5.0, "x", False),
            ("hubfs+h5chunk vs the direct limit, 16 frames cold", ratio(t("direct", "ranges", "zea16"), t("hubfs", "h5chunk", "zea16")), 0.7, "", False),
            ("hubfs+h5chunk vs rclone+h5py, 5 frames cold", ratio(t("rclone", "h5py", "zea5"), t("hubfs", "h5chunk", "zea5")), 3.0, "x", False),
            ("hubfs+h5py vs rclone+h5py, 16 frames cold", ratio(t("rclone", "h5py", "zea16"), t("hubfs", "h5py", "zea16")), 3.0, "x", False),
            ("hubfs sequential %d MB vs the direct limit, cold" % self.args.seq_mb, ratio(t("direct", "ranges", "seq"), t("hubfs", "read", "seq")), 0.7, "", False),
        ]
        if self.args.xet:  # issue 22's target for native Xet reads replaces the 0.7 above
            checks = [c for c in checks if not c[0].startswith("hubfs+h5chunk vs the direct limit")]
            checks.insert(0, ("Xet: hubfs+h5chunk vs the direct limit, 16 frames cold",
                              ratio(t("direct", "ranges", "zea16"), t("hubfs", "h5chunk", "zea16")), 0.5, "", False))
        # Issue 20's over-read targets: fetched bytes against what the reader needed, and no
        # slower than today (--baseline-bin) or than rclone.
        big = self.file_size.get(BIG)
        checks += [
            ("hubfs+h5py over-read, 5 frames cold (fetched/needed)",
             ratio(fetched("hubfs", "h5py", "zea5"), self.wire_bytes.get("zea5")), 1.5, "x", True),
            ("hubfs+h5py vs --baseline-bin (today), 5 frames cold", ratio(t("base", "h5py", "zea5"), t("hubfs", "h5py", "zea5")), 1.0, "x", False),
            ("hubfs+mmap vs --baseline-bin (today), %d MB file cold" % self.args.seq_mb,
             ratio(t("base", "mmap", "mmap300"), t("hubfs", "mmap", "mmap300")), 1.0, "x", False),
            ("hubfs+mmap, %d MB file: fraction of it fetched, cold" % (big / 1e6 if big else self.args.big_mb),
             ratio(fetched("hubfs", "mmap", "mmap3g"), big), 0.10, "", True),
            ("hubfs+mmap vs rclone+mmap, %d MB file cold" % (big / 1e6 if big else self.args.big_mb),
             ratio(t("rclone", "mmap", "mmap3g"), t("hubfs", "mmap", "mmap3g")), 1.0, "x", False),
        ]
        print("ratios (time of the baseline / time of hubfs, or bytes fetched over bytes needed;"
              " cold = fresh mount, empty cache, drop_caches)")
        for name, value, target, unit, at_most in checks:
            if value is None:
                continue
            met = value <= target if at_most else value >= target
            print("   %-55s %6.2f%-1s  target %s %g%s: %s" % (name, value, unit, "<=" if at_most else ">=",
                                                              target, unit, "met" if met else "NOT met"))
        info = [
            ("hubfs+h5chunk vs rclone+h5chunk, 16 frames cold", ratio(t("rclone", "h5chunk", "zea16"), t("hubfs", "h5chunk", "zea16"))),
            ("hubfs+h5py vs rclone+h5py, 5 frames cold", ratio(t("rclone", "h5py", "zea5"), t("hubfs", "h5py", "zea5"))),
            ("hubfs sequential vs rclone sequential, cold", ratio(t("rclone", "read", "seq"), t("hubfs", "read", "seq"))),
            ("hubfs+mmap vs rclone+mmap, %d MB file cold" % self.args.seq_mb, ratio(t("rclone", "mmap", "mmap300"), t("hubfs", "mmap", "mmap300"))),
            ("hubfs+mmap vs the direct limit, %d MB file cold" % self.args.seq_mb, ratio(t("direct", "ranges", "mmap300"), t("hubfs", "mmap", "mmap300"))),
            ("hubfs+mmap vs the direct limit, big file cold", ratio(t("direct", "ranges", "mmap3g"), t("hubfs", "mmap", "mmap3g"))),
            ("rclone+h5py over-read, 5 frames cold (fetched/needed)", ratio(fetched("rclone", "h5py", "zea5"), self.wire_bytes.get("zea5"))),
            ("rclone+mmap, big file: fraction of it fetched, cold", ratio(fetched("rclone", "mmap", "mmap3g"), big)),
            ("hubfs+h5chunk vs rclone+h5py, 16 frames warm", ratio(t("rclone", "h5py", "zea16", "warm"), t("hubfs", "h5chunk", "zea16", "warm"))),
            ("hubfs+h5chunk warm vs local h5chunk (page cache dropped), 16 frames", ratio(t("local", "h5chunk", "zea16"), t("hubfs", "h5chunk", "zea16", "warm"))),
            ("Xet: hubfs+h5chunk native vs through the bridge, 16 frames cold", ratio(t("bridge", "h5chunk", "zea16"), t("hubfs", "h5chunk", "zea16"))),
            ("Xet: bridge+h5chunk vs the direct limit, 16 frames cold", ratio(t("direct", "ranges", "zea16"), t("bridge", "h5chunk", "zea16"))),
        ]
        for reader, workload in (("h5chunk", "zea16"), ("h5chunk", "zea5"), ("h5py", "zea16"), ("h5py", "zea5"),
                                 ("read", "seq"), ("mmap", "mmap300"), ("mmap", "mmap3g")):
            for phase in ("cold", "warm"):
                info.append(("hubfs vs --baseline-bin, %s %s %s" % (reader, workload, phase),
                             ratio(t("base", reader, workload, phase), t("hubfs", reader, workload, phase))))
            info.append(("hubfs fetched vs --baseline-bin's, %s %s cold" % (reader, workload),
                         ratio(fetched("hubfs", reader, workload), fetched("base", reader, workload))))
        for name, value in info:
            if value is None:
                continue
            print("   %-55s %6.2fx" % (name, value))
        for key in sorted(self.results):
            unread = self.median(key, "unread_bytes")
            if unread is not None and key[3] == "cold":
                print("   %-55s %6.1f MB" % ("%s+%s %s: read-ahead fetched and never read, cold" % key[:3], unread / 1e6))
        warm = [r.get("data_requests") for k, runs in self.results.items()
                if k[0] == "hubfs" and k[3] == "warm" for r in runs]
        print("   hubfs warm reads: %d reads, %d data requests in all%s" % (
            len(warm), sum(warm), "" if sum(warm) == 0 else " (expected 0)"))

    def dump(self, path):
        with open(path, "w") as f:
            args = {k: sorted(v) if isinstance(v, set) else v for k, v in vars(self.args).items()}
            json.dump({"args": args, "results": [
                {"key": list(k), "runs": v} for k, v in sorted(self.results.items())]}, f, indent=1)

    def close(self):
        try:
            if self.mount is not None:
                self.mount.close()
        finally:
            force_unmount(self.mnt)
            if self.hub is not None:
                self.hub.stop()
            if not self.args.keep:
                shutil.rmtree(self.work, ignore_errors=True)


def rclone_version():
    try:
        out = subprocess.run(["rclone", "version"], capture_output=True, text=True, timeout=30).stdout
        return out.split("\n")[0].replace("rclone ", "")
    except (OSError, subprocess.TimeoutExpired):
        return "?"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency-ms", type=float, default=50)
    p.add_argument("--bandwidth-mbps", type=float, default=400, help="per connection; 0: unlimited")
    p.add_argument("--host-mbps", type=float, default=0,
                   help="the server's host-wide cap, shared by all connections (0: none)")
    p.add_argument("--repeat", type=int, default=3, help="runs; every figure is their median")
    p.add_argument("--seq-mb", type=int, default=300, help="the sequential file (seq, mmap300)")
    p.add_argument("--big-mb", type=int, default=3000, help="the big file (mmap3g), written only for it")
    p.add_argument("--requests", type=int, default=16, help="hubfs --max-requests")
    p.add_argument("--hubfs-args", default="",
                   help="more `hubfs mount` options for contender hubfs alone (not base), e.g. \"--read-ahead 4M\": "
                        "with --baseline-bin build/bin, a same-run A/B of an option")
    p.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "hubfs_peer_bench"),
                   help="where the data files are kept between runs, and each run's mounts and caches")
    p.add_argument("--json", help="also write every measurement to this file")
    p.add_argument("--contenders", default="local,hubfs,rclone,direct",
                   help="comma-separated subset of local,hubfs,base,bridge,rclone,direct (ratios need both sides)")
    p.add_argument("--xet", action="store_true", help="the server stores the files as Xet (see above)")
    p.add_argument("--baseline-bin", help="contender \"base\": the hubfs and h5chunk programs of this build "
                   "directory (another commit's build/bin), measured in the same run as this tree's")
    p.add_argument("--workloads", default="zea16,zea5,seq",
                   help="comma-separated subset of %s" % ",".join(WORKLOADS))
    p.add_argument("--readers", default="",
                   help="comma-separated subset of h5py,h5chunk,read,mmap to run (default: every reader of "
                   "each workload); e.g. h5chunk for issue 39's Xet target alone")
    p.add_argument("--trace", metavar="DIR", help="save each cold read's request log (the server's "
                   "/_hubfs/trace, from the read's start) to DIR and print its timeline")
    p.add_argument("--keep", action="store_true", help="keep the run's directory (logs, caches)")
    p.add_argument("--server-cpu", type=int, default=(os.cpu_count() or 1) - 1,
                   help="the CPU the local server is pinned to (taskset); -1: not pinned")
    p.add_argument("--server-nice", type=int, default=0,
                   help="run the local server at this nice value (e.g. -15): on a VM shared with other work "
                   "the one Python process pacing every connection is otherwise what a loaded CPU starves "
                   "first (docs/benchmarks.md, session 28), which the real Hub and CDN never share with us")
    p.add_argument("--no-warm-pages", action="store_true",
                   help="do not touch and free memory before each timed read (warm_pages.py)")
    args = p.parse_args()
    args.contenders = set(args.contenders.split(","))
    args.workloads = set(args.workloads.split(","))
    args.readers = set(args.readers.split(",")) if args.readers else set()
    if not args.readers <= {"h5py", "h5chunk", "read", "mmap"}:
        sys.exit("--readers takes a comma-separated subset of h5py,h5chunk,read,mmap")
    for name, chosen, allowed in (("--contenders", args.contenders, {"local", "hubfs", "base", "bridge", "rclone", "direct"}),
                                  ("--workloads", args.workloads, set(WORKLOADS))):
        if not chosen or not chosen <= allowed:
            sys.exit("%s takes a comma-separated subset of %s" % (name, ",".join(sorted(allowed))))
    if os.geteuid() != 0:
        sys.exit("needs root: FUSE mounts and /proc/sys/vm/drop_caches")
    if not h5py.h5z.filter_avail(BLOSC):
        sys.exit("the HDF5 Blosc plugin is missing (apt-get install hdf5-filter-plugin-blosc-serial)")
    if args.bandwidth_mbps < 0 or args.host_mbps < 0:
        sys.exit("--bandwidth-mbps and --host-mbps take a rate >= 0 (0: no limit)")
    if args.seq_mb * 1000 * 1000 < MMAP_SLICE or args.big_mb * 1000 * 1000 < MMAP_SLICE:
        sys.exit("--seq-mb and --big-mb must leave room for a %d KiB slice" % (MMAP_SLICE >> 10))
    if ("base" in args.contenders) != bool(args.baseline_bin):
        sys.exit("the contender base and --baseline-bin DIR go together")
    if ("bridge" in args.contenders) and not args.xet:
        sys.exit("the contender bridge needs --xet")
    if args.xet and not os.access(os.path.join(BIN, "hubfs-xet-pack"), os.X_OK):
        sys.exit("%s is missing: run ./scripts/build.sh" % os.path.join(BIN, "hubfs-xet-pack"))
    for program in [os.path.join(d, p) for d in [BIN] + ([args.baseline_bin] if args.baseline_bin else [])
                    for p in ("hubfs", "h5chunk")]:
        if not os.access(program, os.X_OK):
            sys.exit("%s is missing: run ./scripts/build.sh" % program)
    if shutil.which("rclone") is None:
        sys.exit("rclone is missing (apt-get install rclone)")
    os.makedirs(args.dir, exist_ok=True)
    # SIGTERM unwinds like Ctrl-C, through the finally that unmounts and stops the server.
    def on_sigterm(*_):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_sigterm)

    def on_alarm(*_):
        raise TimeoutError("a read took more than %d s" % COMMAND_TIMEOUT_S)
    signal.signal(signal.SIGALRM, on_alarm)
    bench = Bench(args)
    try:
        bench.run()
    finally:
        if args.json:
            bench.dump(args.json)
        bench.close()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
    else:
        main()
