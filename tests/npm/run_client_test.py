#!/usr/bin/python3
"""The official JavaScript Hub client judges the local Hub (issue 39): installs @huggingface/hub
at the version package-lock.json pins (npm ci, cached in BUILD/npm-client: a later run with the
same lockfile installs nothing), writes repos, starts tools/hub_server.py twice on loopback (with
Xet, strict about xorb ranges, and without Xet, for plain LFS), runs client_test.mjs against them,
then checks what the servers saw: no refused range, no Authorization sent to the CDN.

Run: /usr/bin/python3 tests/npm/run_client_test.py --build-dir build   (ctest: npm_client)
Exit 0 passed, 1 failed, 77 skipped: only when the npm registry cannot be reached and the client
is not installed yet (the reason is printed)."""

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
SERVER = os.path.join(REPO_ROOT, "tools", "hub_server.py")
SKIPPED = 77
TOKEN = "hf_npm_client_token"
TOKEN_NO_ACCESS = "hf_npm_no_access_token"
# Small pages, so every listing spans several.
PAGE_SIZE = 3
# Small xorbs, so a file of a few MB spans several and slices cross xorb boundaries.
MAX_XORB_BYTES = 1 << 20
# How long npm may take to answer a ping before the registry counts as unreachable.
NPM_PING_TIMEOUT_S = 30


def install_client(build_dir):
    """The pinned client in BUILD/npm-client; None when installed, else why it cannot be."""
    target = os.path.join(build_dir, "npm-client")
    lock = os.path.join(HERE, "package-lock.json")
    stamp = os.path.join(target, "installed-lock.json")
    with open(lock, "rb") as f:
        wanted = f.read()
    installed = os.path.join(target, "node_modules", "@huggingface", "hub", "package.json")
    if os.path.isfile(installed) and os.path.isfile(stamp) and open(stamp, "rb").read() == wanted:
        return None
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            raise SystemExit("%s is not installed: ./scripts/deps.sh installs nodejs and npm" % tool)
    try:
        ping = subprocess.run(["npm", "ping", "--fetch-retries=0", "--fetch-timeout=%d" % (NPM_PING_TIMEOUT_S * 500)],
                              capture_output=True, text=True, timeout=NPM_PING_TIMEOUT_S)
        said = [line for line in (ping.stderr + ping.stdout).splitlines() if line.strip()]
        reachable, why = ping.returncode == 0, " / ".join(said[:2])[:300]
    except subprocess.TimeoutExpired:
        reachable, why = False, "no answer in %d s" % NPM_PING_TIMEOUT_S
    if not reachable:
        return "the npm registry cannot be reached (npm ping: %s)" % why
    os.makedirs(target, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(os.path.join(HERE, name), os.path.join(target, name))
    started = time.monotonic()
    run = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--omit=optional",
                          "--cache", os.path.join(build_dir, "npm-cache")],
                         cwd=target, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit("npm ci failed in %s:\n%s%s" % (target, run.stdout, run.stderr))
    with open(stamp, "wb") as f:
        f.write(wanted)
    print("installed @huggingface/hub from package-lock.json in %.1f s" % (time.monotonic() - started))
    return None


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def xet_file_bytes():
    """About 2.5 MB: random stretches (stored as is) between compressible ones (LZ4 and byte
    grouping), so chunks of every scheme hubfs-xet-pack picks appear."""
    rng = random.Random(39)
    out = bytearray()
    while len(out) < 2_500_000:
        out += rng.randbytes(rng.randrange(50_000, 300_000))
        floats = bytes(b for i in range(rng.randrange(20_000, 80_000)) for b in (i % 256, 0, 128, 63))
        out += floats
    return bytes(out)


def build_root(root):
    """The repos; returns the fixture description client_test.mjs reads (without the URLs)."""
    repo = os.path.join(root, "models", "org", "client")
    c1, c2 = (os.path.join(repo, "snapshots", c) for c in ("c1", "c2"))
    write(os.path.join(repo, "hub.json"), json.dumps({
        "refs": {"main": "c1", "v1": "c1", "v2": "c2"},
        "commits": {"c1": {"date": "2025-01-01T00:00:00Z"}, "c2": {"date": "2025-02-01T00:00:00Z"}}}).encode())
    one = xet_file_bytes()
    two = bytearray(one)
    changed = []
    for at in (400_000, 1_300_000, 2_200_000):  # about 1% changed, in three places
        two[at:at + 8_000] = hashlib.sha256(b"%d" % at).digest() * 250
        changed.append([at - 10, at + 8_010])
    small = {"README.md": b"# client\n", "config.json": b'{"hidden_size": 64}\n'}
    small.update({"many/f%d.txt" % i: b"file %d\n" % i * (i + 1) for i in range(7)})
    lfs = {"model.safetensors": one, "weights.bin": bytes(range(256)) * 12}
    for snap in (c1, c2):
        for rel, data in small.items():
            write(os.path.join(snap, rel), data)
        write(os.path.join(snap, "weights.bin"), lfs["weights.bin"])
    write(os.path.join(c1, "model.safetensors"), one)
    write(os.path.join(c2, "model.safetensors"), bytes(two))
    files = {}
    for rel, data in list(small.items()) + list(lfs.items()):
        files[rel] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "lfs": rel in lfs,
                      "local": os.path.join(c1, rel)}
    for name in ("private", "gated"):
        d = os.path.join(root, "models", "org", name)
        cfg = {"private": True} if name == "private" else {"gated": "auto"}
        write(os.path.join(d, "hub.json"), json.dumps(dict(cfg, refs={"main": "c1"}, commits={"c1": {}})).encode())
        write(os.path.join(d, "snapshots", "c1", "secret.txt"), b"s3cret\n")
        write(os.path.join(d, "snapshots", "c1", "README.md"), b"# %s\n" % name.encode())
        write(os.path.join(d, "snapshots", "c1", ".gitattributes"), b"*.safetensors filter=lfs\n")
    listing = sorted(set(files) | {"many"})
    return {"repo": "org/client", "privateRepo": "org/private", "gatedRepo": "org/gated", "files": files,
            "listing": listing, "pageSize": PAGE_SIZE, "token": TOKEN, "tokenNoAccess": TOKEN_NO_ACCESS,
            "v2": {"sha256": hashlib.sha256(bytes(two)).hexdigest(), "local": os.path.join(c2, "model.safetensors"),
                   "changedSlices": changed}}


