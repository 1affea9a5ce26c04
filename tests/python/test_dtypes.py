"""Every fixed-size dtype and every layout and file format seen in the wild, written by h5py:
h5chunk returns h5py's dtype and values, and reads almost all of them on the fast path."""

import h5py
import numpy as np
import pytest

import h5chunk

pytestmark = pytest.mark.filterwarnings("ignore::h5chunk.FallbackWarning")

SHAPE = (37, 11)
SELECTIONS = [(), np.s_[3:30, 2:9], np.s_[[0, 5, 36], :], 7, (-1, 3), np.s_[8:16], np.s_[:, 4:8]]


def values(dtype, seed, n=None):
    """Deterministic values of any dtype: finite floats, valid bools, strings with NULs."""
    shape = SHAPE if n is None else (n,)
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.names:
        out = np.zeros(n, dtype)
        for i, name in enumerate(dtype.names):
            sub = dtype.fields[name][0]
            k = int(np.prod(sub.shape)) if sub.shape else 1
            out[name] = values(sub.base, seed + i + 1, n * k).reshape((n,) + sub.shape)
        return out.reshape(shape)
    if dtype.kind == "b":
        flat = rng.integers(0, 2, n).astype(bool)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        flat = rng.integers(info.min, info.max, n, dtype=dtype.newbyteorder("="), endpoint=True).astype(dtype)
    elif dtype.kind == "f":
        flat = (rng.standard_normal(n) * 100).astype(dtype)
    elif dtype.kind == "c":
        flat = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    elif dtype.kind in "SV":
        raw = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
        if dtype.kind == "S":
            raw[raw < 40] = 0
        flat = raw.view(dtype)
    else:
        raise AssertionError(dtype)
    return flat.reshape(shape)


RECORD = np.dtype({"names": ["a", "b", "c", "d", "e"],
                   "formats": [">i2", "<f8", "S5", (">u2", (3,)), [("p", "u1"), ("q", ">i4")]],
                   "offsets": [0, 8, 16, 22, 28], "itemsize": 40})
DTYPES = {
    "i1": "i1", "u1": "u1", "i2be": ">i2", "u4be": ">u4", "i8": "<i8", "u8be": ">u8",
    "f2": "<f2", "f2be": ">f2", "f4be": ">f4", "f8be": ">f8", "f16": "<f16",
    "bool": "?", "c8": "<c8", "c8be": ">c8", "c16be": ">c16",
    "s9": "S9", "v6": "V6", "record": RECORD, "packed": [("x", "<f4"), ("y", ">i8")],
}
ENUM = h5py.enum_dtype({"RED": 0, "GREEN": 1, "BLUE": 2}, basetype=">i2")


def write_types(path):
    with h5py.File(path, "w") as f:
        for k, (name, dt) in enumerate(DTYPES.items()):
            data = values(dt, k)
            f.create_dataset(name + "_chunked", data=data, chunks=(8, 4), compression="gzip", shuffle=True)
            f.create_dataset(name + "_contig", data=data)
        e = np.random.default_rng(99).integers(0, 3, SHAPE).astype(">i2")
        f.create_dataset("enum_chunked", data=e, dtype=ENUM, chunks=(8, 4), compression="lzf")
        f.create_dataset("enum_contig", data=e, dtype=ENUM)


