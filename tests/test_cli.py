"""The `grid-rbd` command, run through its console entry point (the script pip installs
beside the interpreter), each case in a store of its own temporary folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import grid_rbd
import grid_rbd.reference as reference
from grid_rbd.data import bundled_urdf

SCRIPT = Path(sys.executable).parent / "grid-rbd"
ALGORITHMS = "inverse_dynamics,forward_dynamics"  # a small artifact: a fast compile


def run(*args: str, check: int | None = 0) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.is_file(), (f"no console script at {SCRIPT}: install the project "
                              "(tools/setup.sh, or pip install -e .)")
    env = {k: v for k, v in os.environ.items() if k != "GRID_RBD_CACHE_DIR"}
    result = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env,
                            timeout=300)
    if check is not None:
        assert result.returncode == check, (result.returncode, result.stdout, result.stderr)
    return result


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store holding iiwa14 (CPU, two algorithms), registered through the command."""
    root = tmp_path_factory.mktemp("cli_store")
    result = run("register", "iiwa14", "--cache-dir", str(root), "--device", "cpu",
                 "--algorithms", ALGORITHMS, "--progress", "log")
    assert "registered 'iiwa14': built" in result.stdout
    for phase in ("[1/4] parse", "[2/4] generate", "[3/4] compile", "[4/4] publish"):
        assert phase in result.stderr
    return root


def test_help_everywhere_and_no_command_is_usage():
    top = run("--help")
    for command in ("register", "info", "ls", "rm", "gc", "verify", "bench"):
        assert command in top.stdout
        assert f"usage: grid-rbd {command}" in run(command, "--help").stdout
    bare = run(check=2)
    assert "usage: grid-rbd" in bare.stdout
    assert run("--version").stdout.strip() == f"grid-rbd {grid_rbd.__version__}"


