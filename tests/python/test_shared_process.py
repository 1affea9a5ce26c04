"""Equality with h5py where h5py shares the process: array element types of both byte orders,
sparse datasets of every chunk index type read after h5py has read the same file (libhdf5's
chunk cache then answers for unwritten chunks), null dataspaces, and PyTables' own test files
(Debian's python-tables-data)."""

import glob
import os
import random

import h5py
import numpy as np
import pytest

import h5chunk
from test_equality import assert_same, fixed_selections, random_selection

pytestmark = pytest.mark.filterwarnings("ignore::h5chunk.FallbackWarning")

PYTABLES_DIR = "/usr/share/python-tables"


def _fill(ds, region):
    shape = ds[region].shape
    ds[region] = (np.arange(int(np.prod(shape))) % 251 + 1).astype(ds.dtype.base).reshape(shape + ds.dtype.shape)


@pytest.fixture(scope="module")
def subarray_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sub") / "subarray.h5")
    with h5py.File(path, "w") as f:
        for order, tag in (("<", "le"), (">", "be")):
            d = f.create_dataset(f"i2x4_{tag}", shape=(60,), dtype=np.dtype((order + "i2", (4,))), chunks=(7,),
                                 compression="gzip")
            d[...] = np.arange(240, dtype="i2").reshape(60, 4)
            d = f.create_dataset(f"f4x2x3_{tag}", shape=(6, 5), dtype=np.dtype((order + "f4", (2, 3))), chunks=(4, 2))
            d[...] = np.arange(180, dtype="f4").reshape(6, 5, 2, 3)
            d = f.create_dataset(f"u8x3_contig_{tag}", shape=(9,), dtype=np.dtype((order + "u8", (3,))))
            d[...] = np.arange(27, dtype="u8").reshape(9, 3) * 1000003
            rec = np.dtype([("a", order + "i4"), ("b", (order + "f8", (2,)))])
            d = f.create_dataset(f"record_{tag}", shape=(11,), dtype=rec, chunks=(4,))
            d["a"] = np.arange(11)
            d["b"] = np.arange(22).reshape(11, 2) / 4
    return path


@pytest.mark.parametrize("route", ["auto", "fast", "h5dread"])
def test_array_element_types_equal_h5py(subarray_file, route):
    checked = 0
    with h5chunk.File(subarray_file) as f, h5py.File(subarray_file, "r") as hf:
        for name in hf:
            hds, ds = hf[name], f[name]
            assert ds.dtype == hds.dtype and ds.shape == hds.shape, name
            full = hds[()]
            for key in fixed_selections(hds.shape):
                try:
                    expected = hds[key]
                except (TypeError, ValueError, IndexError):
                    continue  # h5py refuses (lists out of order, ...): nothing to compare with
                assert_same(ds.read(key, route=route), expected, (name, key, route))
                checked += 1
            assert_same(ds.read((), route=route), full, name)
            # A scalar selection of an array element is the element's array, as in h5py.
            one = ds.read(tuple([-1] * hds.ndim), route=route)
            assert one.shape == hds.dtype.shape and np.array_equal(one, full[(-1,) * hds.ndim])
            out = np.empty_like(full)
            assert ds.read((), out=out, route=route) is out
            np.testing.assert_array_equal(out, full)
    assert checked > 100


