"""Equality is the contract: every selection gives h5py's shape, dtype and values, on every
dataset of the fixtures, whichever way h5chunk reads it."""

import random

import h5py
import numpy as np
import pytest

import h5chunk

pytestmark = pytest.mark.filterwarnings("ignore::h5chunk.FallbackWarning")
from fixtures import write_fixture


@pytest.fixture(scope="module")
def fixture_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("eq") / "fixtures.h5")
    write_fixture(path)
    return path


def all_datasets(path):
    names = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: names.append("/" + name) if isinstance(obj, h5py.Dataset) else None)
    return names


def orthogonal(full, key, rank):
    """numpy reference: each index selects along its own axis."""
    if not isinstance(key, tuple):
        key = (key,)
    if len(key) == 1 and isinstance(key[0], np.ndarray) and key[0].dtype == bool and key[0].ndim == rank > 1:
        return full[key[0]]
    explicit = sum(1 for k in key if k is not Ellipsis)
    items = []
    for k in key:
        items.extend([slice(None)] * (rank - explicit) if k is Ellipsis else [k])
    items.extend([slice(None)] * (rank - len(items)))
    out, axis = full, 0
    for k in items:
        if isinstance(k, slice):
            out = out[(slice(None),) * axis + (k,)]
            axis += 1
        elif isinstance(k, (list, np.ndarray)):
            arr = np.asarray(k)
            arr = np.flatnonzero(arr) if arr.dtype == bool else arr.astype(np.int64)
            out = np.take(out, arr, axis=axis)
            axis += 1
        else:
            out = np.take(out, int(k), axis=axis)
    return out


def expected_for(hds, full, key):
    """h5py's answer where h5py accepts the selection, else the orthogonal meaning."""
    ref = orthogonal(full, key, hds.ndim)
    try:
        got = hds[key]
    except (TypeError, ValueError):
        return ref
    np.testing.assert_array_equal(np.asarray(got), ref)  # the reference agrees with h5py
    return got


def assert_same(actual, expected, key):
    assert type(actual) is type(expected), (key, type(actual), type(expected))
    assert np.shape(actual) == np.shape(expected), key
    assert np.asarray(actual).dtype == np.asarray(expected).dtype, key
    np.testing.assert_array_equal(actual, expected, err_msg=repr(key))


