#!/usr/bin/python3
"""A training loop's reads: 4 worker processes reading random whole frames of 16 zea-like files,
cold and warm, through local disk (h5py), rclone's mount (--vfs-cache-mode full) + h5py, a hubfs
mount (h5chunk.FrameDataset on the mount's paths) and hf:// (FrameDataset + plan), in one run.

    /usr/bin/python3 bench/training_loop.py [--latency-ms 50] [--bandwidth-mbps 400] [--reads 160]
        [--files 16] [--frames 30] [--workers 4] [--contenders local,rclone,mount,hf]
        [--cache-size 0] [--epochs 2] [--dir DIR] [--profile] [--perf PERF_DIR]

The workload (issue 40): each file holds 30 frames of (24, 1024, 64, 1) int16, a sine plus
Gaussian noise (sigma 20), Blosc-zstd level 3 with byte shuffle, one frame per chunk; a fixed
seed. A multiprocessing pool of --workers (forked: the DataLoader's default on Linux) reads one
frame per task, batch size 1, at most 2 x workers tasks outstanding (the DataLoader's prefetch);
the time runs from the first index handed out to the last frame back, the workers already
started ("start s": the pool's start, which for hf:// includes the files a FrameDataset opens in
each forked worker as it starts). Every frame is checked against local h5py (crc32). Per contender: cold frames/s (empty
caches), warm frames/s (a second epoch), worker PSS (/proc/PID/smaps_rollup), and CPU-s per GB of
frames (the bench's process and the workers; not the server nor a mount's daemon); opening the
16 files (16 sequential h5py.File() in a fresh process, medians of 5: the time, the requests the
Hub answered, the opening process's CPU) for rclone, the mount and hf://. With --cache-size (e.g. 256M, smaller than the
data), the hf:// contender runs --epochs epochs and reports the bytes fetched per epoch and the
cache's size after each. Needs root for the mounts (FUSE); contenders that cannot start are
reported as skipped. Shaping is the local Hub server's (bench/peer_bench.py).

Where an epoch's time goes: --profile prints, per epoch, the CPU seconds of each process (the
bench's, where a plan runs; the workers'; the Hub server's; a mount's daemon), each frame's wall
time, CPU and wait on in-flight markers in its worker, and from the Hub's trace the range
requests in flight over the epoch and the blocks requested twice (with --dir, the trace is
kept in DIR/logs/); then each frame's way through the epoch, on one clock for every process:
when the plan hinted it, when it was handed to a worker, when the Hub ended its last block's
request, when the plan released its markers, when its worker started and ended it (medians and
p90s of the gaps, and counts per tenth of the epoch), and how busy each worker was. --perf
PERF_DIR records each epoch's processes with `perf record -g`. A kept --dir keeps its files
when they were written for the same workload (files, frames, seed).
"""

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_bench  # noqa: E402  (bench/: the local Hub, the mounts)

sys.path.insert(0, os.path.join(peer_bench.REPO_ROOT, "build", "python"))
import h5chunk  # noqa: E402
import hubfs  # noqa: E402

SHAPE = (24, 1024, 64, 1)
BLOSC = 32001
BLOSC_ZSTD3_SHUFFLE = (0, 0, 0, 0, 3, 1, 5)  # clevel 3, byte shuffle, zstd
DATASET = "data/raw_data"
SUBDIR = "train"
OPEN_REPEATS = 5


def write_files(repo_dir, files, frames, seed, stamp_path=None):
    """The workload's files in repo_dir (kept when stamp_path says they are this workload's;
    without one, always written)."""
    import json
    stamp = json.dumps([files, frames, seed, SHAPE, BLOSC_ZSTD3_SHUFFLE])
    names = [f"{SUBDIR}/rec{k:02d}.hdf5" for k in range(files)]
    if stamp_path is not None:
        try:
            with open(stamp_path) as f:
                if f.read() == stamp:
                    return names  # a kept --dir's files, written with the same workload
        except OSError:
            pass
        if os.path.exists(stamp_path):
            os.remove(stamp_path)  # rewritten below: not the kept files' any more
    rng = np.random.default_rng(seed)
    t = np.arange(int(np.prod(SHAPE))).reshape(SHAPE)
    os.makedirs(os.path.join(repo_dir, SUBDIR), exist_ok=True)
    names = []
    for k in range(files):
        name = f"{SUBDIR}/rec{k:02d}.hdf5"
        data = np.empty((frames,) + SHAPE, "int16")
        for i in range(frames):
            data[i] = (np.sin(t / (50.0 + k + i)) * 2000 + rng.normal(0, 20, SHAPE)).astype("int16")
        with h5py.File(os.path.join(repo_dir, name), "w") as f:
            f.create_dataset(DATASET, data=data, chunks=(1,) + SHAPE, compression=BLOSC,
                             compression_opts=BLOSC_ZSTD3_SHUFFLE)
        names.append(name)
    if stamp_path is not None:
        with open(stamp_path, "w") as f:
            f.write(stamp)
    return names


