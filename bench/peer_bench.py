#!/usr/bin/python3
"""hubfs against a peer (an rclone mount) and against the network's limit, cold and warm, in one
run over the bundled local Hub server; prints a table and the ratios the issue asks for.

    ./scripts/build.sh && /usr/bin/python3 bench/peer_bench.py        # root: mounts, drop_caches
        [--latency-ms 50] [--bandwidth-mbps 400] [--repeat 3] [--seq-mb 300] [--dir DIR]
        [--json OUT.json] [--contenders local,hubfs,rclone,direct] [--workloads zea16,zea5,seq]
        [--contenders hubfs,base --baseline-bin OTHER/build/bin]
        [--xet --contenders hubfs,bridge,direct --workloads zea16]   # Xet-stored files
    /usr/bin/python3 bench/peer_bench.py --latency-ms 20 --bandwidth-mbps 0   # "nothing worse"

Workloads (files written once into DIR/data, default /tmp/hubfs_peer_bench):
  zea16  all 16 frames of a zea-like dataset: float32 (16, 24, 2048, 64, 1), one frame per
         chunk, Blosc lz4 clevel 5 + byte shuffle (the generator of bench/mount.cc);
  zea5   frames 0:5 of it;
  seq    a --seq-mb MB random file read front to back in 1 MiB read()s, as cat does.
Contenders:
  local          the file on local disk (page cache dropped): h5py, `h5chunk read`, read();
  hubfs          `hubfs mount` of the Hub API: + h5py, + `h5chunk read`, + read();
  rclone         `rclone mount :http:` (--vfs-cache-mode full) of the server's plain HTTP view
                 (/_plain/...): + h5py, + `h5chunk read`, + read();
  base           with --baseline-bin DIR: the same as hubfs with DIR's hubfs and h5chunk (another
                 commit's build/bin), for before/after ratios measured in one run;
  bridge         with --xet: hubfs with HF_HUB_DISABLE_XET=1, reading the Xet-stored files through
                 the server's bridge (the resolve redirect), as before native Xet reads;
  direct         the limit: the same byte ranges (each chunk of the selection as one range; the
                 sequential file in 8 MiB ranges) fetched straight from the CDN origin over 16
                 connections (Python threads, http.client), no FUSE, no decoding.
With --xet the server stores the files as Xet (xorbs of content-defined chunks, packed by
build/bin/hubfs-xet-pack at startup): hubfs reads them natively (reconstruction plans, xorb
ranges, every chunk's hash checked), the direct limit still fetches the file's own byte ranges
from where the resolve redirects.
Cold: fresh mount, empty cache directory, `echo 3 > /proc/sys/vm/drop_caches`. Warm: a second
read on the same mount with the page cache dropped again (hubfs's block cache, rclone's VFS
cache kept). Every figure is the median of --repeat runs; contenders are interleaved within a
run so load from other processes spreads over all of them. h5py is timed in this process
(open + read, no interpreter start), `h5chunk read` as the whole command (-o /dev/null): if
anything this favours h5py. MB/s are compressed bytes on the wire (the chunks' stored sizes),
so every row compares with the direct limit.

Every mount is unmounted and the server killed on the way out, also on an error or Ctrl-C.
"""

import argparse
import collections
import datetime
import http.client
import json
import os
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
ZEA, SEQ = "zea.hdf5", "seq.bin"
WORKLOADS = {"zea16": 16, "zea5": 5, "seq": None}  # frames read from the start of the dataset
PIECE = 8 << 20  # the direct limit's range size for the sequential file (hubfs's largest request)
READ_SIZE = 1 << 20
CONNECTIONS = 16

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


def write_random(path, size):
    rng = np.random.default_rng(1)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for off in range(0, size, PIECE):
            f.write(rng.bytes(min(PIECE, size - off)))
    os.rename(tmp, path)


