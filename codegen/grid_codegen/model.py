"""The immutable robot model every emitter and the reference oracle read.

Conventions (Pinocchio's, so results compare index for index):

* One body per moving joint. Links welded by fixed joints are merged into the body
  of their nearest moving ancestor, their inertia composed in that body's frame.
* A body's frame is its joint frame: the child frame of the joint's URDF origin.
* `Joint.placement` is the constant transform from the parent body's frame to the
  joint frame, as `(R, p)` with `x_parent = R @ x_joint + p`.
* Spatial vectors are ordered `[linear; angular]` (Pinocchio's order).
* A floating base adds a free-flyer root joint (`root_joint`) whose configuration
  is `[p(3), quat xyzw(4)]` and whose tangent is `[v_lin, omega]` in the local frame.
* `continuous` joints are revolute joints without limits whose configuration is the
  angle itself (nq = nv = 1), unlike Pinocchio's (cos, sin) encoding.
* A spherical (ball) joint is Pinocchio's `JointModelSpherical`: configuration a
  quaternion `[x, y, z, w]` (nq = 4), tangent the angular velocity in the local frame
  (nv = 3, `S = [0; 1]`). A planar joint is Pinocchio's `JointModelPlanar`: the xy
  plane of the joint frame, configuration `[x, y, cos t, sin t]` (nq = 4), tangent
  `[v_x, v_y, w_z]` in the local frame (nv = 3).
* `coupling` (a `grid_codegen.coupling.MimicCoupling`, or None) ties mimic joints to
  their leaders (`register_robot(mimic=True)`): the joints, their `idx_q`/`idx_v` and
  `nq`/`nv` stay those of the independent reading, and `reduced_nq`/`reduced_nv` count
  the independent coordinates the kernels take.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np

GRAVITY = -9.81
"""The default signed gravitational acceleration along world z (m/s^2), Pinocchio's; every
surface (reference, handles, kernels) takes `gravity=` with this default."""


class JointType(str, Enum):
    REVOLUTE = "revolute"
    PRISMATIC = "prismatic"
    FREE_FLYER = "free_flyer"
    SPHERICAL = "spherical"
    PLANAR = "planar"

    @property
    def nq(self) -> int:
        return _NQ.get(self, 1)

    @property
    def nv(self) -> int:
        return _NV.get(self, 1)

    @property
    def scalar(self) -> bool:
        """One coordinate that adds along the tangent (revolute, prismatic)."""
        return self in (JointType.REVOLUTE, JointType.PRISMATIC)


_NQ = {JointType.FREE_FLYER: 7, JointType.SPHERICAL: 4, JointType.PLANAR: 4}
_NV = {JointType.FREE_FLYER: 6, JointType.SPHERICAL: 3, JointType.PLANAR: 3}


def _frozen(a: np.ndarray) -> np.ndarray:
    out = np.array(a, dtype=np.float64)
    out.setflags(write=False)
    return out


SNAP_TOLERANCE = 1e-12
"""Round-off the model removes: a rotation entry within this of -1, 0 or +1 becomes that
value (an rpy of pi/2 gives cos = 6e-17, not 0), a translation or centre-of-mass
coordinate below it (in metres) becomes 0, and an entry of a rotational inertia below it
times the largest entry of that inertia becomes 0. The generated code then folds these
exact zeros and ones away instead of multiplying by 6e-17; the change is far below any
physical tolerance and the reference oracle reads the same snapped model."""


def _snap_unit(a: np.ndarray) -> np.ndarray:
    """Entries within SNAP_TOLERANCE of -1, 0 or 1 snapped to it (rotations, axes)."""
    a = np.array(a, dtype=np.float64)
    nearest = np.round(a)
    snap = (np.abs(a - nearest) < SNAP_TOLERANCE) & (np.abs(nearest) <= 1.0)
    a[snap] = nearest[snap]
    return a + 0.0  # no negative zeros


def _snap_small(a: np.ndarray, scale: float = 1.0) -> np.ndarray:
    a = np.array(a, dtype=np.float64)
    a[np.abs(a) < SNAP_TOLERANCE * scale] = 0.0
    return a + 0.0


@dataclass(frozen=True)
class Placement:
    """A rigid transform `x_parent = R @ x_child + p`."""

    R: np.ndarray
    p: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "R", _frozen(_snap_unit(self.R)))
        object.__setattr__(self, "p", _frozen(_snap_small(self.p)))

    @staticmethod
    def identity() -> Placement:
        return Placement(np.eye(3), np.zeros(3))

    def compose(self, other: Placement) -> Placement:
        """`self * other`: first `other`, then `self`."""
        return Placement(self.R @ other.R, self.R @ other.p + self.p)

    def as_matrix(self) -> np.ndarray:
        T = np.eye(4)
        T[:3, :3] = self.R
        T[:3, 3] = self.p
        return T


@dataclass(frozen=True)
class Inertia:
    """Mass, centre of mass and rotational inertia about the centre of mass."""

    mass: float
    com: np.ndarray
    inertia_com: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "com", _frozen(_snap_small(self.com)))
        inertia = np.array(self.inertia_com, dtype=np.float64)
        scale = float(np.abs(inertia).max()) if inertia.size else 0.0
        object.__setattr__(self, "inertia_com", _frozen(_snap_small(inertia, scale)))

    @staticmethod
    def zero() -> Inertia:
        return Inertia(0.0, np.zeros(3), np.zeros((3, 3)))

    def transformed(self, placement: Placement) -> Inertia:
        """This inertia (given in a child frame) expressed in the parent frame."""
        R = placement.R
        return Inertia(self.mass, R @ self.com + placement.p, R @ self.inertia_com @ R.T)

    def __add__(self, other: Inertia) -> Inertia:
        # Parallel-axis theorem about the combined centre of mass.
        mass = self.mass + other.mass
        if mass == 0.0:
            return Inertia(0.0, np.zeros(3), self.inertia_com + other.inertia_com)
        com = (self.mass * self.com + other.mass * other.com) / mass
        total = np.zeros((3, 3))
        for part in (self, other):
            d = part.com - com
            total += part.inertia_com + part.mass * (d @ d * np.eye(3) - np.outer(d, d))
        return Inertia(mass, com, total)

    def dynamic_parameters(self) -> np.ndarray:
        """Pinocchio's 10 dynamic parameters about the frame origin:
        `[m, m*cx, m*cy, m*cz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]`."""
        c = self.com
        I0 = self.inertia_com + self.mass * (c @ c * np.eye(3) - np.outer(c, c))
        mc = self.mass * c
        return np.array([self.mass, *mc, I0[0, 0], I0[0, 1], I0[1, 1],
                         I0[0, 2], I0[1, 2], I0[2, 2]])

    def spatial_matrix(self) -> np.ndarray:
        """The 6x6 spatial inertia about the frame origin, `[linear; angular]` order."""
        m, c = self.mass, self.com
        cx = skew(c)
        out = np.zeros((6, 6))
        out[:3, :3] = m * np.eye(3)
        out[:3, 3:] = -m * cx
        out[3:, :3] = m * cx
        out[3:, 3:] = self.inertia_com - m * cx @ cx
        return out


def skew(v: np.ndarray) -> np.ndarray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


@dataclass(frozen=True)
class JointLimits:
    lower: float = -np.inf
    upper: float = np.inf
    effort: float = np.inf
    velocity: float = np.inf


@dataclass(frozen=True)
class Mimic:
    """A `<mimic>` tag: `q = multiplier * q[joint] + offset` (enforced only when the model
    is parsed with `mimic=True`: `RobotModel.coupling`)."""

    joint: str
    multiplier: float = 1.0
    offset: float = 0.0


@dataclass(frozen=True)
class Joint:
    """A moving joint; its index is the index of the body it carries."""

    name: str
    type: JointType
    parent: int  # parent body index, -1 for the world
    placement: Placement  # parent body frame -> joint frame (constant part)
    axis: np.ndarray  # unit axis in the joint frame (zeros for a free flyer)
    idx_q: int
    idx_v: int
    limits: JointLimits = field(default_factory=JointLimits)
    damping: float = 0.0
    friction: float = 0.0
    mimic: Mimic | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "axis", _frozen(_snap_unit(self.axis)))

    @property
    def nq(self) -> int:
        return self.type.nq

    @property
    def nv(self) -> int:
        return self.type.nv

    def motion_subspace(self) -> np.ndarray:
        """`S`, the (6, nv) motion subspace in the joint frame, `[linear; angular]`."""
        if self.type is JointType.FREE_FLYER:
            return np.eye(6)
        if self.type is JointType.SPHERICAL:
            return np.vstack([np.zeros((3, 3)), np.eye(3)])
        if self.type is JointType.PLANAR:
            S = np.zeros((6, 3))
            S[0, 0] = S[1, 1] = S[5, 2] = 1.0
            return S
        S = np.zeros((6, 1))
        if self.type is JointType.REVOLUTE:
            S[3:, 0] = self.axis
        else:
            S[:3, 0] = self.axis
        return S


@dataclass(frozen=True)
class Body:
    name: str  # the URDF link the body is named after
    inertia: Inertia  # composed with every link welded to it, in the body frame


@dataclass(frozen=True)
class Frame:
    """A named frame fixed to a body: every URDF link, and every fixed joint."""

    name: str
    kind: str  # "link" or "fixed_joint"
    body: int  # -1 when welded to the world
    placement: Placement  # body frame -> this frame


@dataclass(frozen=True)
class RobotModel:
    """The robot: joints and bodies in the public (Pinocchio) order, plus topology.

    Immutable: emitters and the oracle read it, nothing writes it.
    """

    name: str
    source: str
    joints: tuple[Joint, ...]
    bodies: tuple[Body, ...]
    frames: tuple[Frame, ...]
    floating_base: bool
    coupling: object = None  # grid_codegen.coupling.MimicCoupling | None

    @property
    def nb(self) -> int:
        return len(self.bodies)

    @property
    def reduced_nq(self) -> int:
        """The configuration width the kernels and handles take: `nq` less the coupled
        (mimic) coordinates."""
        return self.nq if self.coupling is None else self.coupling.nq

    @property
    def reduced_nv(self) -> int:
        """The tangent width the kernels and handles take (`nv` without a coupling)."""
        return self.nv if self.coupling is None else self.coupling.nv

    @property
    def nq(self) -> int:
        return sum(j.nq for j in self.joints)

    @property
    def nv(self) -> int:
        return sum(j.nv for j in self.joints)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def body_names(self) -> tuple[str, ...]:
        return tuple(b.name for b in self.bodies)

    @property
    def parents(self) -> tuple[int, ...]:
        return tuple(j.parent for j in self.joints)

    @property
    def children(self) -> tuple[tuple[int, ...], ...]:
        kids: list[list[int]] = [[] for _ in self.joints]
        for i, parent in enumerate(self.parents):
            if parent >= 0:
                kids[parent].append(i)
        return tuple(tuple(k) for k in kids)

    @property
    def leaves(self) -> tuple[int, ...]:
        return tuple(i for i, k in enumerate(self.children) if not k)

    @property
    def depths(self) -> tuple[int, ...]:
        """Tree depth of each body (roots at 0)."""
        out: list[int] = []
        for parent in self.parents:
            out.append(0 if parent < 0 else out[parent] + 1)
        return tuple(out)

    @property
    def levels(self) -> tuple[tuple[int, ...], ...]:
        """Bodies grouped by depth: the level-synchronous (BFS) schedule."""
        depths = self.depths
        if not depths:
            return ()
        return tuple(tuple(i for i, d in enumerate(depths) if d == level)
                     for level in range(max(depths) + 1))

    @property
    def subtrees(self) -> tuple[tuple[int, ...], ...]:
        """Each body followed by all its descendants (in index order)."""
        out: list[list[int]] = [[i] for i in range(self.nb)]
        for i in reversed(range(self.nb)):
            parent = self.parents[i]
            if parent >= 0:
                out[parent].extend(out[i])
        return tuple(tuple(sorted(s)) for s in out)

    def ancestors(self, body: int) -> tuple[int, ...]:
        """`body` and every ancestor up to the root, nearest first."""
        chain = []
        while body >= 0:
            chain.append(body)
            body = self.parents[body]
        return tuple(chain)

    def joint_index(self, name: str) -> int:
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise KeyError(f"{self.name} has no moving joint '{name}'; joints are "
                           f"{', '.join(self.joint_names)}") from None

    def frame(self, name: str) -> Frame:
        for f in self.frames:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no frame '{name}'")

    def end_effector_frames(self, ee_joint_names: tuple[str, ...] | None = None
                            ) -> tuple[Frame, ...]:
        """The end-effector frames: the leaf bodies' frames by default, otherwise the
        named frames (`resolve_frame`: fixed joints, moving joints, links), in order."""
        if not ee_joint_names:
            return tuple(Frame(self.bodies[i].name, "body", i, Placement.identity())
                         for i in self.leaves)
        return tuple(self.resolve_frame(name) for name in ee_joint_names)

    def resolve_frame(self, name: str) -> Frame:
        """A frame by the name a robotics user gives it: a fixed joint's frame, a moving
        joint's (its child body's frame), or a link's (URDF names joints and links apart,
        and a name that is both is taken as the joint). KeyError lists the choices."""
        for f in self.frames:
            if f.kind == "fixed_joint" and f.name == name:
                return f
        if name in self.joint_names:
            return Frame(name, "body", self.joint_index(name), Placement.identity())
        for f in self.frames:
            if f.kind == "link" and f.name == name:
                return f
        fixed = [f.name for f in self.frames if f.kind == "fixed_joint"]
        links = [f.name for f in self.frames if f.kind == "link"]
        raise KeyError(f"{self.name} has no frame {name!r}; name a fixed joint "
                       f"({listing(fixed)}), a moving joint ({listing(self.joint_names)}) "
                       f"or a link ({listing(links)})")


def listing(names, limit: int = 40) -> str:
    """Names for an error message: all of them, or the first `limit` and the count."""
    names = list(names)
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown}, ... ({len(names)} in all)"