class H5pyFrames:
    """Frames through h5py, each process opening the files on first use (h5py's advice)."""

    def __init__(self, paths, lengths):
        self.paths, self.starts = paths, np.cumsum([0] + lengths)
        self._files = {}

    def __len__(self):
        return int(self.starts[-1])

    def __getitem__(self, i):
        k = int(np.searchsorted(self.starts, i, side="right") - 1)
        f = self._files.get(k)
        if f is None:
            f = self._files[k] = h5py.File(self.paths[k], "r")
        return f[DATASET][i - self.starts[k]]

    def __getstate__(self):
        return {"paths": self.paths, "starts": self.starts, "_files": {}}


_dataset = None  # the worker's, set by the pool's initializer (inherited on fork)
_profile = None  # --profile: [seconds waiting on in-flight markers] in this worker


def _init(ds, profile=False):
    global _dataset, _profile
    _dataset = ds
    if profile:
        from h5chunk import _inflight
        _profile = [0.0]
        wait = _inflight.Markers.wait

        def timed_wait(self, *a, **k):
            t = time.perf_counter()
            try:
                return wait(self, *a, **k)
            finally:
                _profile[0] += time.perf_counter() - t
        _inflight.Markers.wait = timed_wait


def _read(i):
    if _profile is None:
        a = _dataset[i]
        return i, zlib.crc32(memoryview(np.ascontiguousarray(a)).cast("B"))
    t, c, w = time.perf_counter(), time.process_time(), _profile[0]
    start = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process (the timeline)
    a = _dataset[i]
    t, c, w = time.perf_counter() - t, time.process_time() - c, _profile[0] - w
    return i, zlib.crc32(memoryview(np.ascontiguousarray(a)).cast("B")), (t, c, w, os.getpid(), start,
                                                                          time.monotonic(), i)