def test_python_dash_m_is_the_same_command():
    result = subprocess.run([sys.executable, "-m", "grid_rbd", "--version"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.strip() == f"grid-rbd {grid_rbd.__version__}"


def test_register_again_is_a_store_hit(store):
    result = run("register", "iiwa14", "--cache-dir", str(store), "--device", "cpu",
                 "--algorithms", ALGORITHMS)
    assert "found in the store" in result.stdout
    assert "[3/4] compile" not in result.stderr


def test_info_reports_the_registered_robot(store):
    facts = json.loads(run("info", "iiwa14", "--cache-dir", str(store), "--json").stdout)
    ref = reference.load(bundled_urdf("iiwa14"))
    assert (facts["nq"], facts["nv"], facts["nb"]) == (ref.nq, ref.nv, ref.nb)
    assert tuple(facts["joint_names"]) == tuple(ref.joint_names)
    assert facts["algorithms"] == ALGORITHMS.split(",")
    assert facts["backend"] == "cpu" and facts["dtype"] == "float32"
    assert Path(facts["entry"]).is_dir() and facts["entry_bytes"] > 0
    assert "iiwa_link_7" in [f["name"] for f in facts["frames"]]
    text = run("info", "iiwa14", "--cache-dir", str(store)).stdout
    assert "nq=7 nv=7 nb=7" in text and facts["entry"] in text


def test_info_of_an_unregistered_urdf_compiles_nothing(tmp_path):
    facts = json.loads(run("info", str(bundled_urdf("iiwa14")), "--floating-base",
                           "--cache-dir", str(tmp_path), "--json").stdout)
    assert facts["registered"] is False
    assert (facts["nq"], facts["nv"]) == (7 + 7, 6 + 7)
    assert not (tmp_path / "store").exists() or not any((tmp_path / "store").iterdir())


def test_ls_lists_the_entry(store):
    rows = json.loads(run("ls", "--cache-dir", str(store), "--json").stdout)
    assert [r["name"] for r in rows] == ["iiwa14"] and rows[0]["present"]
    assert "iiwa14" in run("ls", "--cache-dir", str(store)).stdout


def test_bench_times_every_requested_point_and_plots(store, tmp_path):
    out, png = tmp_path / "bench.json", tmp_path / "bench.png"
    result = run("bench", "iiwa14", "--cache-dir", str(store), "--batch", "1,3",
                 "--seconds", "0.01", "--json", str(out), "--plot", str(png))
    rows = json.loads(out.read_text())
    assert [(r["algorithm"], r["batch"]) for r in rows] == [
        (a, b) for a in ALGORITHMS.split(",") for b in (1, 3)]
    for r in rows:
        assert r["reps"] >= 5 and r["seconds_per_call"] > 0
        assert r["ns_per_item"] == pytest.approx(r["seconds_per_call"] / r["batch"] * 1e9)
    assert "forward_dynamics" in result.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_usage_errors_say_what_to_do(store, tmp_path):
    unknown = run("info", "no_such_robot", "--cache-dir", str(store), check=2)
    assert "grid-rbd ls" in unknown.stderr
    missing = run("register", "arm", str(tmp_path / "absent.urdf"), "--cache-dir",
                  str(store), check=2)
    assert "no URDF at" in missing.stderr
    assert "not registered: ghost" in run("rm", "ghost", "--cache-dir", str(store),
                                          check=2).stderr
    bad = run("bench", "iiwa14", "--cache-dir", str(store), "--batch", "0", check=2)
    assert "--batch sizes must lie in" in bad.stderr
    broken = tmp_path / "broken.urdf"
    broken.write_text("<robot name='x'><link name='a'/><joint name='j' type='revolute'>"
                      "<parent link='a'/><child link='missing'/></joint></robot>")
    refused = run("info", str(broken), check=1)
    assert "fix the URDF" in refused.stderr and "Traceback" not in refused.stderr


def test_verify_finds_damage_quarantines_and_register_rebuilds(tmp_path):
    root = tmp_path / "store"
    run("register", "iiwa14", "--cache-dir", str(root), "--device", "cpu", "--algorithms",
        "inverse_dynamics", "--progress", "off")
    assert "all sound" in run("verify", "--cache-dir", str(root)).stdout
    [entry] = (root / "store").iterdir()
    artifact = entry / "robot.so"
    data = bytearray(artifact.read_bytes())
    data[len(data) // 2] ^= 0xFF
    artifact.chmod(0o700)
    artifact.write_bytes(bytes(data))
    damaged = run("verify", "iiwa14", "--cache-dir", str(root), "--quarantine", check=1)
    assert f"DAMAGED store/{entry.name}" in damaged.stdout
    assert not entry.exists() and any((root / "quarantine").iterdir())
    rebuilt = run("register", "iiwa14", "--cache-dir", str(root), "--device", "cpu",
                  "--algorithms", "inverse_dynamics")
    assert "built" in rebuilt.stdout
    assert "all sound" in run("verify", "--cache-dir", str(root)).stdout
    # The rebuilt artifact computes what the reference does.
    handle = grid_rbd.get_robot("iiwa14", cache_dir=root)
    ref = reference.load(bundled_urdf("iiwa14"))
    q = np.random.default_rng(1).uniform(-2, 2, (3, ref.nq))
    qd = np.zeros_like(q)
    tau = handle.inverse_dynamics(q.astype(np.float32), qd.astype(np.float32))
    np.testing.assert_allclose(tau, ref.inverse_dynamics(q, qd, np.zeros_like(q)),
                               rtol=2e-4, atol=2e-4 * np.abs(tau).max())
    handle.close()


def test_rm_and_gc_delete_only_what_no_name_reaches(tmp_path):
    root = tmp_path / "store"
    for name in ("arm_a", "arm_b"):
        run("register", name, str(bundled_urdf("iiwa14")), "--cache-dir", str(root),
            "--device", "cpu", "--algorithms", "inverse_dynamics", "--progress", "off")
    [shared] = (root / "store").iterdir()  # one entry, two names
    orphan = root / "store" / ("0" * 64)
    orphan.mkdir(mode=0o700)
    (orphan / "robot.so").write_bytes(b"not an artifact")
    os.utime(orphan, (1, 1))  # old enough for gc's default age limit
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("not the store's")
    planted = root / "store" / ("1" * 64)
    planted.symlink_to(outside)
    os.utime(planted, (1, 1), follow_symlinks=False)
    dry = run("gc", "--cache-dir", str(root), "--dry-run")
    assert "would delete 2 entries" in dry.stdout and orphan.exists()
    run("gc", "--cache-dir", str(root))
    assert not orphan.exists() and shared.exists()
    assert not planted.is_symlink() and (outside / "precious").is_file()  # not followed
    run("rm", "arm_a", "--cache-dir", str(root))
    assert shared.exists()  # arm_b still refers to it
    gone = run("rm", "arm_b", "--cache-dir", str(root))
    assert "deleted 1 entries" in gone.stdout and not shared.exists()
    assert not any((root / "bykey").iterdir())
    assert json.loads(run("ls", "--cache-dir", str(root), "--json").stdout) == []