def _sparse_specs():
    """name -> (create_dataset keywords, regions written): every chunk index type, unwritten
    chunks between written ones."""
    return {
        "btree1": dict(kw=dict(shape=(20,), dtype="i4", chunks=(6,)), regions=[np.s_[0:6], np.s_[18:20]]),
        "btree1_gzip": dict(kw=dict(shape=(20, 9), dtype="i2", chunks=(6, 4), compression="gzip"),
                            regions=[np.s_[0:6, 0:4], np.s_[12:18, 8:9]]),
        "fixed": dict(kw=dict(shape=(20,), dtype="i4", chunks=(6,)), regions=[np.s_[0:6], np.s_[18:20]], latest=True),
        "fixed_gzip": dict(kw=dict(shape=(3000,), dtype="f8", chunks=(2,), compression="gzip"),
                           regions=[np.s_[0:2], np.s_[2990:3000]], latest=True),
        "earray": dict(kw=dict(shape=(20, 3), maxshape=(None, 3), dtype="i4", chunks=(6, 3)),
                       regions=[np.s_[0:6], np.s_[18:20]], latest=True),
        "earray_shuffle": dict(kw=dict(shape=(5, 40), maxshape=(5, None), dtype="u2", chunks=(5, 3), shuffle=True,
                                       compression="gzip"), regions=[np.s_[:, 0:3], np.s_[:, 30:33]], latest=True),
        "btree2": dict(kw=dict(shape=(20, 20), maxshape=(None, None), dtype="i4", chunks=(6, 6)),
                       regions=[np.s_[0:6, 0:6], np.s_[18:20, 12:18]], latest=True),
        "btree2_gzip": dict(kw=dict(shape=(20, 20), maxshape=(None, None), dtype="i4", chunks=(6, 6),
                                    compression="gzip"), regions=[np.s_[6:12, 6:12]], latest=True),
        # Huge and sparse: far more chunks in the grid than any table, three regions written.
        "earray_huge": dict(kw=dict(shape=(2 ** 40, 1), maxshape=(None, 1), dtype="i1", chunks=(1024, 1)),
                            regions=[np.s_[0:10, 0], np.s_[5000:6000, 0], np.s_[2 ** 40 - 3:, 0]], latest=True),
        "btree2_huge": dict(kw=dict(shape=(2 ** 31, 2 ** 31), maxshape=(None, None), dtype="i4", chunks=(64, 64)),
                            regions=[np.s_[0:3, 0:3], np.s_[2 ** 31 - 70:2 ** 31 - 60, 5:7]], latest=True),
    }


@pytest.fixture(scope="module")
def sparse_files(tmp_path_factory):
    base = tmp_path_factory.mktemp("sparse")
    paths = {}
    for latest in (False, True):
        path = str(base / ("latest.h5" if latest else "earliest.h5"))
        with h5py.File(path, "w", libver="latest" if latest else "earliest") as f:
            for name, spec in _sparse_specs().items():
                if spec.get("latest", False) != latest:
                    continue
                d = f.create_dataset(name, fillvalue=-3 if d_is_signed(spec) else 3, **spec["kw"])
                for region in spec["regions"]:
                    _fill(d, region)
        paths[latest] = path
    return paths


def d_is_signed(spec):
    return np.dtype(spec["kw"]["dtype"]).kind == "i"


def _selections(shape):
    if any(n > 10 ** 6 for n in shape):
        # Huge: what touches written and unwritten chunks, never the whole dataset.
        big = shape[0]
        if shape[1] == 1:
            return [np.s_[0:2048, 0], np.s_[4990:6010], np.s_[big - 5:], np.s_[0:5, 0:1], np.s_[1000:1100, 0]]
        return [np.s_[0:5, 0:5], np.s_[big - 80:big - 50, 0:10], np.s_[70:80, 70:80], np.s_[-1, 0:3]]
    return [(), np.s_[0], np.s_[-1], np.s_[1:3], np.s_[5:13], np.s_[::-3], np.s_[[12, 0, 19]]]


