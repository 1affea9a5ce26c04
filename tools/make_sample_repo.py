#!/usr/bin/python3
"""Writes the sample Hub repo the demo, the integration tests and the benchmarks serve with
tools/hub_server.py:

  OUT_ROOT/datasets/zea/sample-ultrasound/
    README.md, config.json
    recordings/carotid.hdf5        zea-like raw channel data, about --big-mb MB, one chunk per
                                   frame, Blosc lz4 (clevel 5, byte shuffle)
    recordings/phantom_small.hdf5  the same layout, a few MB, Blosc zstd
    models/weights.h5              small datasets: gzip+shuffle, uncompressed chunked, contiguous

Needs Debian's python3-h5py and numpy, and the HDF5 Blosc filter plugin (filter id 32001) that
Debian's hdf5-filter-plugin package installs. The output depends only on the arguments (same
--seed, same bytes), so content-keyed caches see the same oids run after run.

  make_sample_repo.py OUT_ROOT [--big-mb 120] [--seed 0]
"""

import argparse
import json
import os
import sys
import time

import h5py
import numpy as np

REPO_REL = os.path.join("datasets", "zea", "sample-ultrasound")

# The HDF5 Blosc filter: cd_values are (4 slots the filter fills itself, clevel, shuffle,
# compressor); compressor codes as in blosc.h.
BLOSC_FILTER = 32001
BLOSC_LZ4 = 1
BLOSC_ZSTD = 5
BLOSC_BYTE_SHUFFLE = 1
BLOSC_CLEVEL = 5

# Acquisition geometry: an 11-angle plane-wave sequence on a 128-element linear probe, the
# shape of a typical zea recording.
N_TX = 11
N_AX = 2048           # samples per channel: ~7.9 cm deep at 20 MHz
N_EL = 128
N_CH = 1              # RF data (2 would be IQ)
CENTER_FREQUENCY = 5.0e6
SAMPLING_FREQUENCY = 4 * CENTER_FREQUENCY  # 4 samples per period, the usual RF rate
SOUND_SPEED = 1540.0  # m/s in soft tissue
ELEMENT_PITCH = 0.3e-3
MAX_ANGLE_DEG = 10.0
# Speckle needs many scatterers per resolution cell; this many keeps generation well under a
# second per frame while still looking like tissue.
N_SCATTERERS = 3000
PULSE_SAMPLES = 32
# Scales the echoes to a 12-bit ADC's range; values are rounded to integers, as real digitized
# data is, which is what lets Blosc's byte shuffle find the zero low-order mantissa bytes.
ADC_PEAK = 1800.0
NOISE_SIGMA = 6.0
# Tissue motion between frames, in samples, so frames differ (and dedupe cannot cheat).
MOTION_PER_FRAME = 3


class Probe:
    def __init__(self):
        x = (np.arange(N_EL) - (N_EL - 1) / 2) * ELEMENT_PITCH
        self.geometry = np.stack([x, np.zeros(N_EL), np.zeros(N_EL)], axis=1).astype(np.float32)
        self.angles = np.deg2rad(np.linspace(-MAX_ANGLE_DEG, MAX_ANGLE_DEG, N_TX)).astype(np.float32)
        # Plane-wave transmit delays: each element fires when the tilted wavefront passes it.
        delays = x[None, :] * np.sin(self.angles)[:, None] / SOUND_SPEED
        self.t0_delays = (delays - delays.min(axis=1, keepdims=True)).astype(np.float32)


def pulse():
    """A Gaussian-windowed sinusoid: the two-cycle echo of one point."""
    n = np.arange(PULSE_SAMPLES) - PULSE_SAMPLES / 2
    return np.exp(-(n / 5.0) ** 2) * np.sin(2 * np.pi * CENTER_FREQUENCY / SAMPLING_FREQUENCY * n)