def write_layouts(path, **file_kwargs):
    """Every chunk index h5py can make (with libver="latest"), contiguous and compact."""
    data = values(">f4", 5)
    with h5py.File(path, "w", **file_kwargs) as f:
        f.create_dataset("single_chunk", data=data, chunks=SHAPE, compression="gzip")
        f.create_dataset("fixed_array", data=data, chunks=(8, 4), compression="gzip")
        f.create_dataset("extensible_array", data=data, chunks=(8, 4), maxshape=(None, 11))
        f.create_dataset("btree2", data=data, chunks=(8, 4), maxshape=(None, None), compression="gzip")
        f.create_dataset("contiguous", data=data)
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        space = h5py.h5s.create_simple(SHAPE)
        dsid = h5py.h5d.create(f.id, b"compact", h5py.h5t.IEEE_F32BE, space, dcpl=dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((8, 4))
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        dsid = h5py.h5d.create(f.id, b"implicit", h5py.h5t.IEEE_F32BE, space, dcpl=dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("dtypes")
    paths = {"types": str(d / "types.h5"), "latest": str(d / "latest.h5"),
             "earliest": str(d / "earliest.h5"), "paged": str(d / "paged.h5")}
    write_types(paths["types"])
    write_layouts(paths["latest"], libver="latest")
    write_layouts(paths["earliest"])
    # As zea writes its files: paged file-space strategy, free space persisted.
    write_layouts(paths["paged"], libver="latest", fs_strategy="page", fs_persist=True, fs_page_size=4096)
    return paths


def same(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    if want.dtype.names:
        for name in want.dtype.names:
            same(np.asarray(got[name]), np.asarray(want[name]))
        return
    if want.dtype.kind == "f" and want.dtype.itemsize == 16:
        # long double: 6 of its 16 bytes are padding that h5py leaves as its buffer held them
        assert np.array_equal(got, want)
        return

    def raw(a):
        return np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    assert np.array_equal(raw(got), raw(want))


def check_file(path):
    """Every read equals h5py's; returns (fast reads, reads)."""
    fast = reads = 0
    with h5py.File(path, "r") as hf, h5chunk.File(path) as cf:
        for name in hf:
            hds, cds = hf[name], cf[name]
            assert cds.dtype == hds.dtype, (name, cds.dtype, hds.dtype)
            for sel in SELECTIONS:
                want = np.asarray(hds[sel])
                got, stats = cds.read(sel, route="fast", return_stats=True)
                same(np.asarray(got), want)
                # H5Dread's own bytes: equal values (it may leave padding as it finds it)
                ref = np.asarray(cds.read(sel, route="h5dread"))
                assert ref.dtype == want.dtype and np.array_equal(ref, want)
                fast += stats.fast_path
                reads += 1
    return fast, reads


def test_every_dtype_equals_h5py(files):
    fast, reads = check_file(files["types"])
    assert fast == reads  # every fixed-size dtype h5py writes takes the fast path


@pytest.mark.parametrize("kind", ["latest", "earliest", "paged"])
def test_every_layout_equals_h5py(files, kind):
    fast, reads = check_file(files[kind])
    # Only the compact dataset (in its object header, at most 64 KiB) is read with H5Dread.
    assert fast == reads - len(SELECTIONS)


def test_dtypes_as_h5py_names_them(files):
    with h5chunk.File(files["types"]) as f:
        assert f["bool_chunked"].dtype == np.dtype("?")
        assert f["c8be_chunked"].dtype == np.dtype(">c8")
        assert f["f2_chunked"].dtype == np.dtype("<f2")
        assert f["s9_chunked"].dtype == np.dtype("S9")
        assert f["v6_chunked"].dtype == np.dtype("V6")
        assert f["enum_chunked"].dtype == np.dtype(">i2")
        assert f["record_chunked"].dtype == RECORD
        assert f["record_chunked"].fast_path


def test_field_names_as_h5py(files):
    with h5chunk.File(files["types"]) as f, h5py.File(files["types"], "r") as hf:
        for key in ["a", ("e", np.s_[3:9]), ("b", "d", 5), (np.s_[2:4], "c"), ("d", 1, 2)]:
            want = hf["record_chunked"][key]
            got = f["record_chunked"][key]
            assert np.asarray(got).dtype == np.asarray(want).dtype, key
            assert type(got) is type(want) or np.isscalar(want), key
            for name in (want.dtype.names or [None]):
                g = np.asarray(got if name is None else got[name])
                w = np.asarray(want if name is None else want[name])
                assert np.array_equal(g, w), key
        with pytest.raises(ValueError):
            f["record_chunked"]["nope"]
        with pytest.raises(ValueError):
            f["f4be_chunked"]["a"]


# Members stored out of offset order, as PyTables' out_of_order_types.h5 stores them.
OUT_OF_ORDER = np.dtype({"names": ["test_5", "test_10", "test_15"], "formats": ["S5", "S10", "S15"],
                         "offsets": [25, 15, 0], "itemsize": 30})
OFFSET_ORDER = np.dtype({"names": ["test_15", "test_10", "test_5"], "formats": ["S15", "S10", "S5"],
                         "offsets": [0, 15, 25], "itemsize": 30})


def test_compound_member_order_does_not_follow_what_h5py_did(tmp_path):
    """libhdf5 sorts a compound's shared type by offset once a read converts it (here h5py's
    astype into another record layout) while the dataset stays open; h5chunk lists members in offset
    order in either state, so its dtype never changes."""
    path = tmp_path / "out_of_order.h5"
    data = np.zeros(40, OUT_OF_ORDER)
    for name in OUT_OF_ORDER.names:
        data[name] = [f"{name}-{i}".encode() for i in range(40)]
    names = ("chunked", "contiguous")
    with h5py.File(path, "w") as hf:
        hf.create_dataset("chunked", data=data, chunks=(16,))
        hf.create_dataset("contiguous", data=data)

    def read_with_h5chunk():
        with h5chunk.File(path) as f:
            return {name: (f[name].dtype, f[name][:]) for name in names}
    with h5py.File(path, "r") as hf:
        held = [hf[name] for name in names]  # open datasets share libhdf5's copy of the type
        for dset in held:  # a read that converts the type
            dset.astype([("test_15", "S15"), ("test_5", "S5")])[:]
        assert held[0].dtype.names == OFFSET_ORDER.names  # h5py's dtype changed
        converted = read_with_h5chunk()  # the same datasets, still open in h5py
    fresh = read_with_h5chunk()
    for name in names:
        assert fresh[name][0] == OFFSET_ORDER, name
        assert converted[name][0] == fresh[name][0], name
        for field in OUT_OF_ORDER.names:
            assert np.array_equal(fresh[name][1][field], data[field]), (name, field)
            assert np.array_equal(converted[name][1][field], data[field]), (name, field)


def test_variable_length_and_references_read_through_h5py(tmp_path):
    """What h5chunk cannot return (object arrays) still reads, through h5py, as h5py reads it."""
    path = str(tmp_path / "vlen.h5")
    with h5py.File(path, "w") as f:
        seqs = f.create_dataset("seqs", (3,), dtype=h5py.vlen_dtype(np.int32))
        for i in range(3):
            seqs[i] = np.arange(i + 1, dtype=np.int32)
        f.create_dataset("refs", data=[f["seqs"].ref, f.ref], dtype=h5py.ref_dtype)
    with h5chunk.File(path) as cf, h5py.File(path, "r") as hf:
        got = cf["seqs"][:]
        assert all(np.array_equal(a, b) for a, b in zip(got, hf["seqs"][:]))
        assert cf["seqs"].dtype == hf["seqs"].dtype
        refs = cf["refs"][:]
        assert [hf[r].name for r in refs] == ["/seqs", "/"]
