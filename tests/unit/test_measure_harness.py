"""The benchmarks' process-tree measurement (harness/measure.py): a file two processes map is
counted twice by the summed RSS, once by the summed PSS, and not at all by the anonymous peak."""

from __future__ import annotations

import sys

import pytest

from harness.measure import measure

MIB = 2 ** 20
# The child maps the file and fills 100 MiB of its own, then starts a grandchild that maps
# the same file; both hold their pages while the sampler looks. (Filled from a 100 MiB bytes
# object, the copy's moment held 200 MiB unshared: the RSS and PSS peaks were then both
# that moment's, and their difference the samples' luck.)
CHILD = """
import mmap, subprocess, sys, time
def touch(path):
    fh = open(path, "rb"); m = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    sum(m[i] for i in range(0, len(m), 4096))
    return m
m = touch(sys.argv[1])
if sys.argv[2] == "child":
    own = bytearray(100 * 2 ** 20)  # filled page by page: no 100 MiB temporary beside it
    for i in range(0, len(own), 4096):
        own[i] = 1
    subprocess.run([sys.executable, "-c", sys.argv[3], sys.argv[1], "grandchild", ""], check=True)
else:
    time.sleep(1.5)
"""


@pytest.mark.slow
def test_shared_mapped_pages_count_once_in_pss_and_never_as_anonymous(tmp_path):
    shared = tmp_path / "shared.bin"
    shared.write_bytes(b"\\1" * (64 * MIB))
    m = measure([sys.executable, "-c", CHILD, str(shared), "child", CHILD], interval=0.02)
    assert m["processes"] == 2
    assert m["tree_peak_rss"] >= 2 * 64 * MIB + 100 * MIB  # the file's pages in both processes
    assert m["tree_peak_rss"] - m["tree_peak_pss"] >= 48 * MIB  # ... shared out between them in PSS
    assert 100 * MIB <= m["tree_peak_anon"] < m["tree_peak_pss"] - 32 * MIB  # the bytearray, not the file


@pytest.mark.slow
def test_a_costly_sample_is_taken_less_often(monkeypatch):
    """The sampler keeps to its share of a core: a sample costing 20 ms (smaps_rollup of a
    process mapping gigabytes) is followed by a sleep of 19 times that, not by ``interval``."""
    import time

    import harness.measure as hm
    calls = []
    real = hm._rollup

    def slow(pid):
        calls.append(pid)
        time.sleep(0.02)
        return real(pid)
    monkeypatch.setattr(hm, "_rollup", slow)
    m = hm.measure([sys.executable, "-c", "import time; time.sleep(2)"], interval=0.01)
    # At most one sample in 0.4 s (0.02 / 0.05), whatever the machine's speed; at interval
    # 0.01 the 2 s would hold about 70.
    assert m["wall_s"] >= 2 and 1 <= len(calls) <= 2 / 0.4 + 2
