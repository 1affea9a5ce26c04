#!/usr/bin/python3
"""A local stand-in for the Hugging Face Hub, so hubfs tests, the demo and the benchmarks run
offline. It serves repos from a directory tree over two origins, as the real Hub does:

  * the Hub API origin: repo info, tree listing, paths-info, resolve (small files inline,
    LFS files as a 302 to a signed CDN URL), and test control under /_hubfs/;
  * a separate "CDN" origin on a second port (a different host:port, so a client that forwards
    Authorization across hosts is caught): signed, expiring /blobs/<sha256> URLs with ranges.

The contract is docs/hub-http-contract.md. Debian's /usr/bin/python3 standard library
only. Run with --help for options; on start it prints exactly one line to stdout:
  listening http://HOST:PORT cdn http://HOST:CDNPORT
(https:// for both with --tls-cert/--tls-key: both origins then speak TLS with that certificate,
HTTP/1.1 only, and /_hubfs/stats counts tls_handshakes and tls_handshake_failures).

Repo layout under --root: <root>/{models,datasets,spaces}/<org>/<name>/ holding either plain
files (one commit on branch "main"), or a hub.json plus snapshots/<commit>/ directories:
  {"refs": {"main": "c2", "v1": "c1", "refs/pr/1": "c1"},
   "commits": {"c1": {"date": "2024-01-01T00:00:00Z"}, "c2": {"date": "..."}},
   "private": false, "gated": false}
A repo that was renamed is a directory with just a hub.json {"moved_to": "org/new-name"}:
every request for it answers 307 with a relative Location naming the new id.
Revisions: refs names (one percent-encoded segment, e.g. refs%2Fpr%2F1) or a commit's sha,
sha1("<org>/<name>:<commit name>"). A plain repo's sha hashes its files' paths, sizes and
mtimes; it is recomputed on every repo-info request. A file is LFS when it is at least
--lfs-threshold bytes or named *.h5/.hdf5/.bin/.safetensors/.npy.

API origin:
  GET  /api/{models|datasets|spaces}/{org}/{name}[/revision/{rev}]      repo info
  GET  /api/{t}/{org}/{name}/tree/{rev}[/{path}]?recursive=&limit=&cursor=  one page, Link next
  POST /api/{t}/{org}/{name}/paths-info/{rev}   form paths=a&paths=b (or JSON {"paths": []})
  GET|HEAD /[datasets/|spaces/]{org}/{name}/resolve/{rev}/{path}   200/206/416, or 302 to CDN
  GET|HEAD /_plain/{models|datasets|spaces}/{org}/{name}/{rev}/[{path}]   the plain HTTP view:
       a directory (trailing slash) is an HTML index of links, a file is its bytes with Range
       (206/416), Last-Modified the commit date, no redirect. For peers that only speak plain
       HTTP (rclone's http backend); delayed and bandwidth-limited like every data request.
  GET  /_hubfs/stats   POST /_hubfs/reset   POST /_hubfs/expire   GET /_hubfs/health
  GET|POST|DELETE /_hubfs/faults   (POST a fault object or a list of them; see Fault)
CDN origin:
  GET|HEAD /blobs/{sha256}?expires=&sig=   200/206/416; 403 expired or bad signature
Control requests are neither counted nor delayed by --latency-ms.
"""

import argparse
import base64
import datetime
import email.utils
import hashlib
import hmac
import html
import http.server
import json
import os
import secrets
import signal
import socket
import ssl
import stat
import struct
import sys
import threading
import time
import urllib.parse

REPO_TYPES = ("models", "datasets", "spaces")
# The plain HTTP view's root on the API origin (see handle_plain).
PLAIN_PREFIX = "/_plain/"
HUB_CONFIG = "hub.json"
SNAPSHOTS = "snapshots"
# Extensions the Hub's default .gitattributes routes to LFS whatever their size.
LFS_SUFFIXES = (".h5", ".hdf5", ".bin", ".safetensors", ".npy")
LFS_POINTER_TEMPLATE = "version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n"
# A client POSTing more than this is broken; refusing bounds our memory.
MAX_REQUEST_BODY = 16 << 20
# Idle keep-alive connections each hold a thread; drop them after this long.
CONNECTION_IDLE_TIMEOUT_S = 300
# The listen backlog: benchmarks open many connections at once and a short queue would turn
# that burst into SYN retries (1 s each) that look like server latency.
LISTEN_BACKLOG = 1024
# by_path in /_hubfs/stats stops adding new paths past this, so a long benchmark cannot grow it
# without bound.
MAX_TRACKED_PATHS = 10000
# Paced (bandwidth-limited) bodies are written in slices of about this much wall time.
PACING_INTERVAL_S = 0.02
# Chunk size when copying a file body without sendfile.
COPY_SLICE = 1 << 20
# A body's last slice is written after the request leaves the in-flight count (see mark_done);
# small, so the time a request is uncounted is short.
LAST_SLICE = 64 << 10
# How long a "stall" fault holds a request by default (a cold CDN object stalls ~3 s in the
# wild; longer than that so a client's per-read timeout is what ends it), and at most.
DEFAULT_STALL_MS = 10000
MAX_STALL_MS = 120000
FAULT_MODES = ("ignore_range", "bad_content_range", "reset", "stall", "truncate", "flip_byte")
# max_consecutive remembers, per request key, how many requests in a row were faulted; past this
# many keys (a long stress run touching many distinct ranges) the memory is simply started over.
MAX_TRACKED_STREAKS = 100000
# The largest error body a status fault may ask for with "body_bytes".
MAX_FAULT_BODY = 64 << 20


def log(msg):
    sys.stderr.write("hub_server: %s\n" % msg)
    sys.stderr.flush()