@pytest.mark.parametrize("route", ["auto", "fast"])
def test_sparse_datasets_after_h5py_read_them(sparse_files, route):
    """h5py reads each dataset first (its chunk cache then holds unwritten chunks, for which
    libhdf5 1.10.8's lookup reports a size), then h5chunk reads it in the same process, through
    h5chunk.read(h5py_dataset) and through its own File: h5py's values, never "corrupt"."""
    checked = 0
    for path in sparse_files.values():
        with h5py.File(path, "r") as hf, h5chunk.File(path) as f:
            for name in hf:
                hds = hf[name]
                for key in _selections(hds.shape):
                    try:
                        expected = hds[key]
                    except (TypeError, ValueError, IndexError):
                        continue  # h5py refuses it (an index past a short axis, an unsorted list)
                    for got in (h5chunk.read(hds, key, route=route), f[name].read(key, route=route)):
                        assert_same(got, expected, (path, name, key, route))
                        checked += 1
                    assert_same(f[name].read(key, route=route), hds[key], (path, name, key, "again"))
    assert checked > 80


def test_sparse_reads_take_the_fast_path_on_huge_grids(sparse_files):
    with h5py.File(sparse_files[True], "r") as hf, h5chunk.File(sparse_files[True]) as f:
        for name in ["earray_huge", "btree2_huge"]:
            hf[name][0:5, 0:1]
            got, stats = f[name].read(np.s_[0:3000, 0], route="fast", return_stats=True)
            assert stats.fast_path, (name, stats.fallback_cause)
            np.testing.assert_array_equal(got, hf[name][0:3000, 0])


def test_null_dataspace_is_h5py_empty_not_a_dtype_problem(tmp_path):
    path = str(tmp_path / "null.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("nothing", data=h5py.Empty("<i2"))
    with h5chunk.File(path) as f, h5py.File(path, "r") as hf:
        ds = f["nothing"]
        assert ds.shape is None and hf["nothing"].shape is None and ds.size is None
        assert ds.dtype == hf["nothing"].dtype
        got = ds[()]
        assert isinstance(got, h5py.Empty) and got == hf["nothing"][()]
        with pytest.raises(ValueError, match="null dataspace"):
            ds[0]
        assert "null dataspace" in ds.fallback_cause and "dtype h5chunk cannot" not in ds.fallback_cause


def _pytables_datasets():
    found = []
    for path in sorted(glob.glob(os.path.join(PYTABLES_DIR, "**", "*.h5"), recursive=True)):
        try:
            with h5py.File(path, "r") as hf:
                names = []
                hf.visititems(lambda n, o: names.append("/" + n) if isinstance(o, h5py.Dataset) else None)
        except (OSError, KeyError):
            continue  # external links to files not shipped, unreadable on purpose
        found += [(path, n) for n in names]
    return found


def test_pytables_test_files_equal_h5py():
    """PyTables' own test files (python-tables-data): every dataset h5chunk can return, read
    whole and by random selections, after h5py read it in this process, through both APIs.
    Datasets h5py cannot read (missing filters, on purpose broken) are skipped one by one."""
    datasets = _pytables_datasets()
    assert len(datasets) > 100, "python-tables-data is missing: scripts/deps.sh installs it"
    rng = random.Random(17)
    compared = 0
    for path, name in datasets:
        with h5py.File(path, "r") as hf:
            hds = hf[name]
            try:
                dtype = hds.dtype
            except (ValueError, TypeError):
                continue  # a type h5py cannot express (an exotic float, time): nothing to compare with
            if hds.shape is None or dtype.kind == "O" or h5py.check_dtype(vlen=dtype) is not None:
                continue
            try:
                full = hds[()]
            except (OSError, ValueError, TypeError):
                continue  # h5py cannot read it either (a filter not installed here)
            if isinstance(full, h5py.Empty) or full.dtype.kind == "O":
                continue
            keys = [()]
            if hds.ndim:
                keys += [random_selection(hds.shape, rng) for _ in range(6)] if hds.size else []
            for key in keys:
                try:
                    expected = hds[key]  # what h5py accepts (it serves what h5chunk cannot return)
                except (TypeError, ValueError, IndexError):
                    continue
                for route in ("auto", "fast"):
                    assert_same(h5chunk.read(hds, key, route=route), expected, (path, name, key, route))
                    compared += 1
    assert compared > 300
