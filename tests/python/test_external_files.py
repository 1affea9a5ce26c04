"""Files that name other files, read locally and over hf:// from the bundled local Hub server:
a virtual dataset (VDS) whose source is another file of the repo, an external link, external raw
storage (H5Pset_external). Each parent also holds an object at the path it names, and the
current directory holds decoy files of the external segments' names: hf:// reads equal the
local reads of the repo's files, or fail naming the cause; never fill values, the parent's own
object or a local decoy's bytes."""

import json
import os
import subprocess
import warnings

import h5py
import numpy as np
import pytest

import h5chunk
import hubfs
from conftest import PYTHON_DIR
from local_hub import local_hub

# Virtual datasets and external storage are read with H5Dread locally: not what is tested here.
pytestmark = pytest.mark.filterwarnings("ignore::h5chunk.FallbackWarning")

URL = "hf://datasets/lab/linked"
SRC = np.arange(200, dtype="int32")
DECOY = np.arange(5000, 5200, dtype="int32")
BIG = np.arange(512 * 1024, dtype="float32").reshape(512, 1024)


def _vds(f, name, src_file, src_dset, n=200):
    layout = h5py.VirtualLayout(shape=(n,), dtype="int32")
    layout[:] = h5py.VirtualSource(src_file, src_dset, shape=(n,))
    f.create_virtual_dataset(name, layout, fillvalue=-1)


def write_linked_files(folder):
    """The repo's files: {file: {dataset: expected values, or the error text expected over hf://}}."""
    sub = folder / "sub"
    sub.mkdir(parents=True, exist_ok=True)
    with h5py.File(sub / "vds_src.h5", "w") as f:
        f["src"] = SRC
        f.create_dataset("names", data=["a", "bc"], dtype=h5py.string_dtype())
    with h5py.File(sub / "vds.h5", "w") as f:  # the file: the source is a sibling
        _vds(f, "vds", "vds_src.h5", "/src")
    with h5py.File(sub / "vds_decoy.h5", "w") as f:  # ... and the parent holds /src too
        _vds(f, "vds", "vds_src.h5", "/src")
        _vds(f, "missing", "nope.h5", "/src")
        f["src"] = DECOY
        # A type only h5py reads, whose h5py over hubfs.open would read the parent's /names.
        layout = h5py.VirtualLayout(shape=(2,), dtype=h5py.string_dtype())
        layout[:] = h5py.VirtualSource("vds_src.h5", "/names", shape=(2,))
        f.create_virtual_dataset("names_vds", layout)
        f.create_dataset("names", data=["decoy", "decoy"], dtype=h5py.string_dtype())
    with h5py.File(folder / "target.h5", "w") as f:
        f["data"] = SRC
        f.create_dataset("big", data=BIG, chunks=(64, 1024), compression="gzip")
    with h5py.File(sub / "elink.h5", "w") as f:
        f["link"] = h5py.ExternalLink("../target.h5", "/data")
        f["big_link"] = h5py.ExternalLink("../target.h5", "/big")  # a read large enough for the fast path
        f["names_link"] = h5py.ExternalLink("vds_src.h5", "/names")  # a type only h5py reads
        f["dangling"] = h5py.ExternalLink("gone.h5", "/data")
        f["data"] = DECOY
    SRC.tofile(sub / "ext.bin")
    with h5py.File(sub / "ext.h5", "w") as f:
        f.create_dataset("ext", shape=(200,), dtype="int32", external=[("ext.bin", 0, 800)])
        f.create_dataset("abs", shape=(200,), dtype="int32", external=[("/etc/hostname", 0, 800)])
    return {
        "sub/vds.h5": {"/vds": SRC},
        "sub/vds_decoy.h5": {"/vds": SRC, "/src": DECOY, "/missing": "nope.h5",
                             "/names_vds": "h5py over hubfs.open would not read the other files"},
        "sub/elink.h5": {"/link": SRC, "/big_link": BIG, "/data": DECOY, "/dangling": "gone.h5",
                         "/names_link": "h5py over hubfs.open would not read the other files"},
        "sub/ext.h5": {"/ext": SRC, "/abs": "outside"},
    }


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    repo = root / "datasets" / "lab" / "linked"
    repo.mkdir(parents=True)
    (repo / "README.md").write_text("# linked\n")
    expected = write_linked_files(repo)
    with local_hub(str(root)) as endpoint:
        yield {"endpoint": endpoint, "repo": repo, "expected": expected}


@pytest.fixture
def opts(hub, tmp_path):
    return {"endpoint": hub["endpoint"], "cache_dir": str(tmp_path / "cache"), "token": False}


@pytest.fixture
def decoy_cwd(tmp_path, monkeypatch):
    """The current directory (and its parent) holds decoys of every name the files give: the
    files libhdf5 would open locally, with other values."""
    folder = tmp_path / "decoys"
    folder.mkdir()
    bad = np.full(200, 666, dtype="int32")
    bad.tofile(folder / "ext.bin")
    for where, dset in ((folder / "vds_src.h5", "src"), (folder / "nope.h5", "src"),
                        (tmp_path / "target.h5", "data"), (folder / "gone.h5", "data")):
        with h5py.File(where, "w") as f:
            f[dset] = bad
    monkeypatch.chdir(folder)
    return folder