def boundaries(pack, store, path):
    """The file's Xet hash, chunk boundaries and xorb boundaries (file offsets), as hubfs-xet-pack
    cuts it (deterministic: the server's own packing of the file gives the same)."""
    run = subprocess.run([pack, "--store", store, "--max-xorb-bytes", str(MAX_XORB_BYTES), path],
                         capture_output=True, check=True)
    info = json.loads(run.stdout)
    chunks, xorbs, offset = [], [], 0
    for term in info["terms"]:
        ends = info["xorbs"][term["xorb"]]["unpacked_ends"]
        if offset:
            xorbs.append(offset)
        base = ends[term["start"] - 1] if term["start"] else 0
        for i in range(term["start"], term["end"]):
            chunks.append(offset + ends[i] - base)
        offset += ends[term["end"] - 1] - base
    assert offset == info["size"], (offset, info["size"])
    return info["xet_hash"], [c for c in chunks[:-1]], xorbs


class Server:
    def __init__(self, root, *args):
        self.proc = subprocess.Popen(["/usr/bin/python3", SERVER, "--root", root, "--exit-on-stdin-eof"] + list(args),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        words = self.proc.stdout.readline().split()
        if len(words) != 4 or words[0] != "listening":
            self.proc.kill()
            raise SystemExit("hub server did not start: %s %s" % (words, self.proc.stderr.read()))
        self.url, self.cdn = words[1], words[3]

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=10) as r:
            return json.load(r)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", default=os.path.join(REPO_ROOT, "build"))
    args = p.parse_args()
    build_dir = os.path.abspath(args.build_dir)
    started = time.monotonic()
    why_not = install_client(build_dir)
    if why_not is not None:
        print("SKIPPED: %s" % why_not)
        return SKIPPED
    pack = os.path.join(build_dir, "bin", "hubfs-xet-pack")
    if not os.access(pack, os.X_OK):
        raise SystemExit("%s is not built (cmake --build %s --target hubfs_xet_pack)" % (pack, build_dir))
    work = tempfile.mkdtemp(prefix="hubfs-npm-client-")
    servers = []
    try:
        root = os.path.join(work, "hub")
        fx = build_root(root)
        xet_path = "model.safetensors"
        xet_hash, chunks, xorbs = boundaries(pack, os.path.join(work, "pack"), fx["files"][xet_path]["local"])
        assert len(xorbs) >= 2 and len(chunks) >= 16, (len(xorbs), len(chunks))
        common = ["--page-size", str(PAGE_SIZE), "--token", TOKEN, "--token-no-access", TOKEN_NO_ACCESS,
                  "--resolve-cache"]
        xet = Server(root, "--xet", "--xet-pack", pack, "--xet-max-xorb-bytes", str(MAX_XORB_BYTES),
                     "--strict-xet-ranges", "on", *common)
        servers.append(xet)
        lfs = Server(root, *common)
        servers.append(lfs)
        step = max(1, len(chunks) // 8)
        fx.update({
            "clientDir": os.path.join(build_dir, "npm-client"), "hubUrl": xet.url, "lfsHubUrl": lfs.url,
            "xet": {"path": xet_path, "hash": xet_hash, "size": fx["files"][xet_path]["size"],
                    "refreshUrl": "%s/api/models/org/client/xet-read-token/main" % xet.url,
                    "chunkBoundaries": chunks[::step], "xorbBoundaries": xorbs},
        })
        fixture = os.path.join(work, "fixture.json")
        with open(fixture, "w") as f:
            json.dump(fx, f)
        run = subprocess.run(["node", os.path.join(HERE, "client_test.mjs")],
                             env=dict(os.environ, HUBFS_NPM_FIXTURE=fixture), timeout=300)
        ok = run.returncode == 0
        for server, name in ((xet, "Xet"), (lfs, "LFS")):
            refused = server.get("/_hubfs/refused-ranges")
            stats = server.get("/_hubfs/stats")
            print("%s Hub: %d requests, %d resolves, %d xorb requests, %d refused ranges" % (
                name, stats["requests"], stats["resolve_requests"], stats["xorb_requests"], refused["count"]))
            if refused["count"]:
                print("FAIL: the %s Hub refused ranges the client sent: %s" % (name, refused["samples"]))
                ok = False
            if stats["cdn_authorization_headers"]:
                print("FAIL: the client sent Authorization to the %s Hub's CDN" % name)
                ok = False
        stats = xet.get("/_hubfs/stats")
        if not any(p.startswith("/api/resolve-cache/") for p in stats["by_path"]):
            print("FAIL: no small file went through /api/resolve-cache/")
            ok = False
        if stats["xorb_requests"] == 0:
            print("FAIL: the Xet Hub served no xorb")
            ok = False
        print("npm client test %s in %.1f s" % ("passed" if ok else "FAILED", time.monotonic() - started))
        return 0 if ok else 1
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
