"""out=, errors, fallback warnings and progress."""

import os
import warnings

import h5py
import numpy as np
import pytest

import h5chunk

pytestmark = pytest.mark.filterwarnings("ignore::h5chunk.FallbackWarning")


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = str(tmp_path_factory.mktemp("api") / "api.h5")
    with h5py.File(p, "w") as f:
        f.create_dataset("frames", data=np.arange(6 * 40 * 30, dtype="float32").reshape(6, 40, 30),
                         chunks=(1, 40, 30), compression="gzip", shuffle=True)
        f.create_dataset("contig", data=np.arange(1000, dtype="int32"))
        # HDF5's scale-offset filter: one h5chunk does not decode (LZF it now does), so reads go
        # to H5Dread.
        f.create_dataset("scaled", data=np.arange(400, dtype="int16").reshape(20, 20), chunks=(5, 20),
                         scaleoffset=0)
        f.create_dataset("text", data=np.array([b"a", b"bc"]))
        f.create_dataset("vtext", data=["a", "bc"], dtype=h5py.string_dtype())
        f.create_group("grp")
    return p


# --- out= -------------------------------------------------------------------------------------

def test_out_receives_the_read_without_copy(path):
    with h5chunk.File(path) as f, h5py.File(path, "r") as hf:
        out = np.zeros((2, 40, 30), "float32")
        assert f["frames"].read(np.s_[1:3], out=out) is out
        np.testing.assert_array_equal(out, hf["frames"][1:3])
        # a composed selection (negative step) still fills out
        out2 = np.zeros((3, 30), "float32")
        assert f["frames"].read(np.s_[::-2, 5], out=out2) is out2
        np.testing.assert_array_equal(out2, hf["frames"][()][::-2, 5])
        # a scalar selection into a 0-d array
        out0 = np.zeros((), "float32")
        f["frames"].read((1, 2, 3), out=out0)
        assert out0[()] == hf["frames"][1, 2, 3]


@pytest.mark.parametrize("bad, message", [
    (np.zeros((2, 40, 31), "float32"), "shape"),
    (np.zeros((3, 40, 30), "float32"), "shape"),
    (np.zeros((2, 40, 30), "float64"), "dtype"),
    (np.zeros((2, 40, 30), ">f4"), "dtype"),
    (np.zeros((2, 30, 40), "float32").transpose(0, 2, 1), "C-contiguous"),
    (np.zeros((2, 40, 60), "float32")[:, :, ::2], "C-contiguous"),
    ([[0.0]], "numpy array"),
])
def test_out_validation(path, bad, message):
    with h5chunk.File(path) as f:
        with pytest.raises(ValueError, match=message):
            f["frames"].read(np.s_[1:3], out=bad)


def test_out_read_only_is_refused(path):
    out = np.zeros((2, 40, 30), "float32")
    out.flags.writeable = False
    with h5chunk.File(path) as f, pytest.raises(ValueError, match="writeable"):
        f["frames"].read(np.s_[1:3], out=out)


# --- errors -----------------------------------------------------------------------------------

def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.h5"):
        h5chunk.File(str(tmp_path / "nope.h5"))


def test_not_hdf5_is_os_error(tmp_path):
    p = tmp_path / "plain.txt"
    p.write_text("not hdf5\n" * 100)
    with pytest.raises(OSError, match="not an HDF5 file"):
        h5chunk.File(str(p))


def test_missing_dataset_is_key_error(path):
    with h5chunk.File(path) as f:
        with pytest.raises(KeyError, match="no dataset '/missing'"):
            f["missing"]
        with pytest.raises(KeyError, match="not a dataset"):
            f["grp"]
        assert f.get("missing") is None


def test_index_errors(path):
    with h5chunk.File(path) as f:
        ds = f["frames"]
        for key in [6, -7, np.s_[0, 40], np.s_[[0, 6]], np.s_[:, [-41]], np.s_[[True, False]]]:
            with pytest.raises(IndexError):
                ds[key]
        for key in [1.5, None, np.s_[0, None], np.s_[[[0, 1]]], np.s_[[0.5]]]:
            with pytest.raises(TypeError):
                ds[key]
        with pytest.raises(ValueError, match="compound"):  # as h5py
            ds["field"]
        with pytest.raises(ValueError):
            ds[0, 0, 0, 0]
        with pytest.raises(ValueError):
            ds[::0]
        with pytest.raises(IndexError):
            ds[..., ...]


def test_fixed_strings_read_and_variable_length_through_h5py(path):
    with h5chunk.File(path) as f, h5py.File(path, "r") as hf:
        text = f["text"]
        assert text.dtype == np.dtype("S2") and text.fast_path
        assert text[1] == hf["text"][1] == b"bc"
        ds = f["vtext"]
        # h5chunk cannot return them; h5py reads them (H5Dread), with a warning saying so
        assert ds.dtype == hf["vtext"].dtype and not ds.fast_path
        with pytest.warns(h5chunk.FallbackWarning, match="variable-length string"):
            got = ds[0:2]
        assert list(got) == list(hf["vtext"][0:2])
        assert ds[1] == hf["vtext"][1]


