"""hubfs as admins' scripts use it (issue 43): an unprivileged user mounts, reads and unmounts
through fusermount3; `hubfs unmount` returns once the daemon has exited; `hubfs cp` clears stale
temp files, writes through a symlink, refuses a read-only DEST and exits 143 on SIGTERM. Against
the bundled local Hub server (127.0.0.1, started here)."""

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading

import numpy as np
import pytest

from conftest import PYTHON_DIR
from local_hub import control, local_hub

HUBFS = os.path.join(os.path.dirname(PYTHON_DIR), "bin", "hubfs")
REPO = "datasets/lab/admin"
URL = f"hf://{REPO}"
ENV = {**os.environ, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}
# The unprivileged user the non-root test runs as (made by the test when it runs as root).
TEST_USER = "hubfs-test"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    repo = root / REPO
    (repo / "data").mkdir(parents=True)
    big = np.random.default_rng(43).integers(0, 256, 2_500_000, dtype=np.uint8).tobytes()  # LFS, 3 blocks
    (repo / "data" / "big.bin").write_bytes(big)
    (repo / "note.txt").write_text("a small file\n")
    # stdin stays a pipe we hold: the server exits when this process does, even on a crash.
    with local_hub(str(root)) as endpoint:
        yield {"endpoint": endpoint, "big": big}


def _mounted(path):
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            if fields[4] == str(path):
                sep = fields.index("-")
                return {"fstype": fields[sep + 1], "super_options": fields[sep + 3]}
    return None


def _process_gone(pid):
    """True once `pid` has exited: no /proc entry, or a zombie (its memory and files released)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")


def _cp(hub, dest, cache, *extra, **kw):
    return subprocess.run([HUBFS, "cp", f"{URL}/data/big.bin", str(dest), "--endpoint", hub["endpoint"],
                           "--cache-dir", str(cache), *extra], capture_output=True, text=True, env=ENV, **kw)


# --- hubfs unmount --------------------------------------------------------------------------------

@pytest.fixture
def silent_memcached():
    """A shared-tier node that accepts connections and never answers: the daemon's teardown then
    spends its drain time (up to 2 s) on the stores queued for it, after the unmount itself."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held = []

    def accept():
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:
                return
    threading.Thread(target=accept, daemon=True).start()
    yield f"127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    for c in held:
        c.close()


def test_unmount_returns_once_the_daemon_has_exited(hub, tmp_path, silent_memcached):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    key = tmp_path / "tier.key"
    key.write_bytes(os.urandom(32))
    key.chmod(0o600)
    r = subprocess.run([HUBFS, "mount", "--endpoint", hub["endpoint"], "--cache-dir", str(tmp_path / "cache"),
                        "--shared-cache", silent_memcached, "--shared-cache-key-file", str(key), REPO, str(mnt)],
                       capture_output=True, text=True, env=ENV)
    assert r.returncode == 0, r.stderr
    try:
        assert (mnt / "data" / "big.bin").read_bytes() == hub["big"]
        status = subprocess.run([HUBFS, "status", "--json", str(mnt)], capture_output=True, text=True)
        assert status.returncode == 0, status.stderr
        pid = json.loads(status.stdout)[0]["pid"]
        assert not _process_gone(pid)
        r = subprocess.run([HUBFS, "unmount", str(mnt)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        # At once, no waiting: the command has already waited for the daemon (it used to return
        # 1.5-1.75 s before the daemon's exit, its cache writes still going on; here the stores
        # queued for the silent tier keep its teardown going).
        assert _process_gone(pid), f"the daemon (pid {pid}) still runs after `hubfs unmount` returned"
        assert _mounted(mnt) is None
        shutil.rmtree(tmp_path / "cache")  # nothing writes there any more
    finally:
        if _mounted(mnt):
            subprocess.run(["umount", "-l", str(mnt)])


# --- hubfs cp --------------------------------------------------------------------------------------

def test_cp_removes_stale_partials_of_dead_copies_only(hub, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: its PID names no process (a copy killed by SIGKILL)
    stale = out / f"big.bin.hubfs-partial-{dead.pid}"
    stale.write_bytes(b"half a file")
    live = out / f"big.bin.hubfs-partial-{os.getpid()}"  # a copy still running (this process)
    live.write_bytes(b"in progress")
    other = out / f"other.bin.hubfs-partial-{dead.pid}"  # another DEST's: not this copy's business
    other.write_bytes(b"x")
    r = _cp(hub, out / "big.bin", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert (out / "big.bin").read_bytes() == hub["big"]
    assert sorted(os.listdir(out)) == sorted(["big.bin", live.name, other.name])


def test_cp_onto_a_symlink_replaces_its_target_and_keeps_the_link(hub, tmp_path):
    store = tmp_path / "store"
    links = tmp_path / "links"
    store.mkdir()
    links.mkdir()
    (store / "weights.bin").write_bytes(b"old")
    os.symlink("../store/weights.bin", links / "current")
    r = _cp(hub, links / "current", tmp_path / "cache")
    assert r.returncode == 0, r.stderr
    assert os.path.islink(links / "current") and os.readlink(links / "current") == "../store/weights.bin"
    assert (store / "weights.bin").read_bytes() == hub["big"]
    assert os.listdir(links) == ["current"] and os.listdir(store) == ["weights.bin"]
    # A dangling link is refused, as cp(1) refuses to write through one, and left as it is.
    os.symlink("../store/missing.bin", links / "dangling")
    r = _cp(hub, links / "dangling", tmp_path / "cache")
    assert r.returncode == 1 and "dangling" in r.stderr
    assert os.path.islink(links / "dangling") and os.listdir(store) == ["weights.bin"]


def test_cp_refuses_a_read_only_dest_unless_forced(hub, tmp_path):
    dest = tmp_path / "frozen.bin"
    dest.write_bytes(b"keep me")
    dest.chmod(0o444)
    r = _cp(hub, dest, tmp_path / "cache")
    assert r.returncode == 1
    assert "Permission denied" in r.stderr and "--force" in r.stderr
    assert dest.read_bytes() == b"keep me" and sorted(os.listdir(tmp_path)) == ["cache", "frozen.bin"]
    r = _cp(hub, dest, tmp_path / "cache", "--force")
    assert r.returncode == 0, r.stderr
    assert dest.read_bytes() == hub["big"]


def test_cp_exits_143_on_sigterm_and_leaves_nothing(hub, tmp_path):
    endpoint = hub["endpoint"]
    out = tmp_path / "out"
    out.mkdir()
    control(endpoint, "POST", "/_hubfs/faults", {"mode": "stall", "path_contains": "/blobs/", "count": 1000})
    try:
        p = subprocess.Popen([HUBFS, "cp", f"{URL}/data/big.bin", str(out / "big.bin"), "--endpoint", endpoint,
                              "--cache-dir", str(tmp_path / "cache")], stderr=subprocess.PIPE, text=True, env=ENV)
        # Terminated once the copy has begun (its temp file exists), while its reads stall.
        while not os.listdir(out) and p.poll() is None:
            threading.Event().wait(0.05)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=120)
    finally:
        control(endpoint, "DELETE", "/_hubfs/faults")
    assert p.returncode == 143, err
    assert "interrupted" in err
    assert os.listdir(out) == []


# --- an unprivileged user ---------------------------------------------------------------------------

@contextlib.contextmanager
def _unprivileged_user(home):
    """(argv prefix running a command as an unprivileged user, uid): this process's own user when
    it is not root; else TEST_USER, made here if absent (and removed again)."""
    if os.geteuid() != 0:
        yield [], os.geteuid(), os.getegid()
        return
    created = False
    try:
        pw = pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", str(home), "--shell",
                        "/usr/sbin/nologin", TEST_USER], check=True)
        created = True
        pw = pwd.getpwnam(TEST_USER)
    try:
        yield ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "--"], pw.pw_uid, pw.pw_gid
    finally:
        if created:
            subprocess.run(["userdel", TEST_USER])


