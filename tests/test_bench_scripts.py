"""The side-by-side benchmark scripts (tools/bench), cheaply: the shared states and
rotation arithmetic, the peer worker's process isolation, and the plots on small
fixtures. The benchmarks themselves are run by hand (docs/benchmarks.md), not here."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "tools/bench"
sys.path.insert(0, str(BENCH))

from sidebyside_common import (  # noqa: E402
    comparable,
    make_states,
    relative_error,
    rotated_sets,
)


def test_states_are_reproducible_valid_and_nonzero():
    a = make_states(19, 18, True, 5, seed=3)
    b = make_states(19, 18, True, 5, seed=3)
    c = make_states(19, 18, True, 5, seed=4)
    for key, shape in (("q", (5, 19)), ("qd", (5, 18)), ("qdd", (5, 18)), ("u", (5, 18))):
        assert a[key].shape == shape and a[key].dtype == np.float32
        assert a[key].flags.c_contiguous
        np.testing.assert_array_equal(a[key], b[key])
        assert not np.array_equal(a[key], c[key])
        assert np.all(a[key] != 0)
    quat = a["q"][:, 3:7].astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(quat, axis=1), 1.0, atol=1e-6)
    assert np.all(quat[:, 3] >= 0)  # xyzw with w >= 0
    fixed = make_states(7, 7, False, 4, seed=3)
    assert np.all(np.abs(fixed["q"]) <= 1.2)


def test_rotation_covers_three_l2_per_lap_within_caps():
    l2 = 60 * 2**20
    # iiwa14 at B=65536: 112 B of states + 28 B of output per item -> 9.2 MB a set.
    n = rotated_sets(65536, 140, l2)
    assert n == math.ceil(3 * l2 / (65536 * 140)) == 21
    assert n * 65536 * 140 >= 3 * l2 > (n - 1) * 65536 * 140
    assert rotated_sets(1, 140, l2) == 64  # capped
    assert rotated_sets(65536, 40_000, l2) == 1  # one set is already 2.6 GB
    assert rotated_sets(1024, 40_000, l2) == 5
    assert rotated_sets(1024, 40_000, l2, max_bytes=100_000_000) == 2  # the byte cap


def test_relative_error_flags_shape_and_nan():
    b = np.array([[3.0, 4.0]])
    assert relative_error(b + np.array([[0.0, 0.5]]), b) == pytest.approx(0.1)
    assert relative_error(b.reshape(2, 1), b) == math.inf
    assert math.isnan(relative_error(np.array([[np.nan, 4.0]]), b))


def test_comparable_flattens_blocks_and_signs_quaternions():
    """The cross-check's view of an output: a tuple's blocks side by side per item, and
    fk_batched's quaternion with qw >= 0 (the same rotation whatever sign a system picks)."""
    blocks = (np.arange(8.0).reshape(2, 2, 2), -np.arange(4.0).reshape(2, 2))
    np.testing.assert_array_equal(comparable("idsva_so", blocks),
                                  [[0, 1, 2, 3, -0, -1], [4, 5, 6, 7, -2, -3]])
    pose = np.array([[1.0, 2.0, 3.0, -0.5, 0.5, -0.5, 0.5], [1.0, 2.0, 3.0, 0.6, 0.8, 0, 0]])
    signed = comparable("fk_batched", pose)
    np.testing.assert_array_equal(signed[0], [1, 2, 3, 0.5, -0.5, 0.5, -0.5])
    np.testing.assert_array_equal(signed[1], pose[1])
    flipped = pose.copy()
    flipped[:, 3:] *= -1.0
    assert relative_error(comparable("fk_batched", flipped), signed) == 0.0
    np.testing.assert_array_equal(comparable("crba", pose), pose)


