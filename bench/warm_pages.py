"""Free memory the host backs, before a timed run (both peer benchmarks use it).

These VMs are Firecracker guests with free page reporting: memory that has been free in the
guest for ~2 s is handed back to the host, and the next process to write it pays a host fault per
page (~2.5 ms per MB here). A cold `h5chunk read hf://` of the 16 frames took 0.80-1.02 s after a
6 s pause, against 0.63-0.82 s right after another run. Which contender pays depends on how long
the machine sat idle before it, not on the contender. Touching and freeing some memory first
gives every contender the same start, as on a machine without page reporting."""

import numpy as np

DEFAULT_MB = 1024


def warm_free_pages(mb=DEFAULT_MB):
    """Writes every page of `mb` MiB once and frees them: the guest's free memory is backed again."""
    if mb:
        warm = np.ones(mb << 20, dtype=np.uint8)
        del warm