def _pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_s(pids=()):
    """CPU seconds of this process and of `pids` (the pool's workers, still running)."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    total = s.ru_utime + s.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
        except OSError:
            pass
    return total


def _started(_):
    """A worker's start: with FrameDataset over hf://, the files it opens as it is forked
    (h5chunk._frames.child_opener) are open."""
    try:
        from h5chunk import _frames
    except ImportError:
        return os.getpid()
    opener = getattr(_frames, "child_opener", None)
    if opener is not None:
        opener.join()
    return os.getpid()


def _start_workers(pool, workers):
    """Returns once every worker of the pool has started (each ran _started; a few rounds at
    most: a worker that never gets a task is not waited for)."""
    pids = {p.pid for p in pool._pool}
    seen = set()
    for _ in range(20):
        seen |= set(pool.map(_started, range(workers * 4), chunksize=1))
        if pids <= seen:
            break


def run_epoch(pool, indices, workers, planner=None, timings=None, timeline=None):
    """(seconds, {index: crc}) of reading `indices` through the pool, 2 x workers outstanding;
    with --profile, each frame's (wall, CPU, marker wait, worker pid, start, end, index) in the
    worker appended to `timings`, and when each index was handed out in timeline["handed"]."""
    timings = [] if timings is None else timings
    outstanding = threading.Semaphore(2 * workers)
    got, errors = {}, []
    done = threading.Event()
    left = [len(indices)]
    lock = threading.Lock()

    def finished(result):
        with lock:
            got[result[0]] = result[1]
            if len(result) > 2:
                timings.append(result[2])
            left[0] -= 1
            if left[0] == 0:
                done.set()
        outstanding.release()

    def failed(e):
        errors.append(e)
        done.set()
        outstanding.release()

    source = iter(planner) if planner is not None else iter(indices)
    t0 = time.perf_counter()
    for i in source:
        outstanding.acquire()
        if errors:
            break
        if timeline is not None:
            timeline.setdefault("handed", {})[i] = time.monotonic()
        pool.apply_async(_read, (i,), callback=finished, error_callback=failed)
    done.wait()
    seconds = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return seconds, got


def contender(name, ds, indices, args, truth, frame_bytes, plan=None, hub=None, cache_dir=None, daemon=None):
    import multiprocessing
    ctx = multiprocessing.get_context("fork")
    result = {"name": name}
    t_start = time.perf_counter()
    with ctx.Pool(args.workers, initializer=_init, initargs=(ds, args.profile)) as pool:
        _start_workers(pool, args.workers)  # before the clock
        # Printed beside the rates: a FrameDataset over hf:// opens its files in a forked worker
        # as it starts, work that the epoch's clock (which excludes worker start) does not see.
        result["start_s"] = time.perf_counter() - t_start
        epochs = []
        for e in range(max(2, args.epochs if plan is not None else 2)):
            timeline = {} if args.profile else None
            if hub and args.profile:
                hub.wait_quiet()
                t = time.monotonic()
                hub.reset()  # the trace starts here
                timeline["hub_epoch"] = (t + time.monotonic()) / 2  # its trace's 0 on our clock
            before_stats = hub.stats() if hub else None
            if args.backed_mb:
                _back_free_memory(args.backed_mb, args.dir or tempfile.gettempdir())
            pids = [p.pid for p in pool._pool]
            others = {"hub": hub.proc.pid if hub else None, "daemon": daemon}
            cpu0 = _cpu_s(pids)
            parts0 = _cpu_parts(pids, others)
            split0 = _cpu_split(pids, others) if args.profile else None
            faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            reported0 = _reported_kib()
            planner = ds.plan(indices, ahead=args.ahead) if plan else None
            timings = []
            perf = _start_perf(args, name, e, [os.getpid()] + pids + [p for p in others.values() if p])
            undo = _record_plan(ds, timeline) if timeline is not None and planner is not None else None
            if timeline is not None:
                timeline["t0"] = time.monotonic()
            seconds, got = run_epoch(pool, indices, args.workers, planner, timings, timeline)
            _stop_perf(perf)
            if undo:
                undo()
            cpu = _cpu_s(pids) - cpu0
            if args.profile:
                parts = {k: v - parts0[k] for k, v in _cpu_parts(pids, others).items()}
                split = _cpu_split(pids, others)
                trace = _hub_trace(hub) if hub else None
                block = next((b for b in getattr(ds, "_blocks", ()) if b), 1 << 20)  # the mount's: 1 MiB
                _print_profile(f"{name}, epoch {e + 1}", seconds, len(indices), parts, timings, trace, block)
                _print_split(split0, split)
                _print_timeline(ds, seconds, timings, timeline, trace, block)
                # The planner's fresh pages (each a fault the kernel zeroes): its fetches' memory.
                print(f"    main process: {resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0} "
                      f"minor page faults")
                if reported0 is not None:
                    # Memory freed during the epoch that the guest handed to its host: the pages the
                    # next writes fault in afresh (docs/benchmarks.md, session 36).
                    print(f"    the machine gave its host back {(_reported_kib() - reported0) / 1024:.0f} MiB "
                          f"of freed memory during the epoch (free page reporting)")
                if trace and args.dir:
                    import json
                    with open(os.path.join(args.dir, "logs", f"trace-{name.split()[0].strip(':/')}-{e + 1}.json"), "w") as f:
                        json.dump(trace, f)
            wrong = sum(1 for i, c in got.items() if truth[i] != c)
            ep = {"s": seconds, "fps": len(indices) / seconds, "wrong": wrong,
                  "cpu_s_per_gb": cpu / (len(indices) * frame_bytes / 1e9)}
            if hub:
                hub.wait_quiet()
                after = hub.stats()
                ep["fetched"] = after.get("bytes_sent", 0) - before_stats.get("bytes_sent", 0)
            if cache_dir:
                ep["cache_bytes"] = _du(cache_dir)
            epochs.append(ep)
        result["epochs"] = epochs
        result["pss_mib"] = [round(_pss_kib(p.pid) / 1024, 1) for p in pool._pool]
    return result


def _reported_kib():
    """KiB of freed memory this (virtual) machine has handed back to its host so far (virtio-balloon
    free page reporting), or None where the kernel does not report them."""
    try:
        with open("/sys/module/page_reporting/parameters/reported_kib") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


def _back_free_memory(mb, where):
    """--backed-mb: writes mb MiB into a file under `where` and deletes it, just before an epoch's
    clock, so the page cache the epoch fills reuses pages just freed. On this VM (a Firecracker
    guest with virtio-balloon free page reporting) a write into pages that have stayed free a few
    seconds costs ~10x the system time: `dd` of 380 MB (a cold hf:// epoch's bytes) took 0.06 s
    right after a 400-600 MB file was deleted, 0.6-0.8 s 3 s later or after 600 MB of anonymous
    memory was freed instead. A measure of that artifact, not of the code: off by default."""
    path = os.path.join(where, "backed-mb.tmp")
    page = b"\1" * (1 << 20)
    with open(path, "wb") as f:
        for _ in range(mb):
            f.write(page)
    os.unlink(path)


def _cpu_parts(pids, others):
    """CPU seconds by process: this one (the sampler's, where a plan runs), the workers', and
    `others` (name: pid or None)."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    out = {"main": s.ru_utime + s.ru_stime, "workers": _cpu_s(pids) - _cpu_s()}
    for k, pid in others.items():
        if pid:
            out[k] = _cpu_s([pid]) - _cpu_s()
    return out


def _proc_user_sys(pid):
    """(user, system) CPU seconds of a process, all its threads (/proc/PID/stat); None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _machine_busy():
    """The machine's (busy, all) CPU seconds since boot, every core (/proc/stat's first line;
    busy: everything but idle and iowait, so softirq and steal too)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(v) - v[3] - v[4]) / tick, sum(v) / tick