def test_corrupt_chunk_is_os_error_naming_file_dataset_and_chunk(tmp_path):
    p = str(tmp_path / "corrupt.h5")
    data = np.random.default_rng(5).normal(size=(4, 64, 64)).astype("float32")
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=data, chunks=(1, 64, 64), compression="gzip")
    with h5py.File(p, "r") as f:
        info = f["x"].id.get_chunk_info(2)
    with open(p, "r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(b"\xff" * 64)
    with h5chunk.File(p) as f:
        np.testing.assert_array_equal(f["x"].read(np.s_[0:2], route="fast"), data[0:2])  # intact chunks
        with pytest.raises(OSError) as e:
            f["x"].read(np.s_[:], route="fast")
    message = str(e.value)
    assert p in message and "'/x'" in message and "chunk [2, 0, 0]" in message


# --- fallback warnings ------------------------------------------------------------------------

@pytest.mark.filterwarnings("default::h5chunk.FallbackWarning")
def test_fallback_warns_once_per_dataset_with_the_cause(path):
    with h5chunk.File(path) as f, h5py.File(path, "r") as hf:
        scaled = f["scaled"]
        assert not scaled.fast_path and "scaleoffset" in scaled.fallback_cause
        with pytest.warns(h5chunk.FallbackWarning, match=r"\(/scaled, .*scaleoffset \(6\).*H5Dread") as rec:
            got = scaled[2:9]
        assert len(rec) == 1 and rec[0].filename == __file__  # points at the caller's line
        np.testing.assert_array_equal(got, hf["scaled"][2:9])
        with warnings.catch_warnings():
            warnings.simplefilter("error", h5chunk.FallbackWarning)
            scaled[0:3]  # the same dataset and cause: said once only
            _, stats = scaled.read(np.s_[:], return_stats=True)
            assert not stats.fast_path and "scaleoffset" in stats.fallback_cause
        with warnings.catch_warnings():
            warnings.simplefilter("error", h5chunk.FallbackWarning)
            # contiguous datasets take the fast path too (parallel preads)
            assert f["contig"].fast_path
            np.testing.assert_array_equal(f["contig"][10:20], hf["contig"][10:20])
            assert f["frames"].fast_path
            f["frames"].read(np.s_[0:2], route="fast")  # the fast path warns nothing


# --- progress ---------------------------------------------------------------------------------

def test_progress_callback_totals_the_compressed_bytes(path):
    with h5py.File(path, "r") as hf:
        ds = hf["frames"]
        stored = sum(ds.id.get_chunk_info(i).size for i in range(ds.id.get_num_chunks()))
    seen = []
    with h5chunk.File(path) as f:
        got, stats = f["frames"].read(np.s_[:], route="fast", progress=seen.append, return_stats=True)
    assert seen and all(n > 0 for n in seen)
    assert sum(seen) == stats.compressed_bytes == stored
    assert stats.chunks == 6


def test_progress_true_draws_a_tqdm_bar(path, capsys):
    with h5chunk.File(path) as f, h5py.File(path, "r") as hf:
        got = f["frames"].read(np.s_[:], route="fast", progress=True)
        np.testing.assert_array_equal(got, hf["frames"][()])
    err = capsys.readouterr().err
    assert "/frames" in err and "B" in err  # tqdm writes its bar to stderr


def test_progress_callback_error_propagates(path):
    def boom(n):
        raise RuntimeError("progress failed")
    with h5chunk.File(path) as f:
        with pytest.raises(RuntimeError, match="progress failed"):
            f["frames"].read(np.s_[:], route="fast", progress=boom)
        assert f["frames"][0].shape == (40, 30)  # still usable


# --- files read() opens for h5py Datasets ----------------------------------------------------

def test_read_closes_its_copy_of_a_file_once_h5py_closed_it(tmp_path):
    paths = [str(tmp_path / f"f{i}.h5") for i in range(2)]
    for p in paths:
        with h5py.File(p, "w") as f:
            f.create_dataset("x", data=np.arange(10, dtype="int32"), chunks=(5,))
    with h5py.File(paths[0], "r") as hf:
        assert h5chunk.read(hf["x"], 3) == 3
        assert h5chunk.read(hf["x"], 4) == 4
        mine = [e[0] for e in h5chunk._file_cache.values() if e[0].filename == paths[0]]
        assert len(mine) == 1 and not mine[0].closed  # opened once, kept while h5py has it open
    with h5py.File(paths[1], "r") as hf:
        assert h5chunk.read(hf["x"], 5) == 5
    assert mine[0].closed  # h5py closed paths[0]: so did the next read()
    h5chunk._close_cached_files(str(tmp_path))
    assert not any(e[0].filename.startswith(str(tmp_path)) for e in h5chunk._file_cache.values())
