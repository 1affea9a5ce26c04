"""fsspec's "hubfs" protocol without `import hubfs` importing fsspec: fsspec finds the class
through the "fsspec.specs" entry point of hubfs's metadata (build/python/hubfs-*.dist-info, as
pip and the Debian package install it). Each case runs in a fresh interpreter, since what is
already imported is the point."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("fsspec", reason="python3-fsspec is not installed")


def _run(code):
    env = dict(os.environ)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_importing_hubfs_does_not_import_fsspec():
    # fsspec's own import was ~60 ms of every `import hubfs` (and of every spawned worker's).
    assert _run("import sys, hubfs; print('fsspec' in sys.modules)") == "False"


def test_fsspec_imported_after_hubfs_finds_the_protocol():
    out = _run("import hubfs, fsspec; c = fsspec.get_filesystem_class('hubfs'); print(c.__module__, c.__name__)")
    assert out == "hubfs._fsspec HubfsFileSystem"


def test_fsspec_alone_finds_the_protocol_and_imports_hubfs_only_then():
    out = _run("import sys, fsspec; print('hubfs' in sys.modules); c = fsspec.get_filesystem_class('hubfs'); "
               "print(c.__module__)")
    assert out.split() == ["False", "hubfs._fsspec"]


def test_fsspec_imported_before_hubfs_has_the_class_registered_at_once():
    # A package copied without its metadata still works in a process that imported fsspec
    # first: hubfs registers the class itself then.
    out = _run("import sys, fsspec; r = sys.modules['fsspec.registry']; r.known_implementations.pop('hubfs'); "
               "import hubfs; print('hubfs' in r.registry)")
    assert out == "True"
