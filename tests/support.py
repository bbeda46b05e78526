"""Shared test support: the robot set, Pinocchio twins of our models, random states and
scale-aware comparisons."""

from __future__ import annotations

import os
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from grid_codegen.model import JointType, RobotModel

REPO = Path(__file__).resolve().parent.parent


def cuda_available() -> bool:
    """Whether the runtime finds a usable CUDA GPU (the `gpu`-tagged tests skip otherwise)."""
    try:
        import grid_rbd._register
        return grid_rbd._register.resolve_device("cuda") == "cuda"
    except Exception:  # noqa: BLE001 - any failure to find a GPU means "skip"
        return False


def example_robot_data_dir() -> Path:
    """Where the `example-robot-data` wheel installs its robots (a cmeel prefix), or
    `$GRID_RBD_ROBOT_DATA` (a copy of its `robots/` folder, e.g. on the GPU machine)."""
    override = os.environ.get("GRID_RBD_ROBOT_DATA")
    if override:
        return Path(override)
    for key in ("purelib", "platlib"):
        root = Path(sysconfig.get_paths()[key]) / "cmeel.prefix/share/example-robot-data/robots"
        if root.is_dir():
            return root
    raise FileNotFoundError("example-robot-data is not installed in this interpreter; "
                            "run tools/setup.sh")


@dataclass(frozen=True)
class TestRobot:
    name: str
    relative_path: str  # under example-robot-data's robots/, or absolute for in-tree ones
    floating_base: bool

    @property
    def path(self) -> Path:
        if self.name == "iiwa14":
            return REPO / "robots/iiwa14/iiwa14.urdf"
        return example_robot_data_dir() / self.relative_path


ROBOTS = {r.name: r for r in (
    TestRobot("iiwa14", "", False),
    TestRobot("panda", "panda_description/urdf/panda.urdf", False),
    TestRobot("ur5", "ur_description/urdf/ur5_robot.urdf", False),
    TestRobot("hyq", "hyq_description/robots/hyq_no_sensors.urdf", False),
    TestRobot("solo12", "solo_description/robots/solo12.urdf", True),
    TestRobot("go2", "go2_description/urdf/go2.urdf", True),
    TestRobot("anymal_c", "anymal_c_simple_description/urdf/anymal.urdf", True),
    TestRobot("g1", "g1_description/urdf/g1_29dof_rev_1_0.urdf", True),
)}


def robot_available(robot: str) -> bool:
    """Whether ROBOTS[robot]'s URDF is on this machine (example-robot-data robots need
    the package, or GRID_RBD_ROBOT_DATA)."""
    try:
        return ROBOTS[robot].path.is_file()
    except FileNotFoundError:
        return False


def pinocchio_model(robot: TestRobot):
    import pinocchio as pin
    if robot.floating_base:
        return pin.buildModelFromUrdf(str(robot.path), pin.JointModelFreeFlyer())
    return pin.buildModelFromUrdf(str(robot.path))


@dataclass(frozen=True)
class States:
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    u: np.ndarray
    f_ext: np.ndarray


def random_states(model: RobotModel, batch: int, seed: int = 0, max_velocity: float = 10.0
                  ) -> States:
    """Random configurations (unit quaternions on a free flyer, angles in [-pi, pi]),
    velocities up to `max_velocity`, large accelerations, torques and external forces."""
    rng = np.random.default_rng(seed)
    q = np.zeros((batch, model.nq))
    for joint in model.joints:
        if joint.type is JointType.FREE_FLYER:
            q[:, joint.idx_q:joint.idx_q + 3] = rng.uniform(-2.0, 2.0, (batch, 3))
            quat = rng.normal(size=(batch, 4))
            q[:, joint.idx_q + 3:joint.idx_q + 7] = quat / np.linalg.norm(quat, axis=1,
                                                                          keepdims=True)
        elif joint.type is JointType.REVOLUTE:
            q[:, joint.idx_q] = rng.uniform(-np.pi, np.pi, batch)
        else:
            q[:, joint.idx_q] = rng.uniform(-0.5, 0.5, batch)
    return States(
        q=q,
        qd=rng.uniform(-max_velocity, max_velocity, (batch, model.nv)),
        qdd=rng.uniform(-30.0, 30.0, (batch, model.nv)),
        u=rng.uniform(-50.0, 50.0, (batch, model.nv)),
        f_ext=rng.uniform(-20.0, 20.0, (batch, 6 * model.nb)),
    )


def scaled_error(actual: np.ndarray, expected: np.ndarray) -> float:
    """Largest per-item error relative to that item's magnitude (floor 1e-12)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    batch = expected.shape[0]
    diff = np.abs(actual - expected).reshape(batch, -1).max(axis=1)
    scale = np.maximum(np.abs(expected).reshape(batch, -1).max(axis=1), 1e-12)
    return float((diff / scale).max())


def assert_scaled_close(actual: np.ndarray, expected: np.ndarray, tol: float,
                        what: str) -> None:
    err = scaled_error(actual, expected)
    assert err <= tol, f"{what}: scale-aware relative error {err:.3e} exceeds {tol:.0e}"


@dataclass(frozen=True)
class PinocchioCase:
    """One robot's reference oracle beside its Pinocchio model, with random states."""

    ref: object  # grid_rbd.reference.ReferenceRobot
    pm: object  # pinocchio.Model
    pd: object  # pinocchio.Data
    states: States

    def __iter__(self):
        return iter((self.ref, self.pm, self.pd, self.states))


def pinocchio_case(name: str, batch: int, seed: int) -> PinocchioCase:
    import grid_rbd.reference as reference
    robot = ROBOTS[name]
    ref = reference.load(robot.path, floating_base=robot.floating_base)
    pm = pinocchio_model(robot)
    return PinocchioCase(ref, pm, pm.createData(), random_states(ref.model, batch, seed=seed))


def pinocchio_forces(f_ext_row: np.ndarray, nb: int) -> list:
    """One row of our `f_ext` as Pinocchio's per-joint force list (the universe first)."""
    import pinocchio as pin
    return [pin.Force.Zero()] + [pin.Force(f_ext_row[6 * i:6 * i + 6]) for i in range(nb)]


def symmetric_from_upper(upper: np.ndarray) -> np.ndarray:
    """Pinocchio fills only the upper triangle of M and Minv."""
    return np.triu(upper) + np.triu(upper, 1).T
