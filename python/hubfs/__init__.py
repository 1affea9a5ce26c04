"""hubfs: Hugging Face Hub repos as read-only files, from Python: mounted, or without a mount.

Without a mount (no FUSE needed; the mount's reader, cache and verification in-process)::

    import h5py, hubfs
    with hubfs.open("hf://datasets/ORG/NAME/recordings/scan.hdf5") as f, h5py.File(f) as h5:
        frames = h5["data/raw_data"][0:5]
    hubfs.ls("hf://datasets/ORG/NAME/recordings"); hubfs.glob("hf://datasets/ORG/NAME/**/*.hdf5")

(see hubfs._remote for the URL form and options; ``fsspec.open("hubfs://datasets/ORG/NAME/f")``
works too). Mounted, a thin driver of the ``hubfs`` program (it must be able to mount: root or FUSE access)::

    import hubfs, h5chunk
    with hubfs.mount("datasets/ORG/NAME", "/mnt/hub", revision="v1") as mnt:
        with h5chunk.File(f"{mnt}/recordings/scan.hdf5") as f:
            frames = f["data/raw_data"][0:5]
    # unmounted here

Keyword options map to ``hubfs mount`` flags: ``endpoint="http://..."`` -> ``--endpoint``,
``cache_dir=...`` -> ``--cache-dir``, ``revision=...``, ``repo_type=...``, ``cache_size="20G"``,
``max_requests=16``, ``read_timeout=120``, ``log_file=...``, ``fuse_options=["allow_other"]``
(-> ``-o``). A failure raises :class:`MountError` carrying the program's message.

The program is found as ``$HUBFS_BIN``, else next to this package (``hubfs/bin/hubfs``, where
the build and ``cmake --install`` put it), else ``hubfs`` on ``PATH``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import Any, Iterable, List, Optional, Union

from ._remote import HubFile, close_sessions, exists, glob, info, ls, open, walk  # noqa: A004 (hubfs.open is the API)

__all__ = ["mount", "unmount", "Mount", "MountError", "find_program",
           "open", "ls", "info", "glob", "walk", "exists", "close_sessions", "HubFile"]

# fsspec's "hubfs" protocol. fsspec finds it by itself, when it is imported, through the
# "fsspec.specs" entry point in this package's metadata (pyproject.toml for pip; the build tree's
# and the Debian package's hubfs-*.dist-info, python/CMakeLists.txt), without importing hubfs.
# So `import hubfs` does not import fsspec: that alone took ~60 ms, in every process and every
# spawned DataLoader worker. A process that had imported fsspec already gets the class now, in
# case fsspec found no metadata (a package copied without it).
if "fsspec" in sys.modules:
    try:
        from . import _fsspec
        _fsspec.register()
    except ImportError:
        pass

# How long unmount() keeps retrying a busy mount: a process that has just closed its last file
# on the mount may hold it for a moment more.
_UNMOUNT_RETRY_SECONDS = 5.0
_UNMOUNT_RETRY_INTERVAL = 0.1


class MountError(OSError):
    """``hubfs mount`` or ``hubfs unmount`` failed; the message is the program's own."""


def find_program() -> str:
    """The path of the hubfs program ($HUBFS_BIN, next to this package, or on PATH)."""
    env = os.environ.get("HUBFS_BIN")
    if env:
        if not os.access(env, os.X_OK):
            raise FileNotFoundError(f"$HUBFS_BIN is {env!r}, which is not an executable")
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "hubfs")
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("hubfs")
    if found:
        return found
    raise FileNotFoundError(
        "cannot find the hubfs program: set $HUBFS_BIN, or install hubfs (it is looked for in "
        f"{os.path.dirname(here)} and on PATH)")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _mount_args(options: dict) -> List[str]:
    args: List[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        if name == "fuse_options":
            values = [value] if isinstance(value, str) else list(value)
            for v in values:
                args += ["-o", str(v)]
        elif name in ("foreground", "f"):
            raise ValueError("foreground mounts are not supported from Python (they would block)")
        elif value is True:
            args.append(_flag(name))
        else:
            args += [_flag(name), str(value)]
    return args


def _run(args: List[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True)


class Mount:
    """A mounted repo: ``path`` is the mountpoint. A context manager that unmounts on exit;
    ``os.fspath(m)`` and ``str(m)`` give the mountpoint."""

    def __init__(self, repo: str, path: str) -> None:
        self.repo = repo
        self.path = path
        self.mounted = True

    def unmount(self) -> None:
        """Unmounts (idempotent)."""
        if self.mounted:
            unmount(self.path)
            self.mounted = False

    def __enter__(self) -> "Mount":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.unmount()

    def __fspath__(self) -> str:
        return self.path

    def __str__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        state = "mounted" if self.mounted else "unmounted"
        return f"<hubfs.Mount {self.repo!r} at {self.path!r} ({state})>"


def mount(repo: str, mountpoint: Union[str, os.PathLike], **options: Any) -> Mount:
    """Mounts ``repo`` (``[models/|datasets/|spaces/]ORG/NAME[@REVISION]``) at ``mountpoint``
    (an existing empty directory) and returns once the mount answers.

    Use the result as a context manager to unmount on exit. Options are ``hubfs mount`` flags
    with underscores (see the module docstring). Raises :class:`MountError` with the program's
    message (repo not found, endpoint unreachable, mountpoint busy, ...).
    """
    path = os.path.abspath(os.fspath(mountpoint))
    cmd = [find_program(), "mount", *_mount_args(options), repo, path]
    r = _run(cmd)
    if r.returncode != 0:
        message = (r.stderr or r.stdout).strip() or f"exit status {r.returncode}"
        raise MountError(f"hubfs mount {repo} {path} failed: {message}")
    return Mount(repo, path)


def unmount(mountpoint: Union[str, os.PathLike]) -> None:
    """Unmounts a hubfs mount, retrying for a few seconds while it is busy. Raises
    :class:`MountError` with the program's message if it cannot."""
    path = os.path.abspath(os.fspath(mountpoint))
    # Files h5chunk.read() keeps open for h5py Datasets would hold the mount busy.
    h5chunk = sys.modules.get("h5chunk")
    if h5chunk is not None and hasattr(h5chunk, "_close_cached_files"):
        h5chunk._close_cached_files(path)
    deadline = time.monotonic() + _UNMOUNT_RETRY_SECONDS
    while True:
        r = _run([find_program(), "unmount", path])
        if r.returncode == 0:
            return
        message = (r.stderr or r.stdout).strip() or f"exit status {r.returncode}"
        if "busy" not in message.lower() or time.monotonic() >= deadline:
            raise MountError(f"hubfs unmount {path} failed: {message}")
        time.sleep(_UNMOUNT_RETRY_INTERVAL)