def prepare_files(data_dir, seq_bytes):
    os.makedirs(data_dir, exist_ok=True)
    zea, seq = os.path.join(data_dir, ZEA), os.path.join(data_dir, SEQ)
    if not os.path.exists(zea):
        log("writing %s ..." % zea)
        write_zea(zea)
    if not os.path.exists(seq) or os.path.getsize(seq) != seq_bytes:
        log("writing %s ..." % seq)
        write_random(seq, seq_bytes)
    return zea, seq


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
    def __init__(self, root, latency_ms, bandwidth_mbps, log_file, xet=False):
        # --exit-on-stdin-eof: if this script dies without its finally blocks (SIGKILL), the
        # server still goes with it.
        extra = ["--xet", "--xet-pack", os.path.join(BIN, "hubfs-xet-pack")] if xet else []
        with open(log_file, "w") as err:
            self.proc = subprocess.Popen(
                ["/usr/bin/python3", SERVER, "--root", root, "--latency-ms", str(latency_ms),
                 "--bandwidth-mbps", str(bandwidth_mbps), "--exit-on-stdin-eof"] + extra,
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
        if self.proc.poll() is None:
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
    def __init__(self, hub, mnt, cache, max_requests, log_file, bin_dir=BIN, bridge=False):
        self.mnt = mnt
        self.bin_dir = bin_dir
        env = dict(os.environ)
        env.pop("HF_HUB_DISABLE_XET", None)
        if bridge:
            env["HF_HUB_DISABLE_XET"] = "1"
        r = subprocess.run([os.path.join(bin_dir, "hubfs"), "mount", REPO, mnt, "--endpoint", hub.url,
                            "--cache-dir", cache, "--max-requests", str(max_requests),
                            "--log-file", log_file],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=MOUNT_WAIT_S * 2,
                           env=env)
        if r.returncode != 0:
            raise RuntimeError("hubfs mount failed: %s" % (r.stderr or r.stdout).strip())

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


def read_h5chunk(path, frames, bin_dir=BIN):
    t0 = time.perf_counter()
    r = subprocess.run([os.path.join(bin_dir, "h5chunk"), "read", path, DATASET, "0:%d" % frames, "-o", os.devnull],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    s = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError("h5chunk read %s failed: %s" % (path, r.stderr.strip()))
    line = json.loads(r.stdout.strip().splitlines()[-1])
    return s, line["bytes"], line["fast_path"]


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


READERS = {"h5py": read_h5py, "h5chunk": read_h5chunk, "read": read_sequential}


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

    def record(self, key, seconds, before_stats=None):
        entry = {"s": seconds}
        if before_stats is not None:
            self.hub.wait_quiet()
            s = self.hub.stats()
            entry["requests"] = s["requests"]
            entry["data_requests"] = s["resolve_requests"] + s["cdn_requests"] + s["plain_requests"]
            entry["peak"] = s["peak_concurrency"]
            entry["mean_in_flight"] = (s["in_flight_seconds"] - before_stats["in_flight_seconds"]) / seconds
            entry["bytes_sent"] = s["bytes_sent"]
        self.results[key].append(entry)

    def check(self, reader, workload, got_bytes, value):
        frames = WORKLOADS[workload]
        want_bytes = self.seq_bytes if frames is None else frames * self.frame_bytes
        if got_bytes != want_bytes:
            raise RuntimeError("%s %s: %d bytes, expected %d" % (reader, workload, got_bytes, want_bytes))
        if reader == "h5py" and value != self.reference[workload]:
            raise RuntimeError("h5py %s: the values differ from the local file's" % workload)
        if reader == "h5chunk" and value is not True:
            raise RuntimeError("h5chunk %s fell back to H5Dread" % workload)

    def timed_read(self, key, path):
        contender, reader, workload, phase = key
        drop_caches()
        if self.hub is not None:
            self.hub.wait_quiet()
            self.hub.reset()
        before = self.hub.stats() if self.hub is not None else None
        # A read on a wedged FUSE mount would block forever; the alarm interrupts it (FUSE reads
        # are interruptible) and the finally blocks unmount.
        signal.alarm(COMMAND_TIMEOUT_S)
        try:
            if reader == "h5chunk":
                seconds, got, value = read_h5chunk(path, WORKLOADS[workload], self.bin_dir(contender))
            else:
                seconds, got, value = READERS[reader](path, WORKLOADS[workload])
        finally:
            signal.alarm(0)
        self.check(reader, workload, got, value)
        self.record(key, seconds, before if contender != "local" else None)

    def mounted_reads(self, contender, reader, workload, rep):
        cache = os.path.join(self.work, "cache-%s-%s-%s-%d" % (contender, reader, workload, rep))
        log_file = os.path.join(self.logs, os.path.basename(cache) + ".log")
        try:
            if contender in ("hubfs", "base", "bridge"):
                self.mount = HubfsMount(self.hub, self.mnt, cache, self.args.requests, log_file,
                                        self.bin_dir(contender), bridge=contender == "bridge")
            else:
                self.mount = RcloneMount(self.hub, self.mnt, cache, log_file)
            path = os.path.join(self.mnt, SEQ if workload == "seq" else ZEA)
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
        zea, seq = prepare_files(os.path.join(args.dir, "data"), self.seq_bytes)
        self.frame_bytes = int(np.prod(CHUNK)) * 4
        self.ranges = {w: chunk_ranges(zea, n) for w, n in WORKLOADS.items() if n is not None}
        self.ranges["seq"] = [(o, min(PIECE, self.seq_bytes - o)) for o in range(0, self.seq_bytes, PIECE)]
        self.wire_bytes = {w: sum(n for _, n in r) for w, r in self.ranges.items()}
        self.reference = {}
        with h5py.File(zea, "r") as f:
            for w, n in WORKLOADS.items():
                if n is not None:
                    self.reference[w] = checksum(f[DATASET][0:n])

        repo_dir = os.path.join(self.work, "hub", REPO)
        os.makedirs(repo_dir)
        for src in (zea, seq):  # hard links: the server serves the very bytes the local rows read
            dst = os.path.join(repo_dir, os.path.basename(src))
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy(src, dst)
        self.hub = Hub(os.path.join(self.work, "hub"), args.latency_ms, args.bandwidth_mbps,
                       os.path.join(self.logs, "hub_server.log"), xet=args.xet)
        # Listing the repo once makes the server hash both files now, not inside a timed read.
        self.hub.request("GET", "/api/%s/tree/main?recursive=true" % REPO)
        self.load_before = os.getloadavg()
        self.started = datetime.datetime.now(datetime.timezone.utc)
        log("local Hub %s: %g ms per request, %s per connection; %d runs; load %.1f %.1f %.1f\n"
            % (self.hub.url, args.latency_ms,
               "%g Mbit/s" % args.bandwidth_mbps if args.bandwidth_mbps else "unlimited",
               args.repeat, *self.load_before))

        combos = [(r, w) for w in ("zea16", "zea5") for r in ("h5py", "h5chunk")] + [("read", "seq")]
        combos = [(r, w) for r, w in combos if w in args.workloads]
        for rep in range(args.repeat):
            log("run %d/%d" % (rep + 1, args.repeat))
            for reader, workload in combos:
                path = seq if workload == "seq" else zea
                if "local" in args.contenders:
                    self.timed_read(("local", reader, workload, "cold"), path)
                for contender in ("hubfs", "base", "bridge", "rclone"):
                    if contender in args.contenders:
                        self.mounted_reads(contender, reader, workload, rep)
            locations = {w: self.hub.cdn_location(SEQ if w == "seq" else ZEA) for w in WORKLOADS}
            for workload in WORKLOADS:
                if "direct" not in args.contenders or workload not in args.workloads:
                    continue
                drop_caches()  # the server reads the file from disk, as for the mounts' cold reads
                self.hub.wait_quiet()
                self.hub.reset()
                before = self.hub.stats()
                s = direct_fetch(self.hub, locations[workload], self.ranges[workload])
                self.record(("direct", "ranges", workload, "cold"), s, before)
            self.progress(rep)
        self.load_after = os.getloadavg()
        self.report()

    def progress(self, rep):
        for key, runs in sorted(self.results.items()):
            if key[3] == "cold" and key[1] in ("h5chunk", "read", "ranges"):
                log("   %-30s %7.3f s" % (" ".join(key), runs[rep]["s"]))

    # ----------------------------------------------------------------------------------------

    def median(self, key, field="s"):
        runs = self.results.get(key)
        if not runs or field not in runs[0]:
            return None
        return statistics.median(r[field] for r in runs)

    def report(self):
        a = self.args
        print()
        print("peer benchmark, %s UTC; load average %.1f/%.1f/%.1f before, %.1f/%.1f/%.1f after; %d cores"
              % (self.started.strftime("%Y-%m-%d %H:%M"), *self.load_before, *self.load_after, os.cpu_count()))
        print("server: %g ms per request, %s per connection; hubfs --max-requests %d; rclone %s"
              % (a.latency_ms, "%g Mbit/s" % a.bandwidth_mbps if a.bandwidth_mbps else "unlimited",
                 a.requests, rclone_version()))
        print("median of %d; MB/s = compressed bytes on the wire / s; zea16 %.0f MB raw, %.0f MB stored;"
              " zea5 %.0f MB raw, %.0f MB stored; seq %.0f MB"
              % (a.repeat, 16 * self.frame_bytes / 1e6, self.wire_bytes["zea16"] / 1e6,
                 5 * self.frame_bytes / 1e6, self.wire_bytes["zea5"] / 1e6, self.seq_bytes / 1e6))
        print("requests: data requests to the server during the read (cold/warm); in flight: peak and"
              " mean over the cold read\n")
        rows = [("local", "h5py"), ("local", "h5chunk"), ("local", "read"),
                ("hubfs", "h5py"), ("hubfs", "h5chunk"), ("hubfs", "read"),
                ("base", "h5py"), ("base", "h5chunk"), ("base", "read"),
                ("bridge", "h5py"), ("bridge", "h5chunk"), ("bridge", "read"),
                ("rclone", "h5py"), ("rclone", "h5chunk"), ("rclone", "read"),
                ("direct", "ranges")]
        header = "%-16s %-6s %9s %8s %9s %8s %13s %12s" % ("contender", "work", "cold s", "MB/s", "warm s",
                                                            "MB/s", "requests c/w", "in flight")
        print(header)
        print("-" * len(header))
        for contender, reader in rows:
            for workload in WORKLOADS:
                cold = self.median((contender, reader, workload, "cold"))
                if cold is None:
                    continue
                warm = self.median((contender, reader, workload, "warm"))
                mb = self.wire_bytes[workload] / 1e6
                reqs = self.median((contender, reader, workload, "cold"), "data_requests")
                reqs_w = self.median((contender, reader, workload, "warm"), "data_requests")
                peak = self.median((contender, reader, workload, "cold"), "peak")
                mean = self.median((contender, reader, workload, "cold"), "mean_in_flight")
                print("%-16s %-6s %9.3f %8.0f %9s %8s %13s %12s" % (
                    "%s+%s" % (contender, reader) if contender != "direct" else "direct (limit)", workload,
                    cold, mb / cold,
                    "%.3f" % warm if warm is not None else "-", "%.0f" % (mb / warm) if warm is not None else "-",
                    ("%d/%s" % (reqs, "%d" % reqs_w if reqs_w is not None else "-")) if reqs is not None else "-",
                    "%d, %.1f" % (peak, mean) if peak is not None else "-"))
        print()
        self.print_ratios()

    def print_ratios(self):
        def t(contender, reader, workload, phase="cold"):
            return self.median((contender, reader, workload, phase))

        def ratio(a, b):
            return a / b if a is not None and b is not None else None

        checks = [
            ("hubfs+h5chunk vs rclone+h5py, 16 frames cold", ratio(t("rclone", "h5py", "zea16"), t("hubfs", "h5chunk", "zea16")), 5.0, "x"),
            ("hubfs+h5chunk vs the direct limit, 16 frames cold", ratio(t("direct", "ranges", "zea16"), t("hubfs", "h5chunk", "zea16")), 0.7, ""),
            ("hubfs+h5chunk vs rclone+h5py, 5 frames cold", ratio(t("rclone", "h5py", "zea5"), t("hubfs", "h5chunk", "zea5")), 3.0, "x"),
            ("hubfs+h5py vs rclone+h5py, 16 frames cold", ratio(t("rclone", "h5py", "zea16"), t("hubfs", "h5py", "zea16")), 3.0, "x"),
            ("hubfs sequential %d MB vs the direct limit, cold" % self.args.seq_mb, ratio(t("direct", "ranges", "seq"), t("hubfs", "read", "seq")), 0.7, ""),
        ]
        if self.args.xet:  # issue 22's target for native Xet reads replaces the 0.7 above
            checks = [c for c in checks if not c[0].startswith("hubfs+h5chunk vs the direct limit")]
            checks.insert(0, ("Xet: hubfs+h5chunk vs the direct limit, 16 frames cold",
                              ratio(t("direct", "ranges", "zea16"), t("hubfs", "h5chunk", "zea16")), 0.5, ""))
        print("ratios (time of the baseline / time of hubfs; cold = fresh mount, empty cache, drop_caches)")
        for name, value, target, unit in checks:
            if value is None:
                continue
            print("   %-55s %6.2f%-1s  target >= %g%s: %s" % (name, value, unit, target, unit,
                                                              "met" if value >= target else "NOT met"))
        info = [
            ("hubfs+h5chunk vs rclone+h5chunk, 16 frames cold", ratio(t("rclone", "h5chunk", "zea16"), t("hubfs", "h5chunk", "zea16"))),
            ("hubfs+h5py vs rclone+h5py, 5 frames cold", ratio(t("rclone", "h5py", "zea5"), t("hubfs", "h5py", "zea5"))),
            ("hubfs sequential vs rclone sequential, cold", ratio(t("rclone", "read", "seq"), t("hubfs", "read", "seq"))),
            ("hubfs+h5chunk vs rclone+h5py, 16 frames warm", ratio(t("rclone", "h5py", "zea16", "warm"), t("hubfs", "h5chunk", "zea16", "warm"))),
            ("hubfs+h5chunk warm vs local h5chunk (page cache dropped), 16 frames", ratio(t("local", "h5chunk", "zea16"), t("hubfs", "h5chunk", "zea16", "warm"))),
            ("Xet: hubfs+h5chunk native vs through the bridge, 16 frames cold", ratio(t("bridge", "h5chunk", "zea16"), t("hubfs", "h5chunk", "zea16"))),
            ("Xet: bridge+h5chunk vs the direct limit, 16 frames cold", ratio(t("direct", "ranges", "zea16"), t("bridge", "h5chunk", "zea16"))),
        ]
        for reader, workload in (("h5chunk", "zea16"), ("h5chunk", "zea5"), ("h5py", "zea16"), ("h5py", "zea5"),
                                 ("read", "seq")):
            for phase in ("cold", "warm"):
                info.append(("hubfs vs --baseline-bin, %s %s %s" % (reader, workload, phase),
                             ratio(t("base", reader, workload, phase), t("hubfs", reader, workload, phase))))
        for name, value in info:
            if value is None:
                continue
            print("   %-55s %6.2fx" % (name, value))
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
    p.add_argument("--repeat", type=int, default=3, help="runs; every figure is their median")
    p.add_argument("--seq-mb", type=int, default=300)
    p.add_argument("--requests", type=int, default=16, help="hubfs --max-requests")
    p.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "hubfs_peer_bench"),
                   help="where the data files are kept between runs, and each run's mounts and caches")
    p.add_argument("--json", help="also write every measurement to this file")
    p.add_argument("--contenders", default="local,hubfs,rclone,direct",
                   help="comma-separated subset of local,hubfs,base,bridge,rclone,direct (ratios need both sides)")
    p.add_argument("--xet", action="store_true", help="the server stores the files as Xet (see above)")
    p.add_argument("--baseline-bin", help="contender \"base\": the hubfs and h5chunk programs of this build "
                   "directory (another commit's build/bin), measured in the same run as this tree's")
    p.add_argument("--workloads", default="zea16,zea5,seq", help="comma-separated subset of zea16,zea5,seq")
    p.add_argument("--keep", action="store_true", help="keep the run's directory (logs, caches)")
    args = p.parse_args()
    args.contenders = set(args.contenders.split(","))
    args.workloads = set(args.workloads.split(","))
    for name, chosen, allowed in (("--contenders", args.contenders, {"local", "hubfs", "base", "bridge", "rclone", "direct"}),
                                  ("--workloads", args.workloads, set(WORKLOADS))):
        if not chosen or not chosen <= allowed:
            sys.exit("%s takes a comma-separated subset of %s" % (name, ",".join(sorted(allowed))))
    if os.geteuid() != 0:
        sys.exit("needs root: FUSE mounts and /proc/sys/vm/drop_caches")
    if not h5py.h5z.filter_avail(BLOSC):
        sys.exit("the HDF5 Blosc plugin is missing (apt-get install hdf5-filter-plugin-blosc-serial)")
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
    main()
