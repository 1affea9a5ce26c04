"""Repos on disk: finding a repo under --root, its hub.json, refs and commits (revisions), the
plain-repo fingerprint commit, file listing, git and LFS (sha256) identities of files with their
digest cache, and the entries tree listings and paths-info answer with."""

import hashlib
import json
import os
import stat
import threading

from .common import HubError, iso_time

REPO_TYPES = ("models", "datasets", "spaces")
HUB_CONFIG = "hub.json"
SNAPSHOTS = "snapshots"
# Extensions the Hub's default .gitattributes routes to LFS whatever their size.
LFS_SUFFIXES = (".h5", ".hdf5", ".bin", ".safetensors", ".npy")
LFS_POINTER_TEMPLATE = "version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n"
# Block size when hashing a file.
HASH_BLOCK = 1 << 20

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
                block = f.read(HASH_BLOCK)
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
        # Set by the API routes once they know the caller: whether its token opens this repo.
        self.caller_allowed = False

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
        self.xet = None  # the Xet model (xet.XetStore) with --xet: LFS files are Xet-stored

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
            if self.xet is not None:
                entry["xetHash"] = self.xet.info(os.path.join(commit.dir, rel), st)["xet_hash"]
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



class BlobRegistry:
    """The LFS blobs resolve has handed out signed URLs for: what the CDN origin may serve."""

    def __init__(self):
        self._lock = threading.Lock()
        self._blobs = {}  # sha256 -> (path, size, mtime_ns)

    def register(self, sha256, path, st):
        with self._lock:
            self._blobs[sha256] = (path, st.st_size, st.st_mtime_ns)

    def get(self, sha256):
        with self._lock:
            return self._blobs.get(sha256)
