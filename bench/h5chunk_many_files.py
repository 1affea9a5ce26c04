#!/usr/bin/python3
"""Many open files in one process (a data loader's worker): N h5chunk.File objects of one local
file, each read one frame at a time, round robin, into one pre-touched output. Prints the
process's user + system CPU-seconds per GB delivered, the wall time of the reads, and the
process's PSS and RSS after them (/proc/self/smaps_rollup): what its idle worker buffers keep.

    PYTHONPATH=build/python /usr/bin/python3 bench/h5chunk_many_files.py FILE [N_FILES=16] [ROUNDS=2]

Run it with two builds' PYTHONPATH, alternating, to compare them in one run. FILE: e.g. the
zea-like files bench_h5chunk_local writes (/tmp/h5chunk_bench/zea_blosc_lz4_shuffle.h5).
"""
import resource
import sys
import time

import numpy as np

import h5chunk


def cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main():
    path = sys.argv[1]
    n_files = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    files = [h5chunk.File(path) for _ in range(n_files)]
    name = files[0].datasets()[0]
    datasets = [f[name] for f in files]
    out = np.empty(datasets[0].shape[1:], dtype=datasets[0].dtype)
    datasets[0].read(np.s_[0], out=out)  # the page cache and the output, touched once
    cpu0, t0, delivered = cpu_seconds(), time.perf_counter(), 0
    for r in range(rounds):
        for i, d in enumerate(datasets):
            d.read(np.s_[(r * n_files + i) % d.shape[0]], out=out)
            delivered += out.nbytes
    cpu1, t1 = cpu_seconds(), time.perf_counter()
    kib = {}
    for line in open("/proc/self/smaps_rollup"):
        key, _, rest = line.partition(":")
        if key in ("Pss", "Rss"):
            kib[key] = int(rest.split()[0])
    print(f"{(cpu1 - cpu0) / (delivered / 1e9):.3f} CPU-s/GB  {t1 - t0:.3f} s  {delivered / 1e6:.0f} MB  "
          f"PSS {kib['Pss'] / 1024:.0f} MiB  RSS {kib['Rss'] / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