def iso_time(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + ".%03dZ" % int(
        (seconds % 1) * 1000)


class HubError(Exception):
    """An error answer in the Hub's shape: status, X-Error-Code, message."""

    def __init__(self, status, code, message, headers=None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


# ---------------------------------------------------------------------------------------------
# Content identity


class DigestCache:
    """sha256 (LFS oid) and git blob sha1 of files, computed once per (path, size, mtime_ns):
    hashing a 120 MB file takes a noticeable fraction of a second, and every listing needs it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._digests = {}  # (path, size, mtime_ns, kind) -> hex
        self._computing = {}  # same key -> Event, so concurrent askers hash a file only once

    def get(self, path, st, kind):
        key = (path, st.st_size, st.st_mtime_ns, kind)
        while True:
            with self._lock:
                if key in self._digests:
                    return self._digests[key]
                pending = self._computing.get(key)
                if pending is None:
                    pending = self._computing[key] = threading.Event()
                    break
            pending.wait()
        try:
            digest = self._compute(path, st.st_size, kind)
            with self._lock:
                self._digests[key] = digest
            return digest
        finally:
            with self._lock:
                del self._computing[key]
            pending.set()

    @staticmethod
    def _compute(path, size, kind):
        if kind == "sha256":
            h = hashlib.sha256()
        else:  # git blob: sha1 over a "blob <size>\0" header and the content
            h = hashlib.sha1(b"blob %d\0" % size)
        with open(path, "rb") as f:
            while True:
                block = f.read(COPY_SLICE)
                if not block:
                    break
                h.update(block)
        return h.hexdigest()


# ---------------------------------------------------------------------------------------------
# Repos, commits and entries


class Commit:
    def __init__(self, name, sha, date, directory):
        self.name = name
        self.sha = sha
        self.date = date
        self.dir = directory


class PlainCommitCache:
    """The last computed commit of each plain repo. Fingerprinting a plain repo stats every file
    (0.2 s for 20k files), too slow to repeat on every resolve or listing page: it is recomputed
    on each repo-info request (which walks every file for `siblings` anyway) and reused by the
    other endpoints."""

    def __init__(self):
        self._lock = threading.Lock()
        self._commits = {}  # repo dir -> (Commit, siblings)

    def get(self, repo, refresh):
        with self._lock:
            cached = self._commits.get(repo.dir)
        if cached is None or refresh:
            cached = repo.fingerprint()
            with self._lock:
                self._commits[repo.dir] = cached
        return cached


class Repo:
    def __init__(self, rtype, org, name, directory, plain_commits):
        self.rtype = rtype
        self._plain_commits = plain_commits
        self.id = "%s/%s" % (org, name)
        self.dir = directory
        self.config = None
        config_path = os.path.join(directory, HUB_CONFIG)
        if os.path.isfile(config_path):
            try:
                with open(config_path) as f:
                    self.config = json.load(f)
            except (OSError, ValueError) as e:
                raise HubError(500, None, "bad %s in %s: %s" % (HUB_CONFIG, self.id, e))
        cfg = self.config or {}
        self.private = bool(cfg.get("private", False))
        self.gated = cfg.get("gated", False) or False
        # "moved_to": "org/new-name" makes every request for this repo a 307 to the new id.
        self.moved_to = cfg.get("moved_to")

    def commit_sha(self, commit_name):
        return hashlib.sha1(("%s:%s" % (self.id, commit_name)).encode()).hexdigest()

    def resolve_revision(self, rev, refresh=False):
        """The Commit a branch, tag, PR ref or 40-hex sha names, or None. refresh: recompute a
        plain repo's commit from its files now, instead of reusing the last one."""
        if self.config is None:
            commit = self._plain_commits.get(self, refresh)[0]
            if rev not in ("main", commit.sha) and len(rev) == 40 and not refresh:
                commit = self._plain_commits.get(self, refresh=True)[0]  # files may have changed
            return commit if rev in ("main", commit.sha) else None
        refs = self.config.get("refs", {})
        commits = self.config.get("commits", {})
        name = refs.get(rev)
        if name is None and len(rev) == 40:
            name = next((c for c in commits if self.commit_sha(c) == rev), None)
        if name is None or name not in commits:
            return None
        directory = os.path.join(self.dir, SNAPSHOTS, name)
        if not os.path.isdir(directory):
            raise HubError(500, None, "%s of %s names commit %s but %s is missing"
                           % (HUB_CONFIG, self.id, name, directory))
        return Commit(name, self.commit_sha(name), commits[name].get("date", "1970-01-01T00:00:00.000Z"),
                      directory)

    def siblings(self, commit):
        """Every file path of a commit, sorted."""
        if self.config is None and commit.dir == self.dir:
            return self._plain_commits.get(self, refresh=False)[1]
        return [rel for rel, _ in walk_files(commit.dir)]

    def fingerprint(self):
        """(Commit, siblings) of a plain repo. The sha covers every file's path, size and mtime,
        so editing a file makes a new commit (and the old sha stops resolving, as after a
        force-push), without reading any content."""
        fingerprint = hashlib.sha1()
        newest = 0
        files = []
        for rel, st in walk_files(self.dir):
            fingerprint.update(b"%s\0%d\0%d\n" % (rel.encode(), st.st_size, st.st_mtime_ns))
            newest = max(newest, st.st_mtime)
            files.append(rel)
        sha = hashlib.sha1(("%s:%s" % (self.id, fingerprint.hexdigest())).encode()).hexdigest()
        return Commit("main", sha, iso_time(newest), self.dir), files


def walk_files(top, prefix=""):
    """(repo-relative path, stat) of every regular file below top, following symlinks."""
    for rel, is_dir, st in walk_entries(top, prefix, recursive=True):
        if not is_dir:
            yield rel, st


def walk_entries(top, prefix, recursive):
    """(repo-relative path, is_dir, stat) below top, sorted by name, depth first."""
    try:
        with os.scandir(top) as it:
            items = sorted(it, key=lambda e: e.name)
    except FileNotFoundError:
        return
    for item in items:
        try:
            st = item.stat()  # one syscall; follows symlinks, a dangling one is skipped
        except OSError:
            continue
        rel = prefix + item.name
        if stat.S_ISDIR(st.st_mode):
            yield rel, True, st
            if recursive:
                yield from walk_entries(item.path, rel + "/", True)
        elif stat.S_ISREG(st.st_mode):
            yield rel, False, st


class RepoStore:
    def __init__(self, root, lfs_threshold, digests):
        self.root = root
        self.lfs_threshold = lfs_threshold
        self.digests = digests
        self.plain_commits = PlainCommitCache()

    def find(self, rtype, org, name):
        if rtype not in REPO_TYPES or not safe_segment(org) or not safe_segment(name):
            return None
        directory = os.path.join(self.root, rtype, org, name)
        return Repo(rtype, org, name, directory, self.plain_commits) if os.path.isdir(directory) else None

    def is_lfs(self, rel, size):
        return size >= self.lfs_threshold or rel.lower().endswith(LFS_SUFFIXES)

    def file_identity(self, path, rel, st):
        """(git oid, lfs dict or None) of one file."""
        if not self.is_lfs(rel, st.st_size):
            return self.digests.get(path, st, "blob"), None
        sha256 = self.digests.get(path, st, "sha256")
        pointer = LFS_POINTER_TEMPLATE.format(oid=sha256, size=st.st_size).encode()
        git_oid = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
        return git_oid, {"oid": sha256, "size": st.st_size, "pointerSize": len(pointer)}

    def entry(self, commit, rel, is_dir, st):
        if is_dir:
            # Any stable id that changes with the commit will do for a tree oid.
            oid = hashlib.sha1(("tree:%s:%s" % (commit.sha, rel)).encode()).hexdigest()
            return {"type": "directory", "oid": oid, "size": 0, "path": rel}
        oid, lfs = self.file_identity(os.path.join(commit.dir, rel), rel, st)
        entry = {"type": "file", "oid": oid, "size": st.st_size, "path": rel}
        if lfs:
            entry["lfs"] = lfs
        return entry

    def stat_path(self, commit, rel):
        """(absolute path, is_dir, stat) of a repo path in a commit, or None if absent."""
        if rel == "":
            return commit.dir, True, os.stat(commit.dir)
        parts = rel.split("/")
        if not all(safe_segment(p) for p in parts):
            return None
        path = os.path.join(commit.dir, *parts)
        try:
            st = os.stat(path)
        except OSError:
            return None
        if stat.S_ISDIR(st.st_mode):
            return path, True, st
        if stat.S_ISREG(st.st_mode):
            return path, False, st
        return None


def safe_segment(segment):
    return segment not in ("", ".", "..") and "/" not in segment and "\0" not in segment


# ---------------------------------------------------------------------------------------------
# Signed CDN URLs


class UrlSigner:
    """HMAC-signed, expiring blob URLs. expire_all() rotates the key: every URL handed out so far
    fails from then on, which is how tests make a client re-resolve."""

    def __init__(self, ttl):
        self.ttl = ttl
        self._key = secrets.token_bytes(32)
        self._lock = threading.Lock()

    def sign(self, sha256):
        # Rounded up, so a URL stays valid for at least ttl seconds (even ttl=1).
        expires = int(time.time()) + self.ttl + 1
        return expires, self._sig(sha256, expires)

    def check(self, sha256, expires, sig):
        """None when valid, else why not."""
        try:
            expires_at = int(expires)
        except (TypeError, ValueError):
            return "missing or malformed expires"
        if not sig or not hmac.compare_digest(self._sig(sha256, expires_at), sig):
            return "signature does not match"
        if expires_at <= time.time():
            return "Request has expired"
        return None

    def expire_all(self):
        with self._lock:
            self._key = secrets.token_bytes(32)

    def _sig(self, sha256, expires):
        with self._lock:
            key = self._key
        return hmac.new(key, ("%s:%d" % (sha256, expires)).encode(), hashlib.sha256).hexdigest()


# ---------------------------------------------------------------------------------------------
# Observability and fault injection


class Stats:
    FIELDS = ("requests", "api_requests", "resolve_requests", "cdn_requests", "plain_requests",
              "bytes_sent", "peak_concurrency", "cdn_authorization_headers", "range_requests",
              "head_requests", "faults_injected", "tls_handshakes", "tls_handshake_failures")

    def __init__(self):
        self._lock = threading.Lock()
        self._in_flight = 0
        self.reset()

    def _advance(self):
        """Adds the time since the last change, weighted by the requests in flight, to
        in_flight_seconds: its growth over a read divided by the read's wall time is the mean
        number of requests in flight, which the peak alone does not tell. Lock held."""
        now = time.monotonic()
        self._in_flight_seconds += self._in_flight * (now - self._changed)
        self._changed = now

    def reset(self):
        with self._lock:
            self._in_flight_seconds = 0.0
            self._changed = time.monotonic()
            self._counts = dict.fromkeys(self.FIELDS, 0)
            # Requests still running when the counters are zeroed keep counting toward the peak.
            self._counts["peak_concurrency"] = self._in_flight
            self._by_path = {}
            self._by_status = {}

    def begin(self, origin, kind, method, path, headers):
        with self._lock:
            c = self._counts
            c["requests"] += 1
            if origin == "cdn":
                c["cdn_requests"] += 1
                if headers.get("Authorization") is not None:
                    c["cdn_authorization_headers"] += 1
            elif kind == "api":
                c["api_requests"] += 1
            elif kind == "resolve":
                c["resolve_requests"] += 1
            elif kind == "plain":
                c["plain_requests"] += 1
            if headers.get("Range") is not None:
                c["range_requests"] += 1
            if method == "HEAD":
                c["head_requests"] += 1
            if path in self._by_path or len(self._by_path) < MAX_TRACKED_PATHS:
                self._by_path[path] = self._by_path.get(path, 0) + 1
            self._advance()
            self._in_flight += 1
            c["peak_concurrency"] = max(c["peak_concurrency"], self._in_flight)

    def end(self, status):
        with self._lock:
            self._advance()
            self._in_flight -= 1
            if status is not None:
                self._by_status[str(status)] = self._by_status.get(str(status), 0) + 1

    def add(self, field, n):
        with self._lock:
            self._counts[field] += n

    def snapshot(self):
        with self._lock:
            out = dict(self._counts)
            out["in_flight"] = self._in_flight
            self._advance()
            out["in_flight_seconds"] = self._in_flight_seconds
            out["by_path"] = dict(self._by_path)
            out["by_status"] = dict(self._by_status)
            return out


class Fault:
    """One queued misbehaviour, applied to the next `count` (default 1) matching requests of
    either origin. Exactly one of:
      "status": N       answer N with a Hub-style error body (+ "retry_after": s -> Retry-After,
                        "headers": {...} extra headers, "error_code": X-Error-Code)
      "mode": "reset"   close the connection with RST instead of answering; with
                        "after_bytes": n, send the headers and n body bytes first
      "mode": "stall"   hold the request "stall_ms" (default 10000) and then answer normally
      "mode": "ignore_range"       answer a ranged file request 200 with the whole file
      "mode": "bad_content_range"  answer 206 with the right bytes but Content-Range one off
      "mode": "truncate" send the headers (Content-Length: the full body) and "after_bytes"
                        body bytes (default: half of them), then close the connection cleanly
                        (FIN, not RST): a body cut short that only its length gives away
      "mode": "flip_byte"  send the whole body, right length and headers, with the byte at
                        "flip_offset" (default: the middle of the body) inverted: corruption in
                        transit that no header reveals
    With "status", "body_bytes": n pads the error body to n bytes (an error body longer than
    the range that was asked for).
    Filters: "path_contains" (substring of the decoded path), "origin" ("api"|"cdn"),
    "method". Body modes wait for a request that serves a (ranged) file body.
    "max_consecutive": k  the fault passes over a request when the last k requests with the same
    key (origin, method, path, Range) were all faulted (by any fault): a client that retries the
    same request can always get through after k failures in a row."""

    KEYS = {"status", "count", "path_contains", "retry_after", "mode", "origin", "method",
            "headers", "error_code", "stall_ms", "after_bytes", "body_bytes", "flip_offset",
            "max_consecutive"}

    def __init__(self, spec):
        if not isinstance(spec, dict):
            raise ValueError("a fault is a JSON object")
        unknown = set(spec) - self.KEYS
        if unknown:
            raise ValueError("unknown fault keys %s; known: %s" % (sorted(unknown), sorted(self.KEYS)))
        self.spec = spec
        self.status = spec.get("status")
        self.mode = spec.get("mode")
        if (self.status is None) == (self.mode is None):
            raise ValueError('a fault needs exactly one of "status" or "mode"')
        if self.status is not None and not (isinstance(self.status, int) and 100 <= self.status <= 599):
            raise ValueError("status must be an HTTP status code")
        if self.mode is not None and self.mode not in FAULT_MODES:
            raise ValueError("mode must be one of %s" % (FAULT_MODES,))
        self.remaining = spec.get("count", 1)
        if not isinstance(self.remaining, int) or self.remaining < 1:
            raise ValueError("count must be a positive integer")
        self.path_contains = spec.get("path_contains")
        self.origin = spec.get("origin")
        if self.origin not in (None, "api", "cdn"):
            raise ValueError('origin must be "api" or "cdn"')
        self.method = spec.get("method")
        if self.method is not None:
            self.method = str(self.method).upper()
        self.stall_ms = spec.get("stall_ms", DEFAULT_STALL_MS)
        if not isinstance(self.stall_ms, int) or not 0 <= self.stall_ms <= MAX_STALL_MS:
            raise ValueError("stall_ms must be an integer in [0, %d]" % MAX_STALL_MS)
        self.after_bytes = spec.get("after_bytes")
        if self.after_bytes is not None and (not isinstance(self.after_bytes, int) or self.after_bytes < 0):
            raise ValueError("after_bytes must be a non-negative integer")
        if self.after_bytes is not None and self.mode not in ("reset", "truncate"):
            raise ValueError('after_bytes goes with mode "reset" or "truncate"')
        self.flip_offset = spec.get("flip_offset")
        if self.flip_offset is not None and (not isinstance(self.flip_offset, int) or self.flip_offset < 0):
            raise ValueError("flip_offset must be a non-negative integer")
        if self.flip_offset is not None and self.mode != "flip_byte":
            raise ValueError('flip_offset goes with mode "flip_byte"')
        self.body_bytes = spec.get("body_bytes")
        if self.body_bytes is not None and (not isinstance(self.body_bytes, int)
                                            or not 0 <= self.body_bytes <= MAX_FAULT_BODY):
            raise ValueError("body_bytes must be an integer in [0, %d]" % MAX_FAULT_BODY)
        if self.body_bytes is not None and self.status is None:
            raise ValueError('body_bytes goes with "status"')
        self.max_consecutive = spec.get("max_consecutive")
        if self.max_consecutive is not None and (not isinstance(self.max_consecutive, int)
                                                 or self.max_consecutive < 1):
            raise ValueError("max_consecutive must be a positive integer")
        # Faults that shape a body (or cut one short) wait for a request that serves a body;
        # the others strike as soon as a matching request arrives.
        if self.mode in ("ignore_range", "bad_content_range"):
            self.phase = "range_body"
        elif (self.mode == "reset" and self.after_bytes is not None) or self.mode in ("truncate", "flip_byte"):
            self.phase = "body"
        else:
            self.phase = "request"

    def matches(self, origin, method, path, phase, streak):
        return (phase == self.phase
                and (self.origin is None or self.origin == origin)
                and (self.method is None or self.method == method)
                and (self.path_contains is None or self.path_contains in path)
                and (self.max_consecutive is None or streak < self.max_consecutive))


class FaultTable:
    def __init__(self):
        self._lock = threading.Lock()
        self._faults = []
        self._streaks = {}  # request key -> requests in a row with that key that were faulted

    def add(self, specs):
        faults = [Fault(s) for s in specs]  # validate all before adding any
        with self._lock:
            self._faults.extend(faults)

    def clear(self):
        # Streaks survive: a test that re-arms its faults in rounds must not let one request be
        # faulted max_consecutive times in each round, back to back.
        with self._lock:
            self._faults = []

    def pending(self):
        with self._lock:
            return [dict(f.spec, count=f.remaining) for f in self._faults]

    def settle(self, key, faulted):
        """Records how a request with this key ended, for max_consecutive."""
        with self._lock:
            if not faulted:
                self._streaks.pop(key, None)
                return
            if len(self._streaks) >= MAX_TRACKED_STREAKS and key not in self._streaks:
                self._streaks = {}
            self._streaks[key] = self._streaks.get(key, 0) + 1

    def take(self, origin, method, path, phase, key=None):
        """The first pending fault matching this request, with one use consumed, or None."""
        with self._lock:
            streak = self._streaks.get(key, 0)
            for i, f in enumerate(self._faults):
                if f.matches(origin, method, path, phase, streak):
                    f.remaining -= 1
                    if f.remaining == 0:
                        del self._faults[i]
                    return f
        return None


# ---------------------------------------------------------------------------------------------
# HTTP


def parse_range(header, size):
    """For a Range header: None to serve the whole body (absent, multi-range or malformed: all
    legal to ignore), "unsatisfiable", or (first, last) inclusive."""
    if header is None:
        return None
    unit, _, spec = header.strip().partition("=")
    if unit.strip().lower() != "bytes" or "," in spec:
        return None
    first, sep, last = spec.strip().partition("-")
    if not sep:
        return None
    try:
        if first == "":  # suffix: the last N bytes
            n = int(last)
            if n <= 0:
                return "unsatisfiable"
            return (max(0, size - n), size - 1) if size > 0 else "unsatisfiable"
        a = int(first)
        b = int(last) if last != "" else None
    except ValueError:
        return None
    if a < 0 or (b is not None and b < a):
        return None
    if a >= size:
        return "unsatisfiable"
    return a, size - 1 if b is None else min(b, size - 1)


class QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG
    allow_reuse_address = True

    tls_context = None  # an ssl.SSLContext with --tls-cert

    def get_request(self):
        sock, addr = super().get_request()
        if self.tls_context is not None:
            # The handshake happens in the handler's thread (Handler.setup), never in this accept
            # loop, where one silent client would hold up every other connection.
            sock = self.tls_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request, client_address):
        # Clients hanging up mid-body (a cancelled read, a timeout) are routine, not errors.
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, socket.timeout, TimeoutError)):
            return
        super().handle_error(request, client_address)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "hubfs-local-hub/1"
    timeout = CONNECTION_IDLE_TIMEOUT_S
    origin = None  # "api" or "cdn", set by the subclasses below

    # --- plumbing ---------------------------------------------------------------------------

    def setup(self):
        if self.server.tls_context is not None:
            self.request.settimeout(self.timeout)
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError) as e:
                # A client that does not trust the certificate hangs up here: counted, so a test
                # can tell how many attempts it made.
                self.server.state.stats.add("tls_handshake_failures", 1)
                raise ConnectionError("TLS handshake failed: %s" % e)
            self.server.state.stats.add("tls_handshakes", 1)
        super().setup()
        # Headers and body leave in separate writes (the body by sendfile); without NODELAY,
        # Nagle plus delayed ACK would add ~40 ms to small responses.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, fmt, *args):
        if self.server.state.verbose:
            log("%s %s" % (self.address_string(), fmt % args))

    def do_GET(self):
        self._dispatch("GET")

    def do_HEAD(self):
        self._dispatch("HEAD")

    def do_POST(self):
        self._dispatch("POST")

    def do_DELETE(self):
        self._dispatch("DELETE")

    def _dispatch(self, method):
        state = self.server.state
        self.method = method
        self.status_sent = None
        self.counted = False  # in the stats' in-flight count
        self.is_control = self.origin == "api" and self.path.startswith("/_hubfs/")
        split = urllib.parse.urlsplit(self.path)
        self.raw_path = split.path
        self.query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        self.body = self._read_body()
        if self.body is None:
            return
        if self.is_control:
            return self._guard(self.handle_control)  # control traffic: no counters, no latency
        path = urllib.parse.unquote(self.raw_path)
        kind = self._kind()
        state.stats.begin(self.origin, kind, method, path, self.headers)
        self.counted = True
        self.fault_path = path
        # A retry of the same request has the same key (a signed URL's query may change, its
        # path and range do not); see max_consecutive.
        self.fault_key = (self.origin, method, path, self.headers.get("Range"))
        self.faulted = False
        try:
            if state.latency_s:
                time.sleep(state.latency_s)
            fault = self.take_fault("request")
            if fault is not None and self._apply_request_fault(fault):
                return
            self._guard(self.handle_cdn if self.origin == "cdn" else self.handle_api)
        finally:
            state.faults.settle(self.fault_key, self.faulted)
            self.mark_done()

    def take_fault(self, phase):
        """The fault for this request at this phase, counted, or None."""
        state = self.server.state
        fault = state.faults.take(self.origin, self.method, self.fault_path, phase, self.fault_key)
        if fault is not None:
            state.stats.add("faults_injected", 1)
            self.faulted = True
        return fault

    def _kind(self):
        if self.origin == "cdn":
            return "cdn"
        if self.raw_path.startswith("/api/"):
            return "api"
        if self.raw_path.startswith(PLAIN_PREFIX):
            return "plain"
        return "resolve" if "/resolve/" in self.raw_path else "other"

    def _guard(self, fn):
        try:
            fn()
        except HubError as e:
            self.send_hub_error(e)
        except (ConnectionError, socket.timeout, TimeoutError):
            self.close_connection = True
        except Exception as e:  # a bug here must answer 500, not hang the client
            log("internal error on %s %s: %r" % (self.method, self.path, e))
            import traceback
            traceback.print_exc()
            if self.status_sent is None:
                self.send_hub_error(HubError(500, None, "internal server error: %r" % e))
            else:
                self.close_connection = True

    def _read_body(self):
        length = self.headers.get("Content-Length")
        if length is None:
            return b""
        try:
            n = int(length)
        except ValueError:
            n = -1
        if n < 0 or n > MAX_REQUEST_BODY:
            self.close_connection = True
            self.send_hub_error(HubError(413, None, "request body too large or bad Content-Length"))
            return None
        return self.rfile.read(n)

    def mark_done(self):
        """Leaves the in-flight count. Called just BEFORE the response's last write: once the
        client has the last byte it may send its next request on another connection, and that
        one must not see this one still in flight, or peak_concurrency would over-count."""
        if self.counted:
            self.counted = False
            self.server.state.stats.end(self.status_sent)

    def start_response(self, status, headers, last_write=False):
        self.status_sent = status
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, str(v))
        if last_write:
            self.mark_done()
        self.end_headers()

    def send_bytes(self, status, body, headers=None, content_type="application/json"):
        headers = dict(headers or {})
        headers.setdefault("Content-Type", content_type)
        headers["Content-Length"] = len(body)
        has_body = self.method != "HEAD" and len(body) > 0
        self.start_response(status, headers, last_write=not has_body)
        if has_body:
            if not self.is_control:
                self.server.state.stats.add("bytes_sent", len(body))
            self.mark_done()
            self.wfile.write(body)

    def send_json(self, status, obj, headers=None):
        self.send_bytes(status, json.dumps(obj).encode(), headers)

    def send_hub_error(self, e, body_bytes=None):
        headers = dict(e.headers)
        if e.code:
            headers["X-Error-Code"] = e.code
        # Header values must be one latin-1 line.
        headers["X-Error-Message"] = e.message.replace("\n", " ").encode("latin-1", "replace").decode("latin-1")
        body = json.dumps({"error": e.message}).encode()
        if body_bytes is not None and body_bytes > len(body):
            body += b" " * (body_bytes - len(body))  # trailing whitespace: still the same JSON
        self.send_bytes(e.status, body, headers)

    def _apply_request_fault(self, fault):
        """Returns True when the fault answered (or killed) the request."""
        if fault.status is not None:
            headers = dict(fault.spec.get("headers") or {})
            if fault.spec.get("retry_after") is not None:
                headers["Retry-After"] = fault.spec["retry_after"]
            self.send_hub_error(HubError(fault.status, fault.spec.get("error_code"),
                                         "injected fault: status %d" % fault.status, headers),
                                body_bytes=fault.body_bytes)
            return True
        if fault.mode == "reset":
            self.reset_connection()
            return True
        if fault.mode == "stall":
            time.sleep(fault.stall_ms / 1000.0)
        return False

    def reset_connection(self):
        # SO_LINGER 0 makes close() send RST: the client sees "connection reset by peer".
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    # --- file bodies ------------------------------------------------------------------------

    def send_file(self, f, size, headers):
        """Answers with the bytes of an open file, honouring Range (206/416) and the faults and
        bandwidth limit that apply to bodies."""
        state = self.server.state
        rng = parse_range(self.headers.get("Range"), size)
        headers = dict(headers)
        headers["Accept-Ranges"] = "bytes"
        headers.setdefault("Content-Type", "application/octet-stream")
        if rng == "unsatisfiable":
            headers["Content-Range"] = "bytes */%d" % size
            raise HubError(416, None, "range not satisfiable for a file of %d bytes" % size, headers)
        if rng is not None:
            fault = self.take_fault("range_body")
            if fault is not None:
                if fault.mode == "ignore_range":
                    rng = None
                else:  # bad_content_range: the right bytes, labelled one byte off
                    headers["Content-Range"] = "bytes %d-%d/%d" % (rng[0] + 1, rng[1] + 1, size)
        if rng is None:
            status, offset, count = 200, 0, size
        else:
            status, offset, count = 206, rng[0], rng[1] - rng[0] + 1
            headers.setdefault("Content-Range", "bytes %d-%d/%d" % (rng[0], rng[1], size))
        headers["Content-Length"] = count
        cut_after = None
        body_fault = None
        if self.method != "HEAD" and count > 0:
            body_fault = self.take_fault("body")
            if body_fault is not None and body_fault.mode in ("reset", "truncate"):
                asked = body_fault.after_bytes
                cut_after = min(asked if asked is not None else count // 2, count)
        self.start_response(status, headers, last_write=self.method == "HEAD" or count == 0)
        if self.method == "HEAD":
            return
        if body_fault is not None and body_fault.mode == "flip_byte":
            self._send_flipped(f, offset, count, body_fault.flip_offset)
            return
        to_send = count if cut_after is None else cut_after
        sent = self._copy_body(f, offset, to_send)
        if cut_after is not None and body_fault.mode == "reset":
            self.reset_connection()
        elif cut_after is not None:
            self.finish_connection()
        elif sent < count:
            self.close_connection = True

    def _send_flipped(self, f, offset, count, flip_offset):
        """The body with one byte inverted (not through sendfile: the bytes must be touched)."""
        flip = min(flip_offset if flip_offset is not None else count // 2, count - 1)
        sent = self._copy_body(f, offset, flip)
        if sent < flip:
            self.close_connection = True
            return
        byte = os.pread(f.fileno(), 1, offset + flip)
        if len(byte) != 1:
            self.close_connection = True
            return
        self.server.state.stats.add("bytes_sent", 1)
        if flip + 1 == count:
            self.mark_done()
        self.wfile.write(bytes([byte[0] ^ 0xFF]))
        if flip + 1 < count and self._copy_body(f, offset + flip + 1, count - flip - 1) < count - flip - 1:
            self.close_connection = True

    def finish_connection(self):
        """An orderly close (FIN) right now, whatever the headers promised."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def _copy_body(self, f, offset, count):
        """Writes count bytes of f from offset; returns how many went out. The last slice goes out
        after mark_done() (see there), and its bytes are counted before they are written, so
        stats read right after a response already include all of it."""
        state = self.server.state
        if not state.bytes_per_s:
            # sendfile: the kernel copies page cache to socket; Python never touches the bytes,
            # which is what lets this server outrun the client it is benchmarking.
            last = min(count, LAST_SLICE)
            sent = self._sendfile(f, offset, count - last)
            state.stats.add("bytes_sent", sent)
            if sent < count - last:
                return sent
            state.stats.add("bytes_sent", last)
            self.mark_done()
            tail = self._sendfile(f, offset + sent, last)
            state.stats.add("bytes_sent", tail - last)  # whatever did not make it
            return sent + tail
        slice_size = max(4096, min(COPY_SLICE, int(state.bytes_per_s * PACING_INTERVAL_S)))
        start = time.monotonic()
        sent = 0
        while sent < count:
            block = os.pread(f.fileno(), min(slice_size, count - sent), offset + sent)
            if not block:
                break
            state.stats.add("bytes_sent", len(block))
            if sent + len(block) == count:
                self.mark_done()
            self.wfile.write(block)
            sent += len(block)
            ahead = start + sent / state.bytes_per_s - time.monotonic()
            if ahead > 0 and sent < count:
                time.sleep(ahead)
        return sent

    def _sendfile(self, f, offset, count):
        sent = 0
        while sent < count:
            try:
                n = self.connection.sendfile(f, offset + sent, count - sent)
            except OSError:
                self.close_connection = True
                break
            if n == 0:
                break  # the file shrank under us
            sent += n
        return sent

    # --- control ----------------------------------------------------------------------------

    def handle_control(self):
        state = self.server.state
        route = (self.method, self.raw_path.rstrip("/"))
        if route == ("GET", "/_hubfs/stats"):
            return self.send_json(200, state.stats.snapshot())
        if route == ("GET", "/_hubfs/health"):
            return self.send_json(200, {"ok": True})
        if route == ("POST", "/_hubfs/reset"):
            state.stats.reset()
            return self.send_json(200, {"ok": True})
        if route == ("POST", "/_hubfs/expire"):
            state.signer.expire_all()
            return self.send_json(200, {"ok": True})
        if route == ("GET", "/_hubfs/faults"):
            return self.send_json(200, state.faults.pending())
        if route == ("DELETE", "/_hubfs/faults"):
            state.faults.clear()
            return self.send_json(200, {"ok": True})
        if route == ("POST", "/_hubfs/faults"):
            try:
                spec = json.loads(self.body or b"null")
                state.faults.add(spec if isinstance(spec, list) else [spec])
            except ValueError as e:
                raise HubError(400, None, "bad fault: %s" % e)
            return self.send_json(200, {"ok": True, "pending": state.faults.pending()})
        raise HubError(404, None, "no control endpoint %s %s" % route)

    # --- CDN origin -------------------------------------------------------------------------

    def handle_cdn(self):
        state = self.server.state
        parts = self.raw_path.split("/")
        if self.method not in ("GET", "HEAD") or len(parts) != 3 or parts[1] != "blobs":
            raise HubError(404, None, "the CDN serves only GET/HEAD /blobs/<sha256>")
        sha256 = parts[2]
        q = self.query
        why = state.signer.check(sha256, q.get("expires", [None])[0], q.get("sig", [None])[0])
        if why is not None:
            raise HubError(403, "AccessDenied", why)
        blob = state.blob_path(sha256)
        if blob is None:
            raise HubError(404, "NoSuchKey", "no blob %s" % sha256)
        path, size, mtime_ns = blob
        try:
            f = open(path, "rb")
        except OSError:
            raise HubError(404, "NoSuchKey", "blob %s is gone" % sha256)
        with f:
            st = os.fstat(f.fileno())
            if (st.st_size, st.st_mtime_ns) != (size, mtime_ns):
                # The file was rewritten since it was hashed: these are not that blob's bytes.
                raise HubError(404, "NoSuchKey", "blob %s was replaced" % sha256)
            self.send_file(f, size, {"ETag": '"%s"' % sha256})

    # --- API origin -------------------------------------------------------------------------

    def handle_api(self):
        segs = [urllib.parse.unquote(s) for s in self.raw_path.split("/")[1:]]
        if segs and segs[0] == PLAIN_PREFIX.strip("/"):
            return self.handle_plain(segs[1:])
        if segs and segs[-1] == "" and len(segs) > 1:
            segs = segs[:-1]  # tolerate one trailing slash
        if len(segs) >= 4 and segs[0] == "api" and segs[1] in REPO_TYPES:
            return self.handle_repo_api(segs[1], segs[2], segs[3], segs[4:])
        if len(segs) >= 5 and segs[0] in ("datasets", "spaces") and segs[3] == "resolve":
            return self.handle_resolve(segs[0], segs[1], segs[2], segs[4:])
        if len(segs) >= 4 and segs[2] == "resolve":
            return self.handle_resolve("models", segs[0], segs[1], segs[3:])
        raise HubError(404, None, "no such endpoint: %s %s" % (self.method, self.raw_path))

    def open_repo(self, rtype, org, name):
        """The repo, once the caller's token is good enough for it; else the Hub's error."""
        state = self.server.state
        repo = state.store.find(rtype, org, name)
        if repo is not None and repo.moved_to:
            raise HubError(307, None, "%s was renamed to %s" % (repo.id, repo.moved_to),
                           {"Location": self._moved_location(org, name, repo.moved_to)})
        token = None
        auth = self.headers.get("Authorization")
        if auth and auth.startswith("Bearer "):
            token = auth[len("Bearer "):].strip()
        allowed = token is not None and token in state.tokens
        if repo is None or (repo.private and not allowed):
            # A private repo the caller may not see looks missing, as on the Hub; only asking
            # without any token gets 401 (the hint to log in).
            status = 401 if repo is not None and token is None else 404
            raise HubError(status, "RepoNotFound", "Repository Not Found for url: %s" % self.path)
        if repo.gated and not allowed:
            status = 401 if token is None else 403
            raise HubError(status, "GatedRepo", "Access to %s %s is restricted: it is gated"
                           % (rtype[:-1], repo.id))
        return repo

    def _moved_location(self, org, name, new_id):
        """This request's path with the old repo id swapped for the new one: a relative
        Location, as the Hub sends for renamed repos."""
        segs = self.raw_path.split("/")
        old = [urllib.parse.quote(org), urllib.parse.quote(name)]
        i = next(i for i in range(len(segs) - 1) if segs[i:i + 2] == old)
        segs[i:i + 2] = [urllib.parse.quote(p) for p in new_id.split("/")]
        query = urllib.parse.urlsplit(self.path).query
        return "/".join(segs) + ("?" + query if query else "")

    def open_revision(self, repo, rev, refresh=False):
        commit = repo.resolve_revision(rev, refresh)
        if commit is None:
            raise HubError(404, "RevisionNotFound", "Invalid rev id: %s" % rev)
        return commit

    def handle_repo_api(self, rtype, org, name, rest):
        if not rest or (rest[0] == "revision" and len(rest) == 2):
            if self.method not in ("GET", "HEAD"):
                raise HubError(405, None, "repo info is GET only")
            repo = self.open_repo(rtype, org, name)
            commit = self.open_revision(repo, rest[1] if rest else "main", refresh=True)
            return self.send_json(200, self.repo_info(repo, commit))
        if rest[0] == "tree" and len(rest) >= 2:
            if self.method not in ("GET", "HEAD"):
                raise HubError(405, None, "tree listing is GET only")
            repo = self.open_repo(rtype, org, name)
            commit = self.open_revision(repo, rest[1])
            return self.list_tree(commit, "/".join(rest[2:]))
        if rest[0] == "paths-info" and len(rest) == 2:
            if self.method != "POST":
                raise HubError(405, None, "paths-info is POST only")
            repo = self.open_repo(rtype, org, name)
            commit = self.open_revision(repo, rest[1])
            return self.paths_info(commit)
        raise HubError(404, None, "no such endpoint: %s %s" % (self.method, self.raw_path))

    def repo_info(self, repo, commit):
        info = {
            "id": repo.id,
            "sha": commit.sha,
            "lastModified": commit.date,
            "private": repo.private,
            "gated": repo.gated,
            "disabled": False,
            "siblings": [{"rfilename": rel} for rel in repo.siblings(commit)],
        }
        if repo.rtype == "models":
            info["modelId"] = repo.id
        return info

    def list_tree(self, commit, rel):
        state = self.server.state
        found = state.store.stat_path(commit, rel)
        commit_header = {"X-Repo-Commit": commit.sha}
        if found is None or not found[1]:
            raise HubError(404, "EntryNotFound", "%s does not exist at revision %s" % (rel or "/", commit.sha),
                           commit_header)
        recursive = self.query.get("recursive", ["false"])[0].lower() in ("1", "true")
        try:
            limit = int(self.query.get("limit", [state.page_size])[0])
            offset = decode_cursor(self.query["cursor"][0]) if "cursor" in self.query else 0
        except ValueError as e:
            raise HubError(400, None, "bad limit or cursor: %s" % e)
        page_size = max(1, min(limit, state.page_size))
        prefix = rel + "/" if rel else ""
        # Listing names and stats is cheap; digests are computed only for the page we return.
        all_entries = list(walk_entries(found[0], prefix, recursive))
        page = all_entries[offset:offset + page_size]
        body = [state.store.entry(commit, r, d, st) for r, d, st in page]
        headers = dict(commit_header)
        if offset + page_size < len(all_entries):
            query = {k: v[0] for k, v in self.query.items() if k != "cursor"}
            query["cursor"] = encode_cursor(offset + page_size)
            headers["Link"] = '<%s%s?%s>; rel="next"' % (state.api_url, self.raw_path,
                                                          urllib.parse.urlencode(query))
        self.send_json(200, body, headers)

    def paths_info(self, commit):
        store = self.server.state.store
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        try:
            if ctype == "application/json":
                paths = json.loads(self.body or b"{}").get("paths", [])
            else:
                paths = urllib.parse.parse_qs(self.body.decode(), keep_blank_values=True).get("paths", [])
        except (ValueError, AttributeError, UnicodeDecodeError) as e:
            raise HubError(400, None, "bad paths-info body: %s" % e)
        out, seen = [], set()
        for p in paths:
            p = str(p).strip("/")
            if p in seen or p == "":
                continue
            seen.add(p)
            found = store.stat_path(commit, p)
            if found is not None:
                out.append(store.entry(commit, p, found[1], found[2]))
        self.send_json(200, out, {"X-Repo-Commit": commit.sha})

    def handle_resolve(self, rtype, org, name, rest):
        if self.method not in ("GET", "HEAD"):
            raise HubError(405, None, "resolve is GET/HEAD only")
        state = self.server.state
        repo = self.open_repo(rtype, org, name)
        if len(rest) < 2:
            raise HubError(404, "EntryNotFound", "resolve needs a revision and a path")
        commit = self.open_revision(repo, rest[0])
        rel = "/".join(rest[1:])
        found = state.store.stat_path(commit, rel)
        if found is None or found[1]:
            raise HubError(404, "EntryNotFound", "%s does not exist at revision %s" % (rel, commit.sha),
                           {"X-Repo-Commit": commit.sha})
        path, _, st = found
        oid, lfs = state.store.file_identity(path, rel, st)
        if lfs is None:
            with open(path, "rb") as f:
                self.send_file(f, os.fstat(f.fileno()).st_size,
                               {"ETag": '"%s"' % oid, "X-Repo-Commit": commit.sha})
            return
        sha256 = lfs["oid"]
        state.register_blob(sha256, path, st)
        expires, sig = state.signer.sign(sha256)
        location = "%s/blobs/%s?expires=%d&sig=%s" % (state.cdn_url, sha256, expires, sig)
        self.send_bytes(302, b"", {
            "Location": location,
            "X-Repo-Commit": commit.sha,
            "X-Linked-Size": st.st_size,
            "X-Linked-Etag": '"%s"' % sha256,
            "ETag": '"%s"' % sha256,
        })


    # --- plain HTTP view -----------------------------------------------------------------------

    def handle_plain(self, segs):
        """/_plain/{type}/{org}/{name}/{rev}/[path]: a repo at a revision as a static web
        server would show it, for clients that know nothing of the Hub API."""
        if self.method not in ("GET", "HEAD"):
            raise HubError(405, None, "the plain view is GET/HEAD only")
        if len(segs) < 4:
            raise HubError(404, None, "the plain view is %s{type}/{org}/{name}/{rev}/[path]" % PLAIN_PREFIX)
        state = self.server.state
        repo = self.open_repo(segs[0], segs[1], segs[2])
        commit = self.open_revision(repo, segs[3])
        rest = segs[4:]
        wants_dir = self.raw_path.endswith("/")
        rel = "/".join(s for s in rest if s != "")
        found = state.store.stat_path(commit, rel)
        if found is None:
            raise HubError(404, "EntryNotFound", "%s does not exist at revision %s" % (rel or "/", commit.sha))
        path, is_dir, st = found
        last_modified = email.utils.format_datetime(parse_iso_time(commit.date), usegmt=True)
        if is_dir and not wants_dir:
            # The index's links are relative, so a directory must be fetched with its slash.
            return self.send_bytes(301, b"", {"Location": self.raw_path + "/"}, "text/plain")
        if not is_dir:
            if wants_dir:
                raise HubError(404, "EntryNotFound", "%s is a file, not a directory" % rel)
            with open(path, "rb") as f:
                return self.send_file(f, os.fstat(f.fileno()).st_size,
                                      {"Last-Modified": last_modified, "X-Repo-Commit": commit.sha})
        title = html.escape("%s@%s/%s" % (repo.id, segs[3], rel))
        lines = ["<!DOCTYPE html>", "<html><head><title>%s</title></head><body>" % title,
                 "<h1>%s</h1>" % title, "<ul>"]
        for name, child_is_dir, child in walk_entries(path, "", recursive=False):
            href = urllib.parse.quote(name) + ("/" if child_is_dir else "")
            label = html.escape(name) + ("/" if child_is_dir else "")
            size = "" if child_is_dir else " %d" % child.st_size
            lines.append('<li><a href="%s">%s</a>%s</li>' % (html.escape(href, quote=True), label, size))
        lines += ["</ul>", "</body></html>", ""]
        self.send_bytes(200, "\n".join(lines).encode(), {"Last-Modified": last_modified,
                                                         "X-Repo-Commit": commit.sha},
                        "text/html; charset=utf-8")


def parse_iso_time(text):
    """A datetime (UTC) from the Hub's ISO dates ("2024-01-01T00:00:00Z", with or without
    milliseconds)."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(datetime.timezone.utc)


def encode_cursor(offset):
    return base64.urlsafe_b64encode(("o:%d" % offset).encode()).decode().rstrip("=")


def decode_cursor(cursor):
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (ValueError, UnicodeDecodeError):
        raise ValueError("cursor is not one of ours")
    if not raw.startswith("o:") or not raw[2:].isdigit():
        raise ValueError("cursor is not one of ours")
    return int(raw[2:])


class ApiHandler(Handler):
    origin = "api"


class CdnHandler(Handler):
    origin = "cdn"


class ServerState:
    """Everything the handlers of both origins share."""

    def __init__(self, args):
        self.store = RepoStore(os.path.abspath(args.root), args.lfs_threshold, DigestCache())
        self.signer = UrlSigner(args.url_ttl)
        self.stats = Stats()
        self.faults = FaultTable()
        self.latency_s = args.latency_ms / 1000.0
        # --bandwidth-mbps is megabits per second, as links are rated.
        self.bytes_per_s = args.bandwidth_mbps * 1000 * 1000 / 8
        self.page_size = args.page_size
        self.tokens = set(args.token or [])
        self.verbose = args.verbose
        self.api_url = None
        self.cdn_url = None
        self._blobs_lock = threading.Lock()
        self._blobs = {}  # sha256 -> (path, size, mtime_ns): what the CDN may serve

    def register_blob(self, sha256, path, st):
        with self._blobs_lock:
            self._blobs[sha256] = (path, st.st_size, st.st_mtime_ns)

    def blob_path(self, sha256):
        with self._blobs_lock:
            return self._blobs.get(sha256)


def parse_args(argv):
    p = argparse.ArgumentParser(description="Local Hugging Face Hub stand-in for hubfs tests and benchmarks.")
    p.add_argument("--root", required=True, help="directory holding {models,datasets,spaces}/<org>/<name>/")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="Hub API port (0: pick a free one)")
    p.add_argument("--cdn-port", type=int, default=0, help="CDN port (0: pick a free one)")
    p.add_argument("--latency-ms", type=float, default=0, help="delay before answering every request")
    p.add_argument("--bandwidth-mbps", type=float, default=0,
                   help="per-connection body rate in megabits/s (0: unlimited, uses sendfile)")
    p.add_argument("--url-ttl", type=int, default=3600, help="seconds a signed CDN URL stays valid")
    p.add_argument("--page-size", type=int, default=1000, help="most tree entries per page")
    p.add_argument("--token", action="extend", nargs="+",
                   help="tokens accepted for private/gated repos (--token A B or --token A --token B)")
    p.add_argument("--lfs-threshold", type=int, default=10240, help="files this big or bigger are LFS")
    p.add_argument("--exit-on-stdin-eof", action="store_true",
                   help="exit when stdin closes (the launcher holds the other end, so the server "
                        "dies with the test process even if it crashes)")
    p.add_argument("--verbose", action="store_true", help="log every request to stderr")
    p.add_argument("--tls-cert", help="PEM certificate (chain) to serve both origins over https")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    args = p.parse_args(argv)
    if args.page_size < 1:
        p.error("--page-size must be >= 1")
    if bool(args.tls_cert) != bool(args.tls_key):
        p.error("--tls-cert and --tls-key go together")
    if not os.path.isdir(args.root):
        p.error("--root %s is not a directory" % args.root)
    return args


