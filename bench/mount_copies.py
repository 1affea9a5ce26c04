#!/usr/bin/python3
"""The mount's copies, weighed (issue 42 item 3): a hinted whole-range reader through a hubfs
mount, its chunk reads buffered (the page cache, FOPEN_KEEP_CACHE) or O_DIRECT (straight into the
reader's buffer), cold, warm from the disk tier and warm from the daemon's memory; CPU-seconds per
GB (the reader's read phase plus the daemon's) beside wall time, variants alternating.

    ./scripts/build.sh && /usr/bin/python3 bench/mount_copies.py     # root: mounts, drop_caches
        [--latency-ms 50] [--bandwidth-mbps 400] [--repeat 3] [--frames 16]

The file is peer_bench's zea-like one (16 Blosc frames, one chunk each, 169 MB stored). The reader
(this script with --child, a process of its own) opens the file on the mount, hints every chunk
(HUBFS_IOC_HINT), then reads the chunks with 2 threads, each chunk with one pread into a buffer the
thread reuses (touched before the timer starts), as h5chunk does; buffered or with O_DIRECT set on
the descriptor. Its CPU is its own rusage over the reads (the interpreter's start is not counted),
the daemon's is /proc/PID/stat from before the reader started until the daemon went idle after it.
Each chunk's CRC is checked against the local file's after the timed part.
  cold       a fresh mount on an empty cache directory, page cache dropped;
  warm-disk  a new mount on that cache (the daemon's memory empty), page cache dropped;
  warm-mem   the same mount again, page cache dropped: the blocks are in the daemon's memory tier.
The mount reports how many read requests the kernel sent it and their bytes (status
"kernel_reads", "kernel_read_bytes"): their mean is the reply size.
"""

import argparse
import fcntl
import json
import mmap
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