def _run_worker(tmp_path: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    request = {"robots": [{"name": "arm", "urdf": "/nonexistent.urdf", "floating_base": False}],
               "algorithms": ["crba"], "max_batch": 8, "cache_dir": str(tmp_path / "cache"),
               "no_torch": True}
    (tmp_path / "req.json").write_text(json.dumps(request))
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    return subprocess.run([sys.executable, str(BENCH / "gridrbd060_worker.py"), "build",
                           "--request", str(tmp_path / "req.json"), "--out",
                           str(tmp_path / "out.json")], env=env, capture_output=True,
                          text=True, timeout=60)


def test_peer_worker_refuses_our_package(tmp_path):
    result = _run_worker(tmp_path, REPO / "python")
    assert result.returncode != 0
    assert "expected the 0.6.0 wheel outside" in result.stderr
    assert not (tmp_path / "out.json").exists()


def test_peer_worker_refuses_another_version(tmp_path):
    fake = tmp_path / "site" / "grid_rbd"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '0.5.1'\n")
    result = _run_worker(tmp_path, tmp_path / "site")
    assert result.returncode != 0 and "grid_rbd 0.5.1" in result.stderr


def test_peer_worker_imports_the_peer_folder_over_an_editable_install(tmp_path):
    # A stand-in with the peer's package name and version records how it was called.
    peer = tmp_path / "site" / "grid_rbd"
    peer.mkdir(parents=True)
    (peer / "__init__.py").write_text(
        "__version__ = '0.6.0'\n"
        "import json, os, sys\n"
        "def register_robot(name, urdf, **kw):\n"
        "    seen = {'name': name, 'urdf': urdf, 'jax_hidden': sys.modules.get('jax', 1) is None,\n"
        "            **{k: v for k, v in kw.items() if k != 'cache_dir'}}\n"
        "    open(os.path.join(kw['cache_dir'] + '.seen'), 'w').write(json.dumps(seen))\n")
    result = _run_worker(tmp_path, tmp_path / "site")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "out.json").read_text())
    assert report["peer_version"] == "0.6.0"
    assert [b["robot"] for b in report["builds"]] == ["arm"] and report["builds"][0]["seconds"] >= 0
    seen = json.loads((tmp_path / "cache.seen").read_text())
    assert seen == {"name": "arm_bench060", "urdf": "/nonexistent.urdf", "jax_hidden": True,
                    "floating_base": False, "max_batch_size": 8, "backend": "numpy",
                    "algorithm_list": ["crba"], "enable_mujoco_kernels": False}


def _gpu_fixture() -> dict:
    records = []
    for robot, scale in (("iiwa14", 1.0), ("go2", 5.0)):
        for alg in ("inverse_dynamics", "forward_dynamics_gradient"):
            for batch in (1, 1024, 65536):
                ours = scale * 1e4 / batch + 0.2
                records.append({"robot": robot, "algorithm": alg, "batch": batch,
                                "ours_ns_per_item": ours, "peer_ns_per_item": 3 * ours,
                                "speedup_vs_peer": 3.0})
    return {"kind": "gpu_vs_gridrbd060", "date": "2026-12-01", "machine": {"gpu": "test"},
            "robots": [{"name": "iiwa14"}, {"name": "go2"}], "batches": [1, 1024, 65536],
            "algorithms": ["inverse_dynamics", "forward_dynamics_gradient"], "records": records}


def _cpu_fixture() -> dict:
    records = [{"robot": robot, "algorithm": alg, "threads": t, "dtype": d, "batch": 1024,
                "ours_ns_per_item": 100.0 * t, "pinocchio_ns_per_item": 150.0 * t,
                "speedup_vs_pinocchio": 1.5}
               for robot in ("iiwa14", "g1") for alg in ("aba", "inverse_dynamics")
               for t in (1, 2) for d in ("float64", "float32")]
    return {"kind": "cpu_vs_pinocchio", "date": "2026-12-01", "batch": 1024,
            "robots": [{"name": "iiwa14"}, {"name": "g1"}], "algorithms": ["aba",
                                                                           "inverse_dynamics"],
            "dtypes": ["float64", "float32"], "records": records, "machine": {"cpu_count": 2}}


def test_plots_are_drawn_from_json(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib (requirements-test) is not installed")
    from plot_bench import plot_file

    for name, fixture in (("gpu", _gpu_fixture()), ("cpu", _cpu_fixture())):
        (tmp_path / f"{name}.json").write_text(json.dumps(fixture))
        png = tmp_path / f"{name}.png"
        plot_file(tmp_path / f"{name}.json", png)
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    (tmp_path / "bad.json").write_text(json.dumps({"kind": "nope"}))
    with pytest.raises(ValueError, match="kind 'nope'"):
        plot_file(tmp_path / "bad.json", tmp_path / "bad.png")


def test_markdown_tables_carry_the_ratios():
    from plot_bench import markdown_cpu, markdown_gpu

    gpu = markdown_gpu(_gpu_fixture()).splitlines()
    assert gpu[0] == "| robot | algorithm | B=1 | B=1,024 | B=65,536 |"
    assert len(gpu) == 2 + 2 * 2 and all(row.count("(3.00x)") == 3 for row in gpu[2:])
    cpu = markdown_cpu(_cpu_fixture()).splitlines()
    assert len(cpu) == 2 + 2 * 2 * 2
    assert cpu[2] == "| iiwa14 | aba | 1 | 150 | 100 (1.50x) | 100 (1.50x) |"