def _cases(hub):
    for path, datasets in hub["expected"].items():
        for name, want in datasets.items():
            yield path, name, want


def test_hf_reads_equal_the_repos_files_or_name_the_cause(hub, opts, decoy_cwd):
    for path, name, want in _cases(hub):
        with h5chunk.File(f"{URL}/{path}", **opts) as f:
            for route in ("auto", "h5dread"):
                if isinstance(want, str):
                    with pytest.raises((OSError, KeyError), match=want):
                        f[name].read(route=route)
                else:
                    np.testing.assert_array_equal(f[name].read(route=route), want, err_msg=f"{path}:{name} {route}")


def test_a_hubfs_open_file_resolves_names_in_its_repo(hub, opts, decoy_cwd):
    with hubfs.open(f"{URL}/sub/vds_decoy.h5", **opts) as raw, h5chunk.File(raw) as f:
        np.testing.assert_array_equal(f["vds"][:], SRC)
    with hubfs.open(f"{URL}/sub/ext.h5", **opts) as raw, h5chunk.File(raw) as f:
        np.testing.assert_array_equal(f["ext"][10:20], SRC[10:20])


def test_local_reads_from_the_files_folder_equal_the_hf_ones(hub, monkeypatch):
    # libhdf5 resolves external storage against the current directory: run from the file's.
    monkeypatch.chdir(hub["repo"] / "sub")
    for path, name, want in _cases(hub):
        if isinstance(want, str):
            continue
        with h5chunk.File(str(hub["repo"] / path)) as f:
            np.testing.assert_array_equal(f[name][:], want, err_msg=f"{path}:{name}")
        with h5py.File(hub["repo"] / path, "r") as f:
            np.testing.assert_array_equal(f[name][:], want, err_msg=f"h5py {path}:{name}")


def test_local_external_storage_reads_the_current_directory_as_libhdf5_does(hub, decoy_cwd):
    with h5chunk.File(str(hub["repo"] / "sub" / "ext.h5")) as f:
        assert (f["ext"][:] == 666).all()


def test_a_local_missing_virtual_source_reads_fill_with_a_warning(hub, monkeypatch):
    monkeypatch.chdir(hub["repo"] / "sub")
    with h5chunk.File(str(hub["repo"] / "sub" / "vds_decoy.h5")) as f:
        ds = f["missing"]
        assert ds.missing_sources == ["nope.h5:/src (no such file)"]
        with pytest.warns(h5chunk.MissingSourceWarning, match="nope.h5"):
            assert (ds[:] == -1).all()
        with warnings.catch_warnings():
            warnings.simplefilter("error", h5chunk.MissingSourceWarning)
            np.testing.assert_array_equal(f["vds"][:], SRC)  # all its sources found: no warning


def _h5chunk_bin():
    return os.path.join(os.path.dirname(PYTHON_DIR), "bin", "h5chunk")


def test_cli_hf_reads_never_return_the_decoys(hub, opts, decoy_cwd, tmp_path):
    common = ["--endpoint", opts["endpoint"], "--cache-dir", opts["cache_dir"]]
    env = {**os.environ, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"}
    for path, name, want in _cases(hub):
        out = tmp_path / "out.bin"
        if out.exists():
            out.unlink()
        r = subprocess.run([_h5chunk_bin(), "read", f"{URL}/{path}", name, "-o", str(out), *common],
                           capture_output=True, text=True, env=env)
        if isinstance(want, str):
            assert r.returncode == 1 and want in r.stderr, (path, name, r.stderr)
            assert not out.exists() or out.stat().st_size == 0
        else:
            assert r.returncode == 0, (path, name, r.stderr)
            np.testing.assert_array_equal(np.fromfile(out, dtype=want.dtype).reshape(want.shape), want,
                                          err_msg=f"{path}:{name}")


def test_cli_info_over_hf_names_what_reads_would_refuse(hub, opts):
    r = subprocess.run([_h5chunk_bin(), "info", f"{URL}/sub/vds_decoy.h5", "--json", "--endpoint", opts["endpoint"],
                        "--cache-dir", opts["cache_dir"]], capture_output=True, text=True,
                       env={**os.environ, "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1"})
    assert r.returncode == 0, r.stderr
    infos = {i["path"]: i for i in map(json.loads, r.stdout.splitlines())}
    assert "nope.h5" in infos["/missing"]["refusal"]
    assert "refusal" not in infos["/vds"] and "missing_sources" not in infos["/missing"]


def test_cli_json_names_missing_local_sources(hub, tmp_path, monkeypatch):
    monkeypatch.chdir(hub["repo"] / "sub")
    r = subprocess.run([_h5chunk_bin(), "read", str(hub["repo"] / "sub" / "vds_decoy.h5"), "/missing",
                        "-o", str(tmp_path / "o.bin")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["missing_sources"] == ["nope.h5:/src (no such file)"]
    r = subprocess.run([_h5chunk_bin(), "info", str(hub["repo"] / "sub" / "vds_decoy.h5"), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    infos = {i["path"]: i for i in map(json.loads, r.stdout.splitlines())}
    assert infos["/missing"]["missing_sources"] == ["nope.h5:/src (no such file)"]
    assert "missing_sources" not in infos["/vds"]