def echo_frame(rng, probe, n_ax, n_el):
    """(N_TX, n_ax, n_el) float64 channel data: every scatterer's echo placed at its round-trip
    delay (transmit plane wave + receive path), then convolved with the pulse along time."""
    x_el = probe.geometry[:n_el, 0].astype(np.float64)
    depth_max = n_ax / SAMPLING_FREQUENCY * SOUND_SPEED / 2
    sx = rng.uniform(x_el[0], x_el[-1], N_SCATTERERS)
    sz = rng.uniform(2e-3, depth_max, N_SCATTERERS)
    # A few bright reflectors (vessel walls) among the speckle.
    amp = rng.normal(0, 1, N_SCATTERERS) * np.exp(-sz / depth_max)
    amp[: N_SCATTERERS // 50] *= 8

    impulses = np.zeros(N_TX * n_ax * n_el)
    rx = np.sqrt(sz[:, None] ** 2 + (sx[:, None] - x_el[None, :]) ** 2)  # (scatterer, element)
    el_index = np.arange(n_el)[None, :]
    for t, angle in enumerate(probe.angles.astype(np.float64)):
        tx = sz * np.cos(angle) + sx * np.sin(angle)
        sample = np.rint((tx[:, None] + rx) / SOUND_SPEED * SAMPLING_FREQUENCY).astype(np.int64)
        inside = sample < n_ax
        flat = (t * n_ax + sample) * n_el + el_index
        weights = np.broadcast_to(amp[:, None], flat.shape)
        impulses += np.bincount(flat[inside], weights[inside], minlength=impulses.size)
    impulses = impulses.reshape(N_TX, n_ax, n_el)
    spectrum = np.fft.rfft(impulses, axis=1) * np.fft.rfft(pulse(), n=n_ax)[None, :, None]
    return np.fft.irfft(spectrum, n=n_ax, axis=1)


def create_file(path):
    """An HDF5 file whose root group stores no timestamps (HDF5 stamps every object by default,
    which would make each run's bytes, and so the file's sha256, differ)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
    fcpl.set_obj_track_times(False)
    return h5py.File(h5py.h5f.create(path.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl))


def create_group(parent, name):
    """parent.create_group(name) without timestamps (see create_file)."""
    gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
    gcpl.set_obj_track_times(False)
    h5py.h5g.create(parent.id, name.encode(), gcpl=gcpl)
    return parent[name]


def write_recording(path, rng, probe, n_frames, n_ax, n_el, compressor, description):
    base = echo_frame(rng, probe, n_ax, n_el)
    base *= ADC_PEAK / np.abs(base).max()
    shape = (n_frames, N_TX, n_ax, n_el, N_CH)
    with create_file(path) as f:
        f.attrs["probe"] = "L11-4v-like"
        f.attrs["description"] = description
        f.attrs["zea_version"] = "sample-1"
        data = create_group(f, "data")
        raw = data.create_dataset(
            "raw_data", shape=shape, dtype=np.float32, chunks=(1,) + shape[1:],
            compression=BLOSC_FILTER,
            compression_opts=(0, 0, 0, 0, BLOSC_CLEVEL, BLOSC_BYTE_SHUFFLE, compressor),
            track_times=False)
        raw.attrs["unit"] = "unitless"
        raw.attrs["description"] = "raw channel data (frames, transmits, samples, elements, channels)"
        for i in range(n_frames):
            frame = np.roll(base, i * MOTION_PER_FRAME, axis=1)
            frame += rng.normal(0, NOISE_SIGMA, frame.shape)
            raw[i] = np.rint(frame).astype(np.float32)[..., None]
        write_scan(create_group(f, "scan"), probe, n_frames, n_ax, n_el)
    return raw_bytes(shape)


def write_scan(scan, probe, n_frames, n_ax, n_el):
    scan.attrs["description"] = "acquisition parameters"
    small = {
        "n_frames": np.int64(n_frames), "n_tx": np.int64(N_TX), "n_ax": np.int64(n_ax),
        "n_el": np.int64(n_el), "n_ch": np.int64(N_CH),
        "center_frequency": np.float64(CENTER_FREQUENCY),
        "sampling_frequency": np.float64(SAMPLING_FREQUENCY),
        "sound_speed": np.float64(SOUND_SPEED),
        "probe_geometry": probe.geometry[:n_el],
        "t0_delays": probe.t0_delays[:, :n_el],
        "tx_apodizations": np.ones((N_TX, n_el), np.float32),
        "polar_angles": probe.angles,
        "azimuth_angles": np.zeros(N_TX, np.float32),
        "focus_distances": np.full(N_TX, np.inf, np.float32),  # plane waves: focus at infinity
        "initial_times": np.zeros(N_TX, np.float32),
        "time_to_next_transmit": np.full((n_frames, N_TX), 1e-4, np.float32),
    }
    for name, value in small.items():
        scan.create_dataset(name, data=value, track_times=False)


def raw_bytes(shape):
    return int(np.prod(shape)) * 4


def write_weights(path, rng):
    with create_file(path) as f:
        dense = create_group(f, "dense")
        dense.create_dataset("kernel", data=rng.normal(0, 0.05, (256, 128)).astype(np.float32),
                             chunks=(64, 128), compression="gzip", compression_opts=4, shuffle=True,
                             track_times=False)
        dense.create_dataset("bias", data=np.linspace(-0.1, 0.1, 128, dtype=np.float32),
                             track_times=False)  # contiguous, uncompressed
        conv = create_group(f, "conv")
        conv.create_dataset("kernel", data=rng.normal(0, 0.1, (3, 3, 16, 32)).astype(np.float32),
                            chunks=(3, 3, 16, 8), compression="gzip", compression_opts=6, shuffle=True,
                            track_times=False)
        f.create_dataset("embedding", data=rng.normal(0, 1, (1000, 64)).astype(np.float16),
                         chunks=(250, 64), track_times=False)  # chunked, uncompressed
        f.attrs["framework"] = "none"
        f.attrs["description"] = "small weights for h5chunk tests"


README = """---
license: cc-by-4.0
task_categories:
- other
tags:
- ultrasound
- zea
- hdf5
---
# sample-ultrasound

Synthetic plane-wave ultrasound recordings in the zea HDF5 layout, generated by hubfs's
tools/make_sample_repo.py (seed {seed}). Not real patient data.

- `recordings/carotid.hdf5`: /data/raw_data {big_shape} float32, one chunk per frame, Blosc lz4.
- `recordings/phantom_small.hdf5`: /data/raw_data {small_shape} float32, Blosc zstd.
- `models/weights.h5`: small gzip and uncompressed datasets.
"""


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_root", help="the hub_server.py --root to write into")
    p.add_argument("--big-mb", type=float, default=120, help="uncompressed size of carotid.hdf5's raw data")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if not h5py.h5z.filter_avail(BLOSC_FILTER):
        sys.exit("make_sample_repo: the HDF5 Blosc filter (32001) is not installed "
                 "(Debian: apt-get install hdf5-filter-plugin)")

    started = time.monotonic()
    repo = os.path.join(args.out_root, REPO_REL)
    rng = np.random.default_rng(args.seed)
    probe = Probe()
    frame_bytes = raw_bytes((1, N_TX, N_AX, N_EL, N_CH))
    big_frames = max(1, round(args.big_mb * 1e6 / frame_bytes))
    big_shape = (big_frames, N_TX, N_AX, N_EL, N_CH)
    small_shape = (4, N_TX, 512, 64, N_CH)

    written = []
    path = os.path.join(repo, "recordings", "carotid.hdf5")
    raw = write_recording(path, rng, probe, big_frames, N_AX, N_EL, BLOSC_LZ4, "synthetic carotid sweep")
    written.append((path, "raw_data %s blosc-lz4" % (big_shape,), raw))
    path = os.path.join(repo, "recordings", "phantom_small.hdf5")
    raw = write_recording(path, rng, probe, small_shape[0], small_shape[2], small_shape[3], BLOSC_ZSTD,
                          "synthetic phantom")
    written.append((path, "raw_data %s blosc-zstd" % (small_shape,), raw))
    path = os.path.join(repo, "models", "weights.h5")
    write_weights(path, rng)
    written.append((path, "gzip+shuffle / uncompressed datasets", None))

    with open(os.path.join(repo, "README.md"), "w") as f:
        f.write(README.format(seed=args.seed, big_shape=big_shape, small_shape=small_shape))
    written.append((os.path.join(repo, "README.md"), "dataset card", None))
    config = {
        "format": "zea",
        "files": {
            "recordings/carotid.hdf5": {"dataset": "data/raw_data", "shape": big_shape, "dtype": "float32",
                                        "chunks": (1,) + big_shape[1:], "compressor": "blosc-lz4"},
            "recordings/phantom_small.hdf5": {"dataset": "data/raw_data", "shape": small_shape,
                                              "dtype": "float32", "chunks": (1,) + small_shape[1:],
                                              "compressor": "blosc-zstd"},
        },
        "seed": args.seed,
    }
    with open(os.path.join(repo, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    written.append((os.path.join(repo, "config.json"), "file index", None))

    for path, what, raw in written:
        size = os.path.getsize(path)
        ratio = " (%.1fx from %.1f MB)" % (raw / size, raw / 1e6) if raw else ""
        print("wrote %s: %.2f MB, %s%s" % (path, size / 1e6, what, ratio))
    print("done in %.1f s; serve with: tools/hub_server.py --root %s" % (time.monotonic() - started,
                                                                         args.out_root))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
