"""The GIL is released for the whole read, threads read in parallel, Ctrl-C stops a read."""

import signal
import sys
import threading
import time

import h5py
import numpy as np
import pytest

import h5chunk


@pytest.fixture(scope="module")
def frames_file(tmp_path_factory):
    # 16 frames of 1 MiB each, one per chunk: each frame read is large enough for the fast path.
    p = str(tmp_path_factory.mktemp("conc") / "frames.h5")
    rng = np.random.default_rng(11)
    data = (rng.normal(size=(16, 64, 64, 64)) * 100).astype("float32")
    with h5py.File(p, "w") as f:
        f.create_dataset("raw", data=data, chunks=(1, 64, 64, 64), compression="gzip", compression_opts=1,
                         shuffle=True)
    return p, data


SLOW_CHUNKS = 200_000


@pytest.fixture(scope="module")
def slow_file(tmp_path_factory):
    # 200,000 one-element chunks, read with threads=2 (by default h5chunk decodes chunks this
    # small on the calling thread alone): every chunk is handed to a helper, a read of many
    # short steps lasting ~0.4 s here, long enough to be interrupted part way.
    p = str(tmp_path_factory.mktemp("slow") / "slow.h5")
    with h5py.File(p, "w") as f:
        f.create_dataset("x", data=np.arange(SLOW_CHUNKS, dtype="int64"), chunks=(1,))
        f.create_dataset("y", data=np.arange(100, dtype="int64"), chunks=(10,))
    return p



def test_four_threads_read_different_frames(frames_file):
    path, data = frames_file
    results, errors = {}, []
    with h5chunk.File(path) as f:
        ds = f["raw"]
        start = threading.Barrier(4)

        def reader(k):
            try:
                start.wait()
                for rep in range(3):
                    frames = [k, k + 4, k + 8, k + 12]
                    got = {i: ds[i] for i in frames}
                    got[("pair", k)] = ds[[k, k + 8]]
                    results[(k, rep)] = got
            except Exception as e:  # reported below with the thread's frame
                errors.append((k, e))

        threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert len(results) == 12
    for (k, _), got in results.items():
        for i in (k, k + 4, k + 8, k + 12):
            np.testing.assert_array_equal(got[i], data[i])
        np.testing.assert_array_equal(got[("pair", k)], data[[k, k + 8]])


def test_gil_is_released_during_a_read(slow_file):
    counter = [0]
    running = threading.Event()
    stop = threading.Event()

    def spin():
        running.set()
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0.0001)  # hands the GIL back, so the reader can always retake it

    # With a switch interval this long, a thread that holds the GIL is never asked to drop it:
    # the spinning thread can only run while the reader has released it.
    interval = sys.getswitchinterval()
    sys.setswitchinterval(100.0)
    t = threading.Thread(target=spin)
    t.start()
    try:
        running.wait()
        with h5chunk.File(slow_file, threads=2) as f:
            ds = f["x"]
            before = counter[0]
            got = ds.read(np.s_[:], route="fast")
            after = counter[0]
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(interval)
    np.testing.assert_array_equal(got, np.arange(SLOW_CHUNKS))
    assert after > before, "the spinning thread never ran during the read: the GIL was held"


def test_keyboard_interrupt_stops_a_long_read(slow_file):
    main = threading.main_thread().ident
    assert threading.get_ident() == main  # signals are handled on the main thread
    read_bytes = []
    interrupted = threading.Event()

    def progress(n):
        read_bytes.append(n)
        if not interrupted.is_set():
            interrupted.set()
            # Sent from another thread, so it lands while the main thread waits inside the read
            # (not inside this callback).
            threading.Thread(target=signal.pthread_kill, args=(main, signal.SIGINT)).start()

    with h5chunk.File(slow_file, threads=2) as f:
        ds = f["x"]
        with pytest.raises(KeyboardInterrupt):
            ds.read(np.s_[:], route="fast", progress=progress)
        # It stopped early: nowhere near all the chunks (8 bytes each) were read.
        assert interrupted.is_set() and 0 < sum(read_bytes) < SLOW_CHUNKS * 8
        # The process and the file stay usable.
        np.testing.assert_array_equal(f["y"].read(np.s_[:], route="fast"), np.arange(100))
        np.testing.assert_array_equal(ds.read(np.s_[0:50], route="fast"), np.arange(50))


def test_keyboard_interrupt_without_progress_callback(frames_file, slow_file):
    # No callback: the wait loop itself runs the signal handlers. A watcher interrupts once the
    # output is partly written (the read is under way); the assertion is only on the outcome.
    main = threading.main_thread().ident
    out = np.full(SLOW_CHUNKS, -1, dtype="int64")
    done = threading.Event()

    def watch():
        deadline = time.monotonic() + 30
        while not done.is_set() and time.monotonic() < deadline:
            if out[:1000].min() >= 0:  # the first chunks have landed
                signal.pthread_kill(main, signal.SIGINT)
                return
            time.sleep(0.001)

    with h5chunk.File(slow_file, threads=2) as f:
        ds = f["x"]
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with pytest.raises(KeyboardInterrupt):
                ds.read(np.s_[:], route="fast", out=out)
        finally:
            done.set()
            watcher.join()
        assert (out == -1).any()  # stopped before the end
        np.testing.assert_array_equal(f["y"][:], np.arange(100))
