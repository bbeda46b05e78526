"""tools/bench/bench_latency.py on the CPU backend: it runs end to end and writes the
records the lead's GPU session reads ({surface, algorithm, batch, us_per_call}) and a
plot; the kernel-alone rows sit below the calls that contain them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import REPO

pytest.importorskip("grid_rbd._core", reason="grid_rbd._core (the C++ runtime extension) "
                    "is not built: run pip install -e . (tools/setup.sh)")


def test_bench_latency_writes_the_table(tmp_path):
    out, png = tmp_path / "lat.json", tmp_path / "lat.png"
    done = subprocess.run(
        [sys.executable, str(REPO / "tools/bench/bench_latency.py"), "--device", "cpu",
         "--reps", "20", "--big-batch", "0", "--surfaces", "numpy,torch",
         "--cache-dir", str(tmp_path / "store"), "--out", str(out), "--plot", str(png)],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    table = json.loads(out.read_text())
    records = table["records"]
    assert all(set(r) == {"surface", "algorithm", "batch", "us_per_call"} for r in records)
    rows = {(r["surface"], r["algorithm"], r["batch"]): r["us_per_call"] for r in records}
    for algorithm in ("inverse_dynamics", "forward_dynamics", "forward_dynamics_gradient"):
        for surface in ("numpy", "kernel", "numpy_overhead", "torch_eager"):
            assert (surface, algorithm, 1) in rows, (surface, algorithm)
        assert 0 < rows[("kernel", algorithm, 1)] < 10 * rows[("numpy", algorithm, 1)]
    assert ("torch_graph_replay", "forward_dynamics_gradient", 1) in rows
    assert rows[("torch_fwd_bwd", "forward_dynamics", 1)] > 0
    assert table["meta"]["device"] == "cpu" and png.stat().st_size > 1000