HUBFS_IOC_HINT = 0x7FF86801  # include/hubfs/range_hint.h, x86-64 and arm64
HINT_BYTES = 16376
THREADS = 2
MODES = ("buffered", "direct")
PHASES = ("cold", "warm-disk", "warm-mem")


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def child_main(path, variant, ranges):
    """Hint, then read every range (2 threads, one pread each); prints CPU, wall and CRCs."""
    fd = os.open(path, os.O_RDONLY)
    hint = struct.pack("=II", 1, len(ranges)) + b"".join(struct.pack("=QQ", o, n) for o, n in ranges)
    # A mutable buffer: Python copies an immutable ioctl argument only up to 1024 bytes.
    fcntl.ioctl(fd, HUBFS_IOC_HINT, bytearray(hint + b"\0" * (HINT_BYTES - len(hint))), True)
    if variant == "direct":
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_DIRECT)
    biggest = max(n for _, n in ranges)
    buffers = [mmap.mmap(-1, biggest + 4096) for _ in range(THREADS)]
    for b in buffers:  # first touch before the timer: the reader reuses its buffers (h5chunk does)
        b.write(b"\1" * len(b))
    crcs = [None] * len(ranges)
    views = [memoryview(b) for b in buffers]
    work = list(enumerate(ranges))
    lock = threading.Lock()

    def worker(t):
        while True:
            with lock:
                if not work:
                    return
                i, (offset, length) = work.pop(0)
            got = os.preadv(fd, [views[t][:length]], offset)
            if got != length:
                raise RuntimeError("chunk %d: read %d of %d bytes" % (i, got, length))
            # The CRC is taken on the same thread, outside the timed CPU below (subtracted).
            t0 = time.thread_time()
            crcs[i] = zlib.crc32(views[t][:length])
            crc_cpu[t] += time.thread_time() - t0

    crc_cpu = [0.0] * THREADS
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    w0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - w0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime) - sum(crc_cpu)
    os.close(fd)
    print(json.dumps({"wall": wall, "cpu": cpu, "crcs": crcs}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--latency-ms", type=float, default=50)
    p.add_argument("--bandwidth-mbps", type=float, default=400)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--frames", type=int, default=16)
    p.add_argument("--server-cpu", type=int, default=(os.cpu_count() or 1) - 1)
    p.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "hubfs_peer_bench"))
    p.add_argument("--modes", default=",".join(MODES), help="the reader's modes: buffered, direct")
    p.add_argument("--baseline-bin", help="also run another build's hubfs (its build/bin) in the same loop, "
                                          "as variants base-MODE: before/after ratios from one run")
    args = p.parse_args()
    import peer_bench as pb  # noqa: E402 (after the --child fast path: h5py is slow to import)

    zea = os.path.join(args.dir, "data", pb.ZEA)  # peer_bench's file, written once
    if not os.path.exists(zea):
        os.makedirs(os.path.dirname(zea), exist_ok=True)
        pb.write_zea(zea)
    ranges = pb.chunk_ranges(zea, args.frames)
    with open(zea, "rb") as f:
        want = [zlib.crc32(os.pread(f.fileno(), n, o)) for o, n in ranges]
    total = sum(n for _, n in ranges)
    work = tempfile.mkdtemp(prefix="mount_copies.", dir=args.dir)
    root = os.path.join(work, "root", pb.REPO)
    os.makedirs(root)
    shutil.copy(zea, os.path.join(root, pb.ZEA))
    mnt = os.path.join(work, "mnt")
    os.makedirs(mnt)
    hub = pb.Hub(os.path.join(work, "root"), args.latency_ms, args.bandwidth_mbps, 0,
                 os.path.join(work, "server.log"), cpu=args.server_cpu)
    modes = args.modes.split(",")
    # name -> (hubfs's bin directory, the reader's mode)
    variants = {m: (pb.BIN, m) for m in modes}
    if args.baseline_bin:
        variants.update({"base-" + m: (args.baseline_bin, m) for m in modes})
    names = list(variants)
    results = {(v, ph): [] for v in names for ph in PHASES}
    mount = None

    def read(name, phase):
        variant = variants[name][1]
        pb.drop_caches()
        hub.wait_quiet()
        hub.reset()
        pb.warm_pages.warm_free_pages()
        before = mount.status()
        d0 = pb.process_cpu(mount.pid)
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", os.path.join(mnt, pb.ZEA), variant,
                              json.dumps(ranges)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=600)
        if out.returncode != 0:
            raise RuntimeError("reader failed: " + out.stderr[-800:])
        line = json.loads(out.stdout.strip().splitlines()[-1])
        daemon = pb.idle_cpu(mount.pid) - d0
        hub.wait_quiet()
        after = mount.status()
        if line["crcs"] != want:
            raise RuntimeError("%s %s: a chunk's bytes differ from the local file's" % (name, phase))
        reads = after.get("kernel_reads", 0) - before.get("kernel_reads", 0)
        read_bytes = after.get("kernel_read_bytes", 0) - before.get("kernel_read_bytes", 0)
        results[(name, phase)].append({
            "wall": line["wall"], "reader_cpu": line["cpu"], "daemon_cpu": daemon,
            "requests": hub.stats()["requests"], "kernel_reads": reads, "kernel_read_bytes": read_bytes,
            "daemon_rss_mb": rss_mb(mount.pid)})

    try:
        for rep in range(args.repeat):
            order = names[rep % len(names):] + names[:rep % len(names)]  # each takes a turn going first
            for name in order:
                cache = os.path.join(work, "cache")
                shutil.rmtree(cache, ignore_errors=True)
                for phase in PHASES:
                    if phase != "warm-mem":
                        if mount is not None:
                            mount.close()
                        mount = pb.HubfsMount(hub, mnt, cache, 16, os.path.join(work, "hubfs.log"),
                                              bin_dir=variants[name][0])
                    read(name, phase)
                mount.close()
                mount = None
                sys.stderr.write("round %d/%d %s done\n" % (rep + 1, args.repeat, name))
    finally:
        if mount is not None:
            mount.close()
        hub.stop()
        shutil.rmtree(work, ignore_errors=True)

    gb = total / 1e9
    print("%d frames, %.1f MB stored, %d ms per request, %g Mbit/s per connection, load average %.1f"
          % (args.frames, total / 1e6, args.latency_ms, args.bandwidth_mbps, os.getloadavg()[0]))
    print("| variant | phase | wall s (median; runs) | CPU-s/GB reader + daemon (median; runs) | kernel reads, mean KiB | requests | daemon RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for phase in PHASES:
        for name in names:
            rs = results[(name, phase)]
            walls = [r["wall"] for r in rs]
            cpus = [(r["reader_cpu"] + r["daemon_cpu"]) / gb for r in rs]
            split = "%.2f + %.2f" % (statistics.median(r["reader_cpu"] for r in rs) / gb,
                                     statistics.median(r["daemon_cpu"] for r in rs) / gb)
            kr = statistics.median(r["kernel_reads"] for r in rs)
            kb = statistics.median(r["kernel_read_bytes"] / max(1, r["kernel_reads"]) / 1024 for r in rs)
            print("| %s | %s | %.3f; %s | %.2f (%s); %s | %d, %.0f | %s | %.0f |" % (
                name, phase, statistics.median(walls), ", ".join("%.3f" % w for w in walls),
                statistics.median(cpus), split, ", ".join("%.2f" % c for c in cpus), kr, kb,
                "/".join(str(r["requests"]) for r in rs), statistics.median(r["daemon_rss_mb"] for r in rs)))

    if args.baseline_bin:
        print("\nthis build / --baseline-bin, medians of the same run:")
        for phase in PHASES:
            for m in modes:
                def med(name, f):
                    return statistics.median(f(r) for r in results[(name, phase)])
                cpu = lambda r: r["reader_cpu"] + r["daemon_cpu"]  # noqa: E731
                print("  %-8s %-9s CPU-s/GB %.2fx, wall %.2fx" % (
                    m, phase, med(m, cpu) / med("base-" + m, cpu),
                    med(m, lambda r: r["wall"]) / med("base-" + m, lambda r: r["wall"])))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))
    else:
        main()
