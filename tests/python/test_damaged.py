"""Damaged object headers from Python: a clear OSError naming the damage, never a segfault, a hang
or numpy's TypeError. Each file is written by h5py here and patched byte by byte; reads that
could crash run in a child interpreter so that a crash is a test failure, not a lost run."""

import os
import subprocess
import sys
import textwrap

import h5py
import numpy as np
import pytest

import h5chunk
from conftest import PYTHON_DIR


def _patch_once(path, old: bytes, new: bytes):
    data = bytearray(open(path, "rb").read())
    assert data.count(old) == 1, f"{old!r} occurs {data.count(old)} times"
    at = data.index(old)
    data[at:at + len(new)] = new
    open(path, "wb").write(bytes(data))


def _run_child(code: str):
    """(returncode, output) of `code` in a fresh interpreter with h5chunk importable; -9 on a hang."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR + os.pathsep + os.environ.get("PYTHONPATH", ""))
    try:
        p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True,
                           text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return -9, "hung"
    return p.returncode, p.stdout + p.stderr


def test_layout_rank_patched_to_zero_is_a_refusal_on_every_route(tmp_path):
    # The case: a 32-d chunked layout with its dimensionality byte patched to 0 made
    # route="fast" segfault and H5Dread hang at 3.8 GB.
    path = str(tmp_path / "rank0.h5")
    shape = (1,) * 31 + (4,)
    with h5py.File(path, "w") as f:  # the default (earliest) format: a version 3 layout message
        f.create_dataset("data", data=np.arange(4, dtype="u1").reshape(shape), chunks=shape)
    _patch_once(path, bytes([3, 2, 33]), bytes([3, 2, 0]))
    code, out = _run_child(f"""
        import h5chunk
        for route in ("auto", "fast"):
            try:
                with h5chunk.File({path!r}) as f:
                    f["data"].read(route=route)
            except OSError as e:
                assert "is corrupt" in str(e), str(e)
                print("refused", route)
            else:
                raise SystemExit("read succeeded on " + route)
        """)
    assert code == 0, out
    assert "refused auto" in out and "refused fast" in out
    # h5chunk loaded libhdf5 first here: no exit-time teardown noise from libhdf5's leak.
    assert "infinite loop closing library" not in out


def test_compound_naming_a_member_twice_is_corrupt_not_a_numpy_error(tmp_path):
    # A damaged datatype message can describe what numpy cannot represent (a field name twice):
    # h5chunk calls the dataset corrupt, naming the member, instead of numpy raising from np.dtype.
    path = str(tmp_path / "twice.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("data", data=np.zeros(3, dtype=[("qx", "<i4"), ("qy", "<i4")]))
    _patch_once(path, b"qy\0", b"qx\0")
    with h5chunk.File(path) as f:
        ds = f["data"]
        assert ds.dtype is None
        with pytest.raises(OSError, match="member 'qx' twice"):
            ds[()]


def test_a_descriptor_numpy_refuses_is_an_oserror_naming_it():
    with pytest.raises(OSError, match=r"dataset '/x'.*not one numpy can represent.*ValueError"):
        h5chunk._numpy_dtype("{'names': ['a', 'a'], 'formats': ['<i4', '<i4'], 'offsets': [0, 4], "
                             "'itemsize': 8}", "file 'f.h5', dataset '/x'")