def _cpu_split(pids, others):
    """--profile: user and system CPU seconds by process (this one, the workers summed, `others`)
    and the machine's busy CPU, to be differenced over an epoch: where every CPU-second of it
    went, across all the processes on the machine (the rest: other work, interrupts)."""
    s = resource.getrusage(resource.RUSAGE_SELF)
    out = {"main": (s.ru_utime, s.ru_stime)}
    w = [_proc_user_sys(p) for p in pids]
    out["workers"] = (sum(x[0] for x in w if x), sum(x[1] for x in w if x))
    for k, pid in others.items():
        if pid and _proc_user_sys(pid):
            out[k] = _proc_user_sys(pid)
    out["machine"] = _machine_busy()
    out["all"] = _all_processes()
    return out


def _all_processes():
    """{pid: (name, user + system CPU seconds)} of every process on the machine (kernel threads
    too: writeback, softirq), to name the largest others of an epoch. By pid: a kworker's name
    changes with the work it runs."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    head, rest = f.read().rsplit(")", 1)
            except OSError:
                continue
            fields = rest.split()
            out[int(d)] = (head.split("(", 1)[1], (int(fields[11]) + int(fields[12])) / tick)
    return out


def _print_split(before, after):
    every = {p: (n, v - before["all"].get(p, ("", 0.0))[1]) for p, (n, v) in after["all"].items()}
    parts = {k: tuple(a - b for a, b in zip(after[k], before[k])) for k in after if k in before and k != "all"}
    busy, total = parts.pop("machine")
    ours = sum(u + s for u, s in parts.values())
    print("    CPU s user/system: " + ", ".join(f"{k} {u:.2f}/{s:.2f}" for k, (u, s) in parts.items())
          + f"; the machine busy {busy:.2f} of {total:.2f} (not these processes: {busy - ours:.2f})")
    mine = {os.getpid()} | set(_descendants(os.getpid()))
    top = sorted(((v, (p, n)) for p, (n, v) in every.items() if p not in mine and v >= 0.02), reverse=True)[:6]
    print("    the largest other processes, CPU s: " + (", ".join(f"{n}[{p}] {v:.2f}" for v, (p, n) in top) or "none"))


def _descendants(pid):
    """Every process below pid (/proc/PID/task/*/children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    kids = [int(x) for x in f.read().split()]
                out += kids
                todo += kids
        except OSError:
            pass
    return out


def _start_perf(args, name, epoch, pids):
    """--perf DIR: `perf record -g` of these processes over the epoch, into DIR/perf-NAME-EPOCH.data."""
    if not args.perf:
        return None
    os.makedirs(args.perf, exist_ok=True)
    out = os.path.join(args.perf, f"perf-{name.split()[0].strip(':/')}-{epoch + 1}.data")
    p = subprocess.Popen(["perf", "record", "-q", "-F", "499", "-g", "-o", out, "-p", ",".join(map(str, pids))],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # perf attaches before the clock starts
    return p


def _stop_perf(p):
    if p is not None:
        import signal
        p.send_signal(signal.SIGINT)
        p.wait()


def _hub_trace(hub):
    import json
    return json.loads(hub.request("GET", "/_hubfs/trace")[2])


def _print_profile(title, seconds, frames, parts, timings, trace, block):
    """--profile: where an epoch's time went (per-process CPU, the workers' time per frame, and
    from the Hub's trace the data requests in flight over time and blocks, of ``block`` bytes,
    fetched twice)."""
    print(f"  [{title}] {seconds:.2f} s, {frames / seconds:.1f} frames/s; CPU s: "
          + ", ".join(f"{k} {v:.2f}" for k, v in parts.items()))
    if timings:
        wall, cpu, wait = (sorted(t[n] for t in timings) for n in range(3))
        med = lambda v: v[len(v) // 2]  # noqa: E731
        print(f"    per frame in a worker: wall {sum(wall) / len(wall) * 1e3:.1f} ms mean "
              f"(median {med(wall) * 1e3:.1f}), CPU {sum(cpu) / len(cpu) * 1e3:.1f} ms, waiting on markers "
              f"{sum(wait) / len(wait) * 1e3:.1f} ms mean ({sum(1 for w in wait if w > 0.001)} frames waited)")
    data = [t for t in trace or () if t.get("range") and "end" in t]
    if not data:
        return
    t0 = min(t["begin"] for t in data)
    t1 = max(t["end"] for t in data)
    busy = sum(t["end"] - t["begin"] for t in data)
    nbytes, seen, twice = 0, set(), 0
    for t in data:
        lo, hi = (int(x) for x in t["range"].split("=")[1].split("-"))
        nbytes += hi - lo + 1
        for b in range(lo // block, hi // block + 1):
            if (t["path"], b) in seen:
                twice += 1
            seen.add((t["path"], b))
    print(f"    Hub: {len(data)} range requests, {nbytes / 1e6:.0f} MB over {t1 - t0:.2f} s, "
          f"{busy / max(t1 - t0, 1e-9):.1f} in flight on average, {twice} blocks requested twice")
    step = max(0.25, (t1 - t0) / 12)
    line = []
    k = t0
    while k < t1:
        inflight = sum(min(t["end"], k + step) - max(t["begin"], k) for t in data
                       if t["end"] > k and t["begin"] < k + step) / step
        line.append(f"{inflight:.1f}")
        k += step
    print(f"    in flight per {step:.2f} s: " + " ".join(line))


_BLOBS = {}  # --profile: file number -> "/blobs/<sha256>", the Hub's path for its bytes


def _record_plan(ds, timeline):
    """--profile: records, on this process's clock, when the plan hinted each frame (its hint
    call returned) and when it released each marker (the frame's blocks on disk for the workers).
    Returns what undoes it."""
    from h5chunk import _frames, _inflight
    hinted, names_of, released = {}, {}, {}
    timeline.update(hinted=hinted, names_of=names_of, released=released)
    hint, add, release = type(ds)._hint, _frames._Arrivals.add, _inflight.Markers.release

    def timed_hint(self, indices, max_bytes, arrivals, *located):
        indices = list(indices)
        n = hint(self, indices, max_bytes, arrivals, *located)
        t = time.monotonic()
        for i in indices:
            hinted.setdefault(i, t)
        return n

    def timed_add(self, k, ranges, names, *rest):
        names_of[(k, ranges[0][0])] = list(names)
        return add(self, k, ranges, names, *rest)

    def timed_release(self, names):
        names = list(names)
        release(self, names)
        t = time.monotonic()
        for n in names:
            released[n] = t

    type(ds)._hint, _frames._Arrivals.add, _inflight.Markers.release = timed_hint, timed_add, timed_release

    def undo():
        type(ds)._hint, _frames._Arrivals.add, _inflight.Markers.release = hint, add, release
    return undo


def _print_timeline(ds, seconds, timings, timeline, trace, block):
    """--profile: each frame's way, in ms from the epoch's start (medians, and the worst 10%):
    hinted (the plan's hint call returned), handed to a worker, its last block's Hub request
    ended, its markers released, the worker started and ended it; and how busy each worker was."""
    if not timings or not timeline:
        return
    t0 = timeline["t0"]
    ms = lambda t: (t - t0) * 1e3  # noqa: E731
    by_index = {t[6]: t for t in timings}
    hub_end = {}  # (path, block) -> when its request ended, on our clock
    hub0 = timeline.get("hub_epoch")
    if trace and hub0 is not None and hasattr(ds, "paths"):
        for r in trace:
            if r.get("range") and "end" in r:
                lo, hi = (int(x) for x in r["range"].split("=")[1].split("-"))
                for b in range(lo // block, hi // block + 1):
                    hub_end[(r["path"], b)] = max(hub_end.get((r["path"], b), 0), hub0 + r["end"])
    rows = []
    for i, handed in timeline.get("handed", {}).items():
        t = by_index.get(i)
        if t is None:
            continue
        row = {"handed": ms(handed), "start": ms(t[4]), "end": ms(t[5]), "wait": t[2] * 1e3}
        if i in timeline.get("hinted", {}):
            row["hinted"] = ms(timeline["hinted"][i])
        if hasattr(ds, "frame_ranges"):
            k, ranges = ds.frame_ranges(i)
            blocks = {b for o, n in ranges for b in range(o // block, (o + n - 1) // block + 1)}
            names = ("/" + ds.paths[k].rsplit("/", 1)[-1], _BLOBS.get(k, "\0"))  # the path, or its blob
            ends = [v for (p, b), v in hub_end.items() if b in blocks and p.endswith(names)]
            if ends:
                row["fetched"] = ms(max(ends))
            names = timeline.get("names_of", {}).get((k, ranges[0][0]))
            if names:
                rel = [timeline["released"][n] for n in names if n in timeline.get("released", {})]
                if rel:
                    row["released"] = ms(max(rel))
        rows.append(row)

    if hub_end:
        first = min(hub0 + r["begin"] for r in trace if r.get("range"))
        print(f"    the first range request reached the Hub {ms(first):.0f} ms into the epoch; the plan's first hint "
              f"returned at {min((r['hinted'] for r in rows if 'hinted' in r), default=float('nan')):.0f} ms")

    def stat(key, base):
        v = sorted(r[key] - r[base] for r in rows if key in r and base in r)
        if not v:
            return "-"
        return f"{v[len(v) // 2]:.0f} (p90 {v[int(len(v) * 0.9)]:.0f}, n {len(v)})"
    print("    frame timeline, ms (median, p90): "
          f"hint before handing out {stat('handed', 'hinted')}; fetched after handing out {stat('fetched', 'handed')}; "
          f"released after fetched {stat('released', 'fetched')}; worker start after handing out {stat('start', 'handed')}; "
          f"in the worker {stat('end', 'start')}")
    workers = {}
    for t in timings:
        workers.setdefault(t[3], []).append(t)
    busy = [sum(x[5] - x[4] for x in v) / seconds for v in workers.values()]
    waits = [sum(x[2] for x in v) / seconds for v in workers.values()]
    print("    workers busy " + ", ".join(f"{b:.0%}" for b in busy) + " of the epoch (of which waiting on markers "
          + ", ".join(f"{w:.0%}" for w in waits) + ")")
    # Over the epoch in tenths: frames handed out, hinted, fetched at the Hub, done.
    step = seconds * 1e3 / 10
    line = lambda key: " ".join(f"{sum(1 for r in rows if key in r and k * step <= r[key] < (k + 1) * step):3d}"  # noqa: E731
                                for k in range(10))
    for key in ("hinted", "handed", "fetched", "released", "end"):
        print(f"    {key:>9} per tenth: {line(key)}")


def _du(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_blocks * 512
            except OSError:
                pass
    return total


def open_time(paths, hf_options=None, hub=None):
    """Medians over OPEN_REPEATS fresh processes of 16 sequential h5py.File() opens: (seconds,
    the opening process's CPU seconds, requests the Hub answered per process). The CPU leaves out
    a mount's daemon; the requests count every process's, the daemons' included."""
    code = ("import sys, time, json, resource\n"
            f"sys.path.insert(0, {os.path.join(peer_bench.REPO_ROOT, 'build', 'python')!r})\n"
            "import h5py\n"
            "paths, opts = json.loads(sys.argv[1]), json.loads(sys.argv[2])\n"
            "if opts is not None:\n"
            "    import hubfs\n"
            "def cpu():\n"
            "    r = resource.getrusage(resource.RUSAGE_SELF)\n"
            "    return r.ru_utime + r.ru_stime\n"
            "t0, c0 = time.perf_counter(), cpu()\n"
            "for p in paths:\n"
            "    h5py.File(hubfs.open(p, **opts) if opts is not None else p, 'r').close()\n"
            "print(time.perf_counter() - t0, cpu() - c0)\n")
    import json
    times, cpus, requests = [], [], []
    for _ in range(OPEN_REPEATS):
        before = hub.stats().get("requests", 0) if hub else 0
        r = subprocess.run(["/usr/bin/python3", "-c", code, json.dumps(paths), json.dumps(hf_options)],
                           capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(r.stderr)
        if hub:
            hub.wait_quiet()
            requests.append(hub.stats().get("requests", 0) - before)
        seconds, cpu = (float(x) for x in r.stdout.split())
        times.append(seconds)
        cpus.append(cpu)
    return {"s": statistics.median(times), "cpu_s": statistics.median(cpus),
            "requests": statistics.median(requests) if requests else None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency-ms", type=float, default=50)
    ap.add_argument("--bandwidth-mbps", type=float, default=400)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--reads", type=int, default=160)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--ahead", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--cache-size", default="")
    ap.add_argument("--max-requests", type=int, default=0,
                    help="hf://: hubfs.open's max_requests (connections per process; 0: its default)")
    ap.add_argument("--block-size", default="",
                    help="hf://: the block the FrameDataset reads in (hubfs.open's block_size, e.g. 128K; "
                         "default: FrameDataset's)")
    ap.add_argument("--seed", type=int, default=40)
    ap.add_argument("--contenders", default="local,rclone,mount,hf")
    ap.add_argument("--dir", default="")
    ap.add_argument("--perf", default="", help="a directory: perf record -g of each epoch's processes there")
    ap.add_argument("--backed-mb", type=int, default=0,
                    help="before each epoch, touch and free this many MiB, so that the page cache the epoch "
                         "fills is memory the VM's host backs (see _back_free_memory); 0: off")
    ap.add_argument("--profile", action="store_true",
                    help="per epoch: CPU by process, the workers' time per frame, requests in flight")
    args = ap.parse_args()
    contenders = args.contenders.split(",")
    work = args.dir or tempfile.mkdtemp(prefix="hubfs-training-")
    root = os.path.join(work, "hub")
    repo_dir = os.path.join(root, peer_bench.REPO)
    os.makedirs(os.path.join(work, "logs"), exist_ok=True)
    for cache in ("rclone-cache", "mount-cache", "hf-cache"):  # cold: a kept --dir's too
        shutil.rmtree(os.path.join(work, cache), ignore_errors=True)
    names = write_files(repo_dir, args.files, args.frames, args.seed, os.path.join(work, "files-stamp.json"))
    local_paths = [os.path.join(repo_dir, n) for n in names]
    lengths = [args.frames] * args.files
    local = H5pyFrames(local_paths, lengths)
    truth = {i: _read_local(local, i) for i in range(len(local))}
    frame_bytes = int(np.prod(SHAPE)) * 2
    data_bytes = sum(os.path.getsize(p) for p in local_paths)
    indices = [int(i) for i in np.random.default_rng(args.seed).choice(len(local), args.reads, replace=False)]
    print(f"{args.files} files x {args.frames} frames {SHAPE} int16, {data_bytes / 1e6:.0f} MB stored; "
          f"{args.reads} random frames, {args.workers} workers; {args.latency_ms:g} ms/request, "
          f"{args.bandwidth_mbps:g} Mbit/s/connection", flush=True)
    if args.profile:
        import hashlib
        for k, p in enumerate(local_paths):
            with open(p, "rb") as f:
                _BLOBS[k] = "/blobs/" + hashlib.file_digest(f, "sha256").hexdigest()
    hub = peer_bench.Hub(root, args.latency_ms, args.bandwidth_mbps, 0, os.path.join(work, "logs", "hub.log"))
    results, opens = [], {}
    try:
        if "local" in contenders:
            results.append(contender("local h5py", local, indices, args, truth, frame_bytes))
        if "rclone" in contenders and shutil.which("rclone"):
            mnt = os.path.join(work, "rclone-mnt")
            os.makedirs(mnt, exist_ok=True)
            try:
                m = peer_bench.RcloneMount(hub, mnt, os.path.join(work, "rclone-cache"),
                                           os.path.join(work, "logs", "rclone.log"))
            except Exception as e:  # noqa: BLE001 (a contender that cannot start is reported)
                print(f"rclone: skipped ({e})")
            else:
                try:
                    paths = [os.path.join(mnt, n) for n in names]
                    os.listdir(os.path.join(mnt, SUBDIR))
                    results.append(contender("rclone + h5py", H5pyFrames(paths, lengths), indices, args,
                                             truth, frame_bytes, hub=hub))
                    opens["rclone"] = open_time(paths, hub=hub)
                finally:
                    m.close()
        if "mount" in contenders:
            mnt = os.path.join(work, "hubfs-mnt")
            os.makedirs(mnt, exist_ok=True)
            try:
                m = peer_bench.HubfsMount(hub, mnt, os.path.join(work, "mount-cache"), 16,
                                          os.path.join(work, "logs", "mount.log"))
            except Exception as e:  # noqa: BLE001
                print(f"mount: skipped ({e})")
            else:
                try:
                    paths = [os.path.join(mnt, n) for n in names]
                    os.listdir(os.path.join(mnt, SUBDIR))
                    ds = h5chunk.FrameDataset(paths, DATASET)
                    results.append(contender("mount + FrameDataset", ds, indices, args, truth, frame_bytes,
                                             plan=True, hub=hub, daemon=m.pid))
                    ds.close()
                    opens["mount"] = open_time(paths, hub=hub)
                finally:
                    m.close()
        if "hf" in contenders:
            cache = os.path.join(work, "hf-cache")
            opts = {"endpoint": hub.url, "cache_dir": cache, "token": False}
            if args.cache_size:
                opts["cache_size"] = args.cache_size
            if args.max_requests:
                opts["max_requests"] = args.max_requests
            if args.block_size:
                opts["block_size"] = args.block_size
            urls = [f"hf://{peer_bench.REPO}/{n}" for n in names]
            hub.reset()
            ds = h5chunk.FrameDataset(urls, DATASET, **opts)
            results.append(contender("hf:// FrameDataset + plan", ds, indices if not args.cache_size
                                     else list(range(len(ds))), args, truth, frame_bytes, plan=True, hub=hub,
                                     cache_dir=cache))
            ds.close()
            opens["hf://"] = open_time(urls, {k: v for k, v in opts.items()}, hub=hub)
    finally:
        hub.stop()
    base = next((r for r in results if r["name"] == "local h5py"), None)
    print(f"\n{'contender':28} {'cold f/s':>9} {'warm f/s':>9} {'vs local':>9} {'wrong':>6} "
          f"{'PSS MiB':>12} {'CPU-s/GB':>9} {'start s':>8}")
    for r in results:
        cold, warm = r["epochs"][0], r["epochs"][-1]
        ratio = f"{warm['fps'] / base['epochs'][-1]['fps']:.2f}" if base else "-"
        print(f"{r['name']:28} {cold['fps']:9.1f} {warm['fps']:9.1f} {ratio:>9} "
              f"{sum(e['wrong'] for e in r['epochs']):6d} {max(r['pss_mib']):12.1f} {cold['cpu_s_per_gb']:9.2f} {r['start_s']:8.3f}")
        for n, e in enumerate(r["epochs"]):
            if "fetched" in e:
                extra = f", cache {e['cache_bytes'] / 2**20:.0f} MiB" if "cache_bytes" in e else ""
                print(f"    epoch {n + 1}: fetched {e['fetched'] / 1e6:.1f} MB "
                      f"({e['fetched'] / data_bytes:.2f} x the dataset){extra}")
    for k, v in opens.items():
        print(f"opening {args.files} files ({k}): {v['s']:.3f} s (median of {OPEN_REPEATS}), "
              f"{v['requests']:g} requests, the opener's CPU {v['cpu_s']:.3f} s"
              + (f"; {v['s'] / opens['rclone']['s']:.2f} x rclone" if "rclone" in opens and k != "rclone" else ""))
    if not args.dir:
        shutil.rmtree(work, ignore_errors=True)


def _read_local(ds, i):
    return zlib.crc32(memoryview(np.ascontiguousarray(ds[i])).cast("B"))


if __name__ == "__main__":
    main()