def fixed_selections(shape):
    rank = len(shape)
    sels = [(), Ellipsis, np.s_[...], np.s_[:]]
    if rank == 0:
        return [(), Ellipsis]
    n0 = shape[0]
    sels += [0, -1, n0 - 1, np.s_[1:], np.s_[:-1], np.s_[::2], np.s_[1::3], np.s_[::-1], np.s_[-2::-2],
             np.s_[5:2], np.s_[[0]], np.s_[[0, n0 - 1]], np.s_[[n0 - 1, 0]], np.s_[[1, 1, 0]], np.s_[[]],
             np.array([0, min(2, n0 - 1)]), np.s_[np.int64(1)], np.s_[-n0], [True] * n0,
             np.s_[..., 0], np.s_[0, ...], tuple([0] * rank), tuple([-1] * rank)]
    if rank >= 2:
        n1 = shape[1]
        sels += [np.s_[:, 0], np.s_[1:3, 2:], np.s_[:, ::2], np.s_[::2, ::-1], np.s_[:, [n1 - 1, 0]],
                 np.s_[[0, 1], [0, n1 - 1]], np.s_[[1, 0], [n1 - 1, n1 - 1]], np.s_[0, ..., 0],
                 np.s_[:, [True] + [False] * (n1 - 1)], np.s_[..., 1:2], np.s_[-1, -1]]
        mask = np.zeros(shape, bool)
        mask.flat[:: max(1, mask.size // 7)] = True
        sels += [mask, np.zeros(shape, bool)]
    if rank >= 3:
        sels += [np.s_[:, :, 0], np.s_[1, 1:3, [0, 2]], np.s_[::2, [1, 0], ::-2], np.s_[..., [0, 0], :]]
    return sels


def random_selection(shape, rng):
    items = []
    for n in shape:
        r = rng.random()
        if r < 0.2:
            items.append(rng.randrange(-n, n))
        elif r < 0.55:
            start = rng.choice([None, rng.randrange(-n, n + 1)])
            stop = rng.choice([None, rng.randrange(-n - 2, n + 3)])
            step = rng.choice([None, 1, 1, 2, 3, 7, -1, -2])
            items.append(slice(start, stop, step))
        elif r < 0.75:
            k = rng.randint(1, min(n, 6))
            items.append(sorted(rng.sample(range(n), k)))
        elif r < 0.9:
            items.append([rng.randrange(-n, n) for _ in range(rng.randint(1, 5))])
        else:
            items.append(np.array([rng.random() < 0.5 for _ in range(n)]))
    cut = rng.randint(0, len(shape))  # leave trailing axes implicit, or use an ellipsis
    if rng.random() < 0.3 and cut > 0:
        return tuple(items[:cut]) + (Ellipsis,)
    return tuple(items[:max(cut, 1)])


@pytest.mark.parametrize("route", ["auto", "fast", "h5dread"])
def test_fixed_selections_equal_h5py(fixture_file, route):
    checked = 0
    with h5chunk.File(fixture_file) as f, h5py.File(fixture_file, "r") as hf:
        for name in all_datasets(fixture_file):
            hds, ds = hf[name], f[name]
            full = hds[()]
            assert ds.shape == hds.shape and ds.dtype == hds.dtype and ds.chunks == hds.chunks
            for key in fixed_selections(hds.shape):
                expected = expected_for(hds, full, key)
                assert_same(ds.read(key, route=route), expected, (name, key))
                checked += 1
    assert checked > 300


def test_random_selections_equal_h5py(fixture_file):
    rng = random.Random(1234)
    checked = composed = 0
    with h5chunk.File(fixture_file) as f, h5py.File(fixture_file, "r") as hf:
        for name in all_datasets(fixture_file):
            hds, ds = hf[name], f[name]
            if hds.ndim == 0:
                continue
            full = hds[()]
            for _ in range(60):
                key = random_selection(hds.shape, rng)
                try:
                    hds[key]
                except (TypeError, ValueError):
                    composed += 1
                expected = expected_for(hds, full, key)
                route = rng.choice(["auto", "fast"])
                assert_same(ds.read(key, route=route), expected, (name, key, route))
                checked += 1
    assert checked > 500 and composed > 50  # both what h5py reads and what it refuses


def test_fast_path_serves_plain_and_composed_selections(fixture_file):
    with h5chunk.File(fixture_file) as f:
        ds = f["d3_i32_gzip"]
        assert ds.fast_path and ds.fallback_cause == ""
        for key in [np.s_[2:9], np.s_[::2, 1], np.s_[[3, 1, 1], ::-1], np.s_[[0, 5], :, [2, 0]]]:
            _, stats = ds.read(key, route="fast", return_stats=True)
            assert stats.fast_path, key
            assert stats.chunks > 0 and stats.compressed_bytes > 0


def test_large_read_takes_fast_path_by_default(tmp_path):
    path = str(tmp_path / "big.h5")
    data = np.arange(8 * 256 * 256, dtype="float32").reshape(8, 256, 256)  # 2 MiB
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=data, chunks=(1, 256, 256), compression="gzip", compression_opts=1)
    with h5chunk.File(path) as f:
        got, stats = f["x"].read(np.s_[:], return_stats=True)
        assert stats.fast_path and stats.chunks == 8
        np.testing.assert_array_equal(got, data)
        assert np.array_equal(f["x"][::-1, 3], data[::-1, 3])


def test_h5py_dataset_as_input(fixture_file):
    with h5py.File(fixture_file, "r") as hf:
        for name in ["d3_i32_gzip", "d1_u16_gzip_edge", "group/nested", "d2_i32_bigendian"]:
            hds = hf[name]
            for key in [np.s_[0:5], np.s_[1], np.s_[[2, 0]], np.s_[...]]:
                assert_same(h5chunk.read(hds, key), expected_for(hds, hds[()], key), (name, key))
        hds = hf["d4_f32_frames"]
        out = np.empty((2,) + hds.shape[1:], hds.dtype)
        assert h5chunk.read(hds, np.s_[3:5], out=out) is out
        np.testing.assert_array_equal(out, hds[3:5])


def test_h5py_dataset_of_file_open_for_writing(tmp_path):
    path = str(tmp_path / "rw.h5")
    with h5py.File(path, "w") as hf:
        hds = hf.create_dataset("x", data=np.arange(100, dtype="int16").reshape(10, 10), chunks=(2, 10))
        np.testing.assert_array_equal(h5chunk.read(hds, np.s_[4:6]), hds[4:6])


def test_dataset_attributes(fixture_file):
    with h5chunk.File(fixture_file) as f, h5py.File(fixture_file, "r") as hf:
        ds = f["/d2_f32_gzip_shuffle"]
        assert ds.name == "/d2_f32_gzip_shuffle" and ds.file is f
        assert ds.shape == (50, 37) and ds.ndim == 2 and ds.size == 50 * 37 and len(ds) == 50
        assert ds.dtype == np.dtype("float32") and ds.nbytes == 50 * 37 * 4
        assert ds.chunks == (8, 10) and ds.layout == "chunked"
        assert [flt["name"] for flt in ds.filters] == ["shuffle", "deflate"]
        np.testing.assert_array_equal(np.asarray(ds), hf["d2_f32_gzip_shuffle"][()])
        assert f["d1_f64_contig"].chunks is None and f["d1_f64_contig"].layout == "contiguous"
        assert "/group/nested" in f.datasets() and "group/nested" in f and "nope" not in f
        assert f["scalar_f64"].shape == () and f["scalar_f64"][()] == 2.5
        assert f["d2_i32_bigendian"].dtype == np.dtype(">i4")
    assert f.closed
    with pytest.raises(ValueError, match="closed"):
        ds[0]


def test_new_selections_go_straight_to_the_fast_path(fixture_file):
    """Steps of either sign, unsorted/repeated lists and lists on several axes are handed to the
    C++ fast path as they are (no temporary, no numpy reordering) and read into ``out``."""
    from h5chunk import _selection

    with h5chunk.File(fixture_file) as f, h5py.File(fixture_file, "r") as hf:
        for name in ["d3_i32_gzip", "d3_u32_raw_edge", "d2_i32_sparse_fill", "d4_i16_shuffle"]:
            ds, full = f[name], hf[name][()]
            keys = [np.s_[[3, 1], ::-1], np.s_[[0, 2], [1, 3]], np.s_[::-2, [1, 1, 0]], np.s_[..., [2, 0, 2]],
                    np.s_[-1::-3, 1:4:2], np.s_[[True, False] * (ds.shape[0] // 2) + [True] * (ds.shape[0] % 2)]]
            for key in keys:
                plan = _selection.plan(key, ds.shape)
                assert plan.direct and not plan.takes, (name, key)
                want = orthogonal(full, key, ds.ndim)
                out = np.full(want.shape, 99, ds.dtype)
                got, stats = ds.read(key, out=out, route="fast", return_stats=True)
                assert got is out
                np.testing.assert_array_equal(out, want, err_msg=repr((name, key)))
                assert stats.fast_path, (name, key, stats.fallback_cause)


def test_several_lists_are_orthogonal_not_numpy_fancy(fixture_file):
    with h5chunk.File(fixture_file) as f, h5py.File(fixture_file, "r") as hf:
        full = hf["d2_f32_gzip_shuffle"][()]
        got = f["d2_f32_gzip_shuffle"][[3, 1], [2, 0, 2]]
        assert got.shape == (2, 3)
        np.testing.assert_array_equal(got, full[np.ix_([3, 1], [2, 0, 2])])
        np.testing.assert_array_equal(got, full[[3, 1]][:, [2, 0, 2]])
        paired = f["d2_f32_gzip_shuffle"][[0, 2], [1, 3]]  # numpy would give 2 elements, h5chunk 2x2
        np.testing.assert_array_equal(paired, full[np.ix_([0, 2], [1, 3])])


def test_out_of_range_raises_index_error_on_every_axis(fixture_file):
    with h5chunk.File(fixture_file) as f:
        ds = f["d3_i32_gzip"]  # (12, 11, 10)
        for key in [np.s_[12], np.s_[[0, 12]], np.s_[[0, 1], [0, 11]], np.s_[:, :, [-11]], np.s_[..., 10]]:
            with pytest.raises(IndexError):
                ds[key]


def test_fast_route_serves_random_selections_of_chunked_datasets(fixture_file):
    """route="fast" on chunked, natively stored datasets: every selection (h5py's and the
    lifted ones) takes the fast path and equals the reference."""
    rng = random.Random(99)
    reads = fast = 0
    with h5chunk.File(fixture_file) as f, h5py.File(fixture_file, "r") as hf:
        for name in all_datasets(fixture_file):
            ds = f[name]
            if not ds.fast_path:
                continue
            hds = hf[name]
            full = hds[()]
            for _ in range(30):
                key = random_selection(hds.shape, rng)
                got, stats = ds.read(key, route="fast", return_stats=True)
                assert_same(got, expected_for(hds, full, key), (name, key))
                reads += 1
                fast += stats.fast_path or got.size == 0
    assert reads > 200
    assert fast >= 0.95 * reads, (fast, reads)