def main(argv):
    args = parse_args(argv)
    state = ServerState(args)
    servers = []
    tls_context = None
    if args.tls_cert:
        tls_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls_context.load_cert_chain(args.tls_cert, args.tls_key)
        tls_context.set_alpn_protocols(["http/1.1"])
    for port, handler in ((args.port, ApiHandler), (args.cdn_port, CdnHandler)):
        server = QuietServer((args.host, port), handler)
        server.state = state
        server.tls_context = tls_context
        servers.append(server)
    scheme = "https" if tls_context else "http"
    state.api_url = "%s://%s:%d" % (scheme, args.host, servers[0].server_address[1])
    state.cdn_url = "%s://%s:%d" % (scheme, args.host, servers[1].server_address[1])

    # SIGTERM/SIGINT are blocked in every thread and taken synchronously by the main thread,
    # so a stop is immediate instead of waiting for some thread to notice a flag.
    stop_signals = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    if args.exit_on_stdin_eof:
        def watch_stdin():
            while sys.stdin.buffer.read(4096):
                pass
            os.kill(os.getpid(), signal.SIGTERM)
        threading.Thread(target=watch_stdin, daemon=True).start()

    sys.stdout.write("listening %s cdn %s\n" % (state.api_url, state.cdn_url))
    sys.stdout.flush()
    signal.sigwait(stop_signals)
    for server in servers:
        server.server_close()
    sys.stderr.flush()
    # Handler threads may be mid-sendfile or asleep in a latency/stall; nothing they hold needs
    # cleaning up, so leave without waiting for them.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
