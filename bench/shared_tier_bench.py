#!/usr/bin/python3
"""The shared block tier (--shared-cache): mount B's cold read served by memcached after mount A
(another "machine": its own cache directory) read the file, against the same cold read from the
Hub, in one run over the bundled local Hub server; prints both, the ratio and the Hub requests
saved.

    ./scripts/build.sh && /usr/bin/python3 bench/shared_tier_bench.py    # root: mounts, drop_caches
        [--latency-ms 50] [--bandwidth-mbps 400] [--mb 200] [--nodes 3] [--repeat 3] [--dir DIR]

Per repetition: every memcached node is emptied (flush_all); mount A (empty cache, with
--shared-cache) reads the file front to back and is unmounted once its stores have landed; then,
interleaved, "hub" (empty cache, no shared tier) and "shared" (empty cache, --shared-cache)
each read the file cold (`drop_caches` first) in 1 MiB read()s, as cat does. Every read is
checked against the file's CRC-32. "data requests" are the Hub's resolve + CDN requests during
the read. Medians of --repeat.

memcached runs on 127.0.0.1 (one process per node, -m sized to hold the file twice over);
"then warm" is the same mount reading the file again from its own disk cache (page cache
dropped): the read path's ceiling on this machine. The Hub is paced at --latency-ms per request and --bandwidth-mbps per connection, as in
bench/peer_bench.py. Everything started is stopped on the way out, also on an error or Ctrl-C.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_bench import Hub, drop_caches  # noqa: E402  (one launcher for the bundled server)

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(HERE)
BIN = os.path.join(REPO_ROOT, "build", "bin")
REPO = "datasets/bench/shared"
FILE = "data.bin"
READ_SIZE = 1 << 20
MOUNT_TIMEOUT_S = 60
STORE_WAIT_S = 120


def log(msg):
    print(msg, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Memcached:
    def __init__(self, memory_mb):
        self.port = free_port()
        self.proc = subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p", str(self.port), "-U", "0",
                                      "-t", "2", "-m", str(memory_mb), "-u", "root"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.02)
        self.stop()
        raise RuntimeError("memcached did not start on port %d" % self.port)

    def address(self):
        return "127.0.0.1:%d" % self.port

    def flush(self):
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(b"flush_all\r\n")
            if not s.recv(64).startswith(b"OK"):
                raise RuntimeError("memcached flush_all failed")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)


def data_requests(hub):
    """Data requests (resolves and CDN GETs) and bytes the server sent since its last reset."""
    s = hub.stats()
    return s["resolve_requests"] + s["cdn_requests"], s["bytes_sent"]


class Mount:
    key_file = None  # the cluster's key (--shared-cache-key-file), made once per run

    def __init__(self, hub, mnt, cache, log_file, shared=None):
        self.mnt = mnt
        os.makedirs(mnt, exist_ok=True)
        args = [os.path.join(BIN, "hubfs"), "mount", REPO, mnt, "--endpoint", hub.url, "--cache-dir", cache,
                "--log-file", log_file]
        if shared:
            args += ["--shared-cache", shared, "--shared-cache-key-file", Mount.key_file]
        r = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S)
        if r.returncode != 0:
            raise RuntimeError("hubfs mount failed: %s" % (r.stderr or r.stdout).strip())

    def status(self):
        return json.loads(os.getxattr(self.mnt, "user.hubfs.status"))

    def wait_stored(self):
        """Until every block this mount missed in the tier was offered to it (the read can return
        just before its last blocks are offered) and stored (or given up on)."""
        deadline = time.monotonic() + STORE_WAIT_S
        while time.monotonic() < deadline:
            sc = self.status()["shared_cache"]
            if (sc["queued"] == 0 and sc["offered"] >= sc["misses"] and
                    sc["stored"] + sc["errors"] + sc["dropped"] + sc["skipped"] >= sc["offered"]):
                return sc
            time.sleep(0.05)
        raise RuntimeError("mount A's stores did not land within %d s" % STORE_WAIT_S)

    def close(self):
        for _ in range(50):
            if not os.path.ismount(self.mnt):
                return
            r = subprocess.run([os.path.join(BIN, "hubfs"), "unmount", self.mnt], capture_output=True, timeout=60)
            if r.returncode == 0:
                return
            time.sleep(0.1)
        subprocess.run(["fusermount3", "-u", "-z", self.mnt], capture_output=True, timeout=30)


def read_file(path):
    crc, n = 0, 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(READ_SIZE)
            if not b:
                return crc, n
            crc = zlib.crc32(b, crc)
            n += len(b)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--latency-ms", type=int, default=50)
    p.add_argument("--bandwidth-mbps", type=int, default=400)
    p.add_argument("--mb", type=int, default=200, help="file size in MiB")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", default="/tmp/hubfs_shared_bench")
    args = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root: FUSE mounts and /proc/sys/vm/drop_caches")
    if not shutil.which("memcached"):
        sys.exit("needs memcached (apt-get install memcached; scripts/deps.sh installs it)")

    data = os.path.join(args.dir, "data", REPO, FILE)
    os.makedirs(os.path.dirname(data), exist_ok=True)
    size = args.mb << 20
    if not os.path.exists(data) or os.path.getsize(data) != size:
        with open(data, "wb") as f:
            for _ in range(args.mb):
                f.write(os.urandom(1 << 20))
    expected = read_file(data)
    work = tempfile.mkdtemp(prefix="run.", dir=args.dir)
    # As an operator makes it: head -c 32 /dev/urandom > key; chmod 600 key.
    Mount.key_file = os.path.join(work, "tier.key")
    with open(os.open(Mount.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(os.urandom(32))
    started = []
    results = {"hub": [], "shared": []}
    try:
        # Each node holds about 1/nodes of the file; twice that plus memcached's slab overhead.
        per_node_mb = max(64, 2 * args.mb // args.nodes + 64)
        nodes = [Memcached(per_node_mb) for _ in range(args.nodes)]
        started += nodes
        hub = Hub(os.path.join(args.dir, "data"), args.latency_ms, args.bandwidth_mbps, os.path.join(work, "hub.log"))
        started.append(hub)
        servers = ",".join(n.address() for n in nodes)
        log("%d MiB file, Hub at %d ms / %d Mbit/s per connection, %d memcached nodes (-m %d)" %
            (args.mb, args.latency_ms, args.bandwidth_mbps, args.nodes, per_node_mb))
        for rep in range(args.repeat):
            for n in nodes:
                n.flush()
            run = os.path.join(work, "rep%d" % rep)
            a = Mount(hub, os.path.join(run, "mnt-a"), os.path.join(run, "cache-a"), os.path.join(run, "a.log"), servers)
            try:
                if read_file(os.path.join(a.mnt, FILE)) != expected:
                    raise RuntimeError("mount A read wrong bytes")
                sc = a.wait_stored()
            finally:
                a.close()
            log("rep %d: mount A stored %d blocks (%d MB) in the tier (dropped %d, errors %d, skipped %d)" %
                (rep, sc["stored"], sc["bytes_written"] // 10**6, sc["dropped"], sc["errors"], sc["skipped"]))
            for name in ("hub", "shared"):
                m = Mount(hub, os.path.join(run, "mnt-" + name), os.path.join(run, "cache-" + name),
                          os.path.join(run, name + ".log"), servers if name == "shared" else None)
                try:
                    os.stat(os.path.join(m.mnt, FILE))  # listing and metadata: not part of the read
                    drop_caches()
                    hub.reset()
                    t0 = time.monotonic()
                    got = read_file(os.path.join(m.mnt, FILE))
                    seconds = time.monotonic() - t0
                    if got != expected:
                        raise RuntimeError("%s read wrong bytes" % name)
                    requests, sent = data_requests(hub)
                    st = m.status()
                    sc = st.get("shared_cache") or {}
                    hits = sc.get("hits", 0)
                    if sc:
                        log("rep %d: mount B tier misses %d, errors %d, skipped %d" %
                            (rep, sc["misses"], sc["errors"], sc["skipped"]))
                    # The same read again from this mount's own disk cache: the path's ceiling.
                    drop_caches()
                    t0 = time.monotonic()
                    read_file(os.path.join(m.mnt, FILE))
                    warm = time.monotonic() - t0
                finally:
                    m.close()
                results[name].append({"s": seconds, "requests": requests, "bytes": sent, "tier_hits": hits,
                                      "warm": warm})
                log("rep %d: %-6s cold %.3f s (%.0f MB/s), %d Hub data requests, %d MB from the Hub, %d tier hits;"
                    " warm (local disk cache) %.3f s" %
                    (rep, name, seconds, size / seconds / 1e6, requests, sent // 10**6, hits, warm))
    finally:
        for s in reversed(started):
            s.stop()
        shutil.rmtree(work, ignore_errors=True)

    def med(name, field):
        return statistics.median(r[field] for r in results[name])

    hub_s, shared_s = med("hub", "s"), med("shared", "s")
    print()
    print("| cold read of %d MiB | median s | MB/s | Hub data requests | MB from the Hub | then warm s |" % args.mb)
    print("|---|---|---|---|---|---|")
    for name, label in (("hub", "from the Hub"), ("shared", "from the shared tier (mount B)")):
        print("| %s | %.3f | %.0f | %d | %d | %.3f |" % (label, med(name, "s"), size / med(name, "s") / 1e6,
                                                      med(name, "requests"), med(name, "bytes") // 10**6,
                                                      med(name, "warm")))
    print()
    print("ratio (Hub time / shared-tier time): %.2fx (target >= 3x); Hub requests saved per cold read: %d of %d" %
          (hub_s / shared_s, med("hub", "requests") - med("shared", "requests"), med("hub", "requests")))


if __name__ == "__main__":
    main()
