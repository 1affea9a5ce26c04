"""The hubfs module mounts a repo of the bundled local Hub server (127.0.0.1, started here)."""

import json
import os

import h5py
import numpy as np
import pytest

import h5chunk
import hubfs
from local_hub import local_hub  # tests/python/local_hub.py

REPO = "datasets/lab/scans"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    repo = root / "datasets" / "lab" / "scans"
    (repo / "recordings").mkdir(parents=True)
    (repo / "README.md").write_text("# scans\n")
    data = (np.random.default_rng(3).normal(size=(6, 8, 256, 64)) * 50).astype("float32")
    with h5py.File(repo / "recordings" / "scan.hdf5", "w") as f:
        f.create_dataset("data/raw_data", data=data, chunks=(1, 8, 256, 64), compression="gzip",
                         compression_opts=1)
    # stdin stays a pipe we hold: the server exits when this process does, even on a crash.
    with local_hub(str(root)) as endpoint:
        yield endpoint, data


def test_mount_reads_and_unmounts_on_exit(hub, tmp_path):
    endpoint, data = hub
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with hubfs.mount(REPO, mnt, endpoint=endpoint, cache_dir=str(tmp_path / "cache")) as m:
        assert os.path.ismount(mnt) and os.fspath(m) == str(mnt)
        assert sorted(os.listdir(mnt)) == ["README.md", "recordings"]
        with h5chunk.File(mnt / "recordings" / "scan.hdf5") as f:
            ds = f["data/raw_data"]
            got, stats = ds.read(np.s_[1:5], return_stats=True)
            assert stats.fast_path
            np.testing.assert_array_equal(got, data[1:5])
            np.testing.assert_array_equal(ds[[5, 0], 3], data[[5, 0], 3])
        with h5py.File(mnt / "recordings" / "scan.hdf5", "r") as hf:
            np.testing.assert_array_equal(h5chunk.read(hf["data/raw_data"], np.s_[2]), data[2])
    assert not os.path.ismount(mnt) and not m.mounted


def test_hints_on_a_mount_leave_out_what_the_page_cache_holds(hub, tmp_path):
    """A frame the kernel's page cache holds is read without the daemon: h5chunk does not hint it
    (a warm epoch's plan through a mount sends no hint; issue 40)."""
    if tuple(int(x) for x in os.uname().release.split(".")[:2] if x.isdigit()) < (6, 5):
        pytest.skip("cachestat(2) needs Linux 6.5: older kernels hint every range, as before")
    endpoint, data = hub
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with hubfs.mount(REPO, mnt, endpoint=endpoint, cache_dir=str(tmp_path / "cache")):
        def hints():
            return json.loads(os.getxattr(mnt, "user.hubfs.status"))["hints"]
        ds = h5chunk.FrameDataset([str(mnt / "recordings" / "scan.hdf5")], "data/raw_data")
        try:
            before = hints()
            assert ds.hint([2]) > 0
            assert hints() == before + 1  # not read yet: hinted
            np.testing.assert_array_equal(ds[2], data[2])  # now in the page cache
            ds.hint([2])
            assert hints() == before + 1
            ds.hint([2, 4])  # frame 4 never read: only it is hinted
            assert hints() == before + 2
            np.testing.assert_array_equal(ds[4], data[4])
        finally:
            ds.close()


def test_mount_failure_raises_with_the_programs_message(hub, tmp_path):
    endpoint, _ = hub
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with pytest.raises(hubfs.MountError, match="not found"):
        hubfs.mount("datasets/lab/missing", mnt, endpoint=endpoint, cache_dir=str(tmp_path / "cache"))
    assert not os.path.ismount(mnt)
    with pytest.raises(hubfs.MountError, match="revision 'v9' not found"):
        hubfs.mount(REPO, mnt, endpoint=endpoint, cache_dir=str(tmp_path / "cache"), revision="v9")
    with pytest.raises(hubfs.MountError, match="does not exist"):
        hubfs.mount(REPO, tmp_path / "nowhere", endpoint=endpoint, cache_dir=str(tmp_path / "cache"))


def test_unmount_of_a_plain_directory_raises(tmp_path):
    with pytest.raises(hubfs.MountError, match="not mounted"):
        hubfs.unmount(tmp_path)


def test_program_lookup(monkeypatch, tmp_path):
    assert os.access(hubfs.find_program(), os.X_OK)
    monkeypatch.setenv("HUBFS_BIN", str(tmp_path / "missing-hubfs"))
    with pytest.raises(FileNotFoundError, match="HUBFS_BIN"):
        hubfs.find_program()
    assert hubfs._mount_args({"cache_dir": "/c", "revision": "v1", "fuse_options": ["allow_other"],
                              "max_requests": 8, "log_file": None}) == [
        "--cache-dir", "/c", "--revision", "v1", "-o", "allow_other", "--max-requests", "8"]
