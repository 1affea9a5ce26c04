"""HDF5 fixture files written with h5py: many dtypes, chunk shapes, filters and ranks."""

import h5py
import numpy as np

BLOSC = 32001
# Blosc cd_values: (reserved, version, typesize, nbytes, clevel, shuffle, compressor); the
# plugin fills the first four. shuffle: 0 none, 1 byte, 2 bit. compressor: 1 lz4, 5 zstd.
BLOSC_LZ4_SHUFFLE = (0, 0, 0, 0, 5, 1, 1)
BLOSC_ZSTD_BITSHUFFLE = (0, 0, 0, 0, 3, 2, 5)


def blosc_available() -> bool:
    return bool(h5py.h5z.filter_avail(BLOSC))


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        # Smooth plus noise: compressible, but not trivially.
        base = np.sin(np.arange(int(np.prod(shape))) / 17.0).reshape(shape) * 100
        return (base + rng.normal(size=shape)).astype(dtype)
    info = np.iinfo(dtype)
    lo, hi = max(info.min, -1000), min(info.max, 1000)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


# name -> (shape, dtype, create_dataset keywords)
def dataset_specs():
    specs = {
        "d1_i8_raw": ((1000,), "int8", dict(chunks=(64,))),
        "d1_u16_gzip_edge": ((997,), "uint16", dict(chunks=(100,), compression="gzip")),
        "d1_f64_contig": ((300,), "float64", dict()),
        "d2_f32_gzip_shuffle": ((50, 37), "float32", dict(chunks=(8, 10), compression="gzip", shuffle=True)),
        "d2_i64_fletcher": ((40, 40), "int64", dict(chunks=(16, 7), fletcher32=True)),
        "d2_u8_onechunk": ((13, 9), "uint8", dict(chunks=(13, 9), compression="gzip", compression_opts=1)),
        "d3_i32_gzip": ((12, 11, 10), "int32", dict(chunks=(5, 4, 3), compression="gzip")),
        "d3_u32_raw_edge": ((7, 9, 11), "uint32", dict(chunks=(3, 4, 5))),
        "d4_i16_shuffle": ((6, 5, 4, 9), "int16", dict(chunks=(1, 5, 4, 9), shuffle=True, compression="gzip")),
        "d4_f32_frames": ((8, 3, 16, 5), "float32", dict(chunks=(1, 3, 16, 5), compression="gzip")),
        "d2_f32_lzf": ((30, 20), "float32", dict(chunks=(10, 10), compression="lzf")),
        "d2_i32_bigendian": ((20, 15), ">i4", dict(chunks=(6, 6))),
    }
    if blosc_available():
        specs["d3_f32_blosc_lz4"] = ((10, 24, 33), "float32",
                                     dict(chunks=(1, 24, 33), compression=BLOSC, compression_opts=BLOSC_LZ4_SHUFFLE))
        specs["d5_i16_blosc_zstd_bit"] = ((4, 3, 20, 6, 2), "int16",
                                          dict(chunks=(1, 3, 20, 6, 2), compression=BLOSC,
                                               compression_opts=BLOSC_ZSTD_BITSHUFFLE))
    return specs


def write_fixture(path):
    """Writes every dataset of dataset_specs() (plus a scalar, a partly written dataset with a
    fill value, and a group) and returns {name: data} for the array ones."""
    written = {}
    with h5py.File(path, "w") as f:
        for i, (name, (shape, dtype, kw)) in enumerate(dataset_specs().items()):
            data = _data(shape, np.dtype(dtype).newbyteorder("="), seed=i)
            f.create_dataset(name, data=data.astype(dtype), **kw)
            written[name] = data
        f.create_dataset("scalar_f64", data=np.float64(2.5))
        # Only the first chunk row is written; the rest reads as the fill value.
        sparse = f.create_dataset("d2_i32_sparse_fill", shape=(20, 20), dtype="int32", chunks=(5, 5),
                                  fillvalue=-7, compression="gzip")
        sparse[0:5, :] = np.arange(100, dtype="int32").reshape(5, 20)
        f.create_group("group").create_dataset("nested", data=np.arange(24, dtype="float32").reshape(4, 6),
                                                chunks=(2, 3))
    return written