@contextlib.contextmanager
def _dev_fuse_usable_by_users():
    """/dev/fuse as Debian ships it (mode 0666, its udev rule): a container's --device /dev/fuse is
    0600, which leaves users no FUSE at all. Put back as it was afterwards."""
    mode = stat.S_IMODE(os.stat("/dev/fuse").st_mode)
    if os.geteuid() == 0 and mode & 0o006 != 0o006:
        os.chmod("/dev/fuse", 0o666)
        try:
            yield
        finally:
            os.chmod("/dev/fuse", mode)
    else:
        yield


def test_an_unprivileged_user_mounts_reads_and_unmounts_through_fusermount3(hub):
    home = tempfile.mkdtemp(prefix="hubfs-user-home-", dir="/tmp")
    mnt = os.path.join(home, "mnt")
    other = os.path.join(home, "other")
    try:
        with _unprivileged_user(home) as (as_user, uid, gid), _dev_fuse_usable_by_users():
            os.mkdir(mnt)
            os.mkdir(other)
            for d in (home, mnt, other):
                os.chown(d, uid, gid)
            # The user's environment: no cache variables, so the cache goes to ~/.cache/hubfs.
            env = {k: v for k, v in ENV.items() if k not in ("HUBFS_CACHE_DIR", "XDG_CACHE_HOME")}
            env["HOME"] = home
            r = subprocess.run([*as_user, HUBFS, "mount", "--endpoint", hub["endpoint"], REPO, mnt],
                               capture_output=True, text=True, env=env)
            assert r.returncode == 0, r.stderr
            try:
                info = _mounted(mnt)
                assert info and info["fstype"] == "fuse.hubfs", info
                assert f"user_id={uid}" in info["super_options"], info  # mounted by fusermount3 for the user
                r = subprocess.run([*as_user, "cat", os.path.join(mnt, "data", "big.bin")], capture_output=True)
                assert r.returncode == 0, r.stderr
                assert r.stdout == hub["big"]
                cache = os.path.join(home, ".cache", "hubfs")
                assert os.path.isdir(cache) and os.stat(cache).st_uid == uid
                # allow_other needs user_allow_other in /etc/fuse.conf: refused naming the file.
                with open("/etc/fuse.conf") as f:
                    allowed = any(line.strip().startswith("user_allow_other") for line in f)
                r = subprocess.run([*as_user, HUBFS, "mount", "-o", "allow_other", "--endpoint", hub["endpoint"],
                                    REPO, other], capture_output=True, text=True, env=env)
                if allowed:
                    assert r.returncode == 0, r.stderr
                    assert subprocess.run([*as_user, HUBFS, "unmount", other]).returncode == 0
                else:
                    assert r.returncode == 1 and "/etc/fuse.conf" in r.stderr and "user_allow_other" in r.stderr
                    assert _mounted(other) is None
                r = subprocess.run([*as_user, HUBFS, "unmount", mnt], capture_output=True, text=True, env=env)
                assert r.returncode == 0, r.stderr
                assert _mounted(mnt) is None
            finally:
                for m in (mnt, other):
                    if _mounted(m):
                        subprocess.run(["fusermount3", "-uz", m] if os.geteuid() else ["umount", "-l", m])
    finally:
        shutil.rmtree(home, ignore_errors=True)
