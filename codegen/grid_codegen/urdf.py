"""URDF -> `RobotModel`: read links and joints, check them, merge fixed joints, and lay
the tree out in Pinocchio's joint order (depth first from the root, each link's child
joints visited in the byte order of their names, as urdfdom stores them).

The parser is iterative (no recursion, so a chain of any depth parses) and linear in the
size of the document. Robots as they come:

* A `<mimic>` joint is read as an independent joint, as Pinocchio does by default; one
  warning per robot lists them. With `mimic=True` it follows its leader instead
  (`q = multiplier * q_leader + offset`, `RobotModel.coupling`, reduced coordinates):
  mimic joints and leaders must be revolute, continuous or prismatic, the leader a
  moving joint that mimics nothing itself (no chains, no cycles).
* Joint types: revolute, continuous (an unbounded revolute whose coordinate is the
  angle: nq = nv = 1, not Pinocchio's (cos, sin) pair), prismatic, fixed, `floating` (a
  free flyer, as Pinocchio reads it: `[p, quat xyzw]`), `planar` (Pinocchio's
  JointModelPlanar: the xy plane of the joint frame, `[x, y, cos, sin]`; an `<axis>`,
  the plane's normal, must then be z) and the extension `spherical` (alias `ball`, as
  Drake's and SDFormat-derived parsers write it; urdfdom has no ball joint): Pinocchio's
  JointModelSpherical, a quaternion `[x, y, z, w]` with the local angular velocity as
  its tangent. The joint types of docs/joints.md.
* A link inertia with a negative principal moment is round-off when the moment is
  within 1e-12 of max(1, its largest entry) (kept as written); it is clamped to the
  nearest positive semi-definite inertia (the negative moment set to zero), with one
  warning naming the link, when the moment is at most `INERTIA_CLAMP_TOLERANCE` times the
  trace of the body the link is part of (the link and every link welded to it, about
  their centre of mass: the inertia the dynamics use); larger violations are errors.
* A model without a degree of freedom (a fixed base whose joints are all fixed) is
  refused: there is nothing to compute, and every kernel would have zero-width arrays.
* Lengths beyond `MAX_LENGTH`, masses beyond `MAX_MASS` and inertias beyond `MAX_INERTIA`
  are refused (no robot is that large; the dynamics of such a model overflow a double).
"""

from __future__ import annotations

import gc
import logging
import math
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import numpy as np

from grid_codegen.model import (
    Body,
    Frame,
    Inertia,
    Joint,
    JointLimits,
    JointType,
    Mimic,
    Placement,
    RobotModel,
)
from grid_codegen.urdf_xml import XmlDocument, parse_xml, quoted

log = logging.getLogger(__name__)

INERTIA_CLAMP_TOLERANCE = 1e-3
"""The largest negative principal moment of a link inertia that is clamped rather than
refused, relative to the trace of its body's composite inertia (see the module doc)."""

# Physical plausibility, with vast headroom: beyond these a model is a typo or an attack,
# and its dynamics would overflow a double (m * c^2 at c = 1e200 does at parse time).
MAX_LENGTH = 1e6
"""The largest |coordinate| of an origin's xyz accepted, in metres."""
MAX_MASS = 1e9
"""The largest link mass accepted, in kg."""
MAX_INERTIA = 1e12
"""The largest |entry| of a link's rotational inertia accepted, in kg m^2."""

_ROUNDOFF = 1e-12  # a negative moment this small (relative to max(1, |I|)) is round-off
_MOVING = {"revolute": JointType.REVOLUTE, "continuous": JointType.REVOLUTE,
           "prismatic": JointType.PRISMATIC, "floating": JointType.FREE_FLYER,
           "planar": JointType.PLANAR, "spherical": JointType.SPHERICAL,
           "ball": JointType.SPHERICAL}
_KINDS = "revolute, continuous, prismatic, fixed, floating, planar or spherical"
_IDENTITY = Placement.identity()
_ZERO3 = (0.0, 0.0, 0.0)
_EYE3 = np.eye(3)
_WORLD = -1


def rpy_to_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF's fixed-axis rpy: `R = Rz(yaw) @ Ry(pitch) @ Rx(roll)`."""
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


@dataclass(frozen=True)
class _UrdfJoint:
    name: str
    kind: str
    parent: str
    child: str
    origin: Placement
    axis: np.ndarray
    limits: JointLimits
    damping: float
    friction: float
    mimic: Mimic | None


@dataclass(frozen=True)
class _LinkInertia:
    """A link's inertia in its own frame, and when it has a negative principal moment
    beyond round-off, the moments, their axes and the element to blame."""

    inertia: Inertia
    moments: np.ndarray | None = None  # ascending principal moments (only when bad)
    axes: np.ndarray | None = None  # their unit axes, as columns, in the link frame
    element: ET.Element | None = None


def _origin(doc: XmlDocument, parent: ET.Element, what: str) -> Placement:
    element = parent.find("origin")
    if element is None:
        return _IDENTITY
    xyz = doc.floats(element, "xyz", what, 3, _ZERO3)
    if not max(map(abs, xyz)) <= MAX_LENGTH:
        raise doc.error(element, what, f"origin xyz {' '.join(f'{v:g}' for v in xyz)} lies "
                        f"beyond {MAX_LENGTH:g} m (lengths are in metres)")
    rpy = doc.floats(element, "rpy", what, 3, _ZERO3)
    if rpy == _ZERO3:
        return _IDENTITY if xyz == _ZERO3 else Placement(_EYE3, xyz)
    return Placement(rpy_to_matrix(*rpy), xyz)


def _smallest_moment(ixx: float, ixy: float, ixz: float, iyy: float, iyz: float,
                     izz: float) -> float:
    """The smallest eigenvalue of the symmetric 3x3 matrix, in closed form (the
    trigonometric solution of its characteristic cubic); NaN when it overflows."""
    off = ixy * ixy + ixz * ixz + iyz * iyz
    if off == 0.0:
        return min(ixx, iyy, izz)
    mean = (ixx + iyy + izz) / 3.0
    a, b, c = ixx - mean, iyy - mean, izz - mean
    p = math.sqrt((a * a + b * b + c * c + 2.0 * off) / 6.0)
    if not math.isfinite(p) or p == 0.0:
        return math.nan
    a, b, c, d, e, f = a / p, b / p, c / p, ixy / p, ixz / p, iyz / p
    half_det = (a * (b * c - f * f) - d * (d * c - f * e) + e * (d * f - b * e)) / 2.0
    phi = math.acos(max(-1.0, min(1.0, half_det))) / 3.0
    return mean + 2.0 * p * math.cos(phi + 2.0 * math.pi / 3.0)


def _read_inertia(doc: XmlDocument, link: ET.Element, name: str) -> _LinkInertia:
    inertial = link.find("inertial")
    what = f"link '{name}'"
    if inertial is None:
        return _LinkInertia(Inertia.zero())
    frame = _origin(doc, inertial, what)
    mass_el = inertial.find("mass")
    mass = doc.number(mass_el, "value", what) if mass_el is not None else 0.0
    if mass < 0.0:
        raise doc.error(mass_el, what, f"mass {mass} is negative")
    if mass > MAX_MASS:
        raise doc.error(mass_el, what, f"mass {mass:g} is beyond {MAX_MASS:g} kg")
    inertia_el = inertial.find("inertia")
    if inertia_el is None:
        return _LinkInertia(Inertia(mass, frame.p, np.zeros((3, 3))))
    number = doc.number
    ixx, ixy, ixz = (number(inertia_el, "ixx", what, 0.0), number(inertia_el, "ixy", what, 0.0),
                     number(inertia_el, "ixz", what, 0.0))
    iyy, iyz, izz = (number(inertia_el, "iyy", what, 0.0), number(inertia_el, "iyz", what, 0.0),
                     number(inertia_el, "izz", what, 0.0))
    I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    scale = max(1.0, abs(ixx), abs(ixy), abs(ixz), abs(iyy), abs(iyz), abs(izz))
    if scale > MAX_INERTIA:
        raise doc.error(inertia_el, what, f"an inertia entry of {scale:g} is beyond "
                        f"{MAX_INERTIA:g} kg m^2")
    smallest = _smallest_moment(ixx, ixy, ixz, iyy, iyz, izz)
    # The closed form is exact to a few ulps of the largest entry; only a matrix near
    # the boundary (or one that overflowed it) needs the careful decomposition.
    moments = axes = None
    diagonal = ixy == 0.0 and ixz == 0.0 and iyz == 0.0  # exact moments: no decomposition
    if not smallest > 1e-9 * scale and not (diagonal and smallest >= -_ROUNDOFF * scale):
        eigenvalues, eigenvectors = np.linalg.eigh(I)
        if eigenvalues[0] < -_ROUNDOFF * scale:
            moments, axes = eigenvalues, eigenvectors
    if frame is not _IDENTITY and not np.array_equal(frame.R, _EYE3):
        I = frame.R @ I @ frame.R.T
        axes = None if axes is None else frame.R @ axes
    return _LinkInertia(Inertia(mass, frame.p, I), moments, axes, inertia_el)


def _read_joint(doc: XmlDocument, element: ET.Element) -> _UrdfJoint:
    name = doc.name(element, "name", "<joint> name")
    what = f"joint '{name}'"
    kind = element.get("type")
    if kind not in _MOVING and kind != "fixed":
        shown = "none" if kind is None else f"'{kind[:40]}'"
        raise doc.error(element, what, f"unknown joint type {shown}; expected {_KINDS}")
    links = {}
    for role in ("parent", "child"):
        tag = element.find(role)
        if tag is None or tag.get("link") is None:
            raise doc.error(element, what, f"has no <{role} link=...>")
        links[role] = doc.name(tag, "link", f"{what}: <{role}> link")
    axis = np.array([1.0, 0.0, 0.0])
    axis_el = element.find("axis")
    scalar = kind in ("revolute", "continuous", "prismatic")
    if axis_el is not None and scalar:
        axis = _unit_axis(doc, axis_el, what)
    elif not scalar and kind != "fixed":
        if axis_el is not None and kind == "planar":
            normal = _unit_axis(doc, axis_el, what)
            if not np.allclose(normal, (0.0, 0.0, 1.0), atol=1e-12):
                raise doc.error(axis_el, what, "a planar joint moves in the xy plane of its "
                                "frame (Pinocchio's JointModelPlanar): its <axis> (the "
                                f"plane's normal) must be 0 0 1, not {_shown(normal)}; "
                                "rotate the joint's <origin> instead")
        axis = np.zeros(3)
    limits = JointLimits()
    limit_el = element.find("limit")
    if limit_el is not None and not scalar:
        pass  # a multi-dof joint's limits have no scalar meaning; Pinocchio drops them too
    elif limit_el is not None and kind != "continuous":
        limits = JointLimits(*(doc.number(limit_el, k, what, d) for k, d in (
            ("lower", 0.0), ("upper", 0.0), ("effort", 0.0), ("velocity", 0.0))))
    elif limit_el is not None:
        limits = JointLimits(effort=doc.number(limit_el, "effort", what, 0.0),
                             velocity=doc.number(limit_el, "velocity", what, 0.0))
    damping = friction = 0.0
    dynamics = element.find("dynamics")
    if dynamics is not None:
        damping = doc.number(dynamics, "damping", what, 0.0)
        friction = doc.number(dynamics, "friction", what, 0.0)
    mimic = None
    mimic_el = element.find("mimic")
    if mimic_el is not None:
        mimic = Mimic(doc.name(mimic_el, "joint", f"{what}: <mimic> joint"),
                      doc.number(mimic_el, "multiplier", what, 1.0),
                      doc.number(mimic_el, "offset", what, 0.0))
    return _UrdfJoint(name, kind, links["parent"], links["child"], _origin(doc, element, what),
                      axis, limits, damping, friction, mimic)


def _shown(v: np.ndarray) -> str:
    return " ".join(f"{x:.6g}" for x in v)


def _unit_axis(doc: XmlDocument, axis_el: ET.Element, what: str) -> np.ndarray:
    """The unit vector along `<axis xyz>`: scaled by its largest component before the
    norm is taken, so neither 1e200 (overflow) nor 1e-200 (underflow) loses it."""
    axis = np.array(doc.floats(axis_el, "xyz", what, 3, (1.0, 0.0, 0.0)))
    largest = float(np.abs(axis).max())
    if largest == 0.0:
        raise doc.error(axis_el, what, "axis is zero")
    scaled = axis / largest
    return scaled / float(np.linalg.norm(scaled))


def _find_root(doc: XmlDocument, links: dict[str, ET.Element],
               joints: list[_UrdfJoint], joint_elements: list[ET.Element],
               robot: str) -> str:
    parent_joint: dict[str, str] = {}
    for joint, element in zip(joints, joint_elements, strict=True):
        what = f"joint '{joint.name}'"
        for role in ("parent", "child"):
            link = getattr(joint, role)
            if link not in links:
                raise doc.error(element, what, f"{role} link '{link}' does not exist")
        if joint.child in parent_joint:
            raise doc.error(element, what, f"link '{joint.child}' already has parent joint "
                            f"'{parent_joint[joint.child]}' (a link has one parent)")
        parent_joint[joint.child] = joint.name
    roots = [name for name in links if name not in parent_joint]
    if not roots:
        raise doc.error(doc.root, f"robot '{robot}'",
                        "the joints form a cycle: every link has a parent")
    if len(roots) > 1:
        shown = ", ".join(sorted(roots)[:10]) + (", ..." if len(roots) > 10 else "")
        raise doc.error(doc.root, f"robot '{robot}'",
                        f"the tree has {len(roots)} roots ({shown}); expected one")
    return roots[0]


def parse_urdf(urdf: str | os.PathLike | bytes, *, floating_base: bool = False,
               source: str | None = None, mimic: bool = False) -> RobotModel:
    """Parse a URDF (a path, or the document's bytes) into a `RobotModel`.

    mimic: couple each `<mimic>` joint to its leader (`RobotModel.coupling`: reduced
    coordinates); by default they are independent joints, as in Pinocchio.
    Raises `URDFError` naming the file and the element for any defect.
    """
    # Parsing allocates a few objects per element and keeps all of them: the cyclic
    # collector would rescan the growing heap again and again for nothing.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _parse(urdf, floating_base, source, mimic)
    finally:
        if collecting:
            gc.enable()


def _parse(urdf: str | os.PathLike | bytes, floating_base: bool, source: str | None,
           mimic: bool = False) -> RobotModel:
    if isinstance(urdf, bytes):
        data, source = urdf, source or "<urdf string>"
    else:
        source = source or os.fspath(urdf)
        with open(urdf, "rb") as fh:
            data = fh.read()
    doc = parse_xml(data, source)
    if doc.root.tag != "robot":
        raise doc.error(doc.root, f"<{doc.root.tag[:40]}>", "the root element must be <robot>")
    robot_name = (doc.name(doc.root, "name", "<robot> name")
                  if doc.root.get("name") is not None else "robot")

    links: dict[str, ET.Element] = {}
    for element in doc.root.findall("link"):
        name = doc.name(element, "name", "<link> name")
        if name in links:
            raise doc.error(element, f"link '{name}'", "defined twice")
        links[name] = element
    joint_elements = doc.root.findall("joint")
    joints = [_read_joint(doc, element) for element in joint_elements]
    seen: set[str] = set()
    for joint, element in zip(joints, joint_elements, strict=True):
        if joint.name in seen:
            raise doc.error(element, f"joint '{joint.name}'", "defined twice")
        seen.add(joint.name)
    root = _find_root(doc, links, joints, joint_elements, robot_name)
    inertias = {name: _read_inertia(doc, element, name) for name, element in links.items()}

    child_joints: dict[str, list[_UrdfJoint]] = {name: [] for name in links}
    for joint in joints:
        child_joints[joint.parent].append(joint)
    for kids in child_joints.values():
        kids.sort(key=lambda j: j.name.encode())

    builder = _TreeBuilder()
    if floating_base:
        builder.add_body("root_joint", JointType.FREE_FLYER, _WORLD, _IDENTITY, np.zeros(3),
                         root, None)
        top = 0
    else:
        top = _WORLD
    builder.attach_link(root, top, _IDENTITY)
    reached = {root}
    # Depth first, as Pinocchio's parser: a child's whole subtree before its sibling. An
    # explicit stack of (remaining child joints, body, link frame in the body frame).
    stack = [(iter(child_joints[root]), top, _IDENTITY)]
    while stack:
        kids, body, to_link = stack[-1]
        joint = next(kids, None)
        if joint is None:
            stack.pop()
            continue
        reached.add(joint.child)
        placement = joint.origin if to_link is _IDENTITY else to_link.compose(joint.origin)
        if joint.kind == "fixed":
            builder.frames.append(Frame(joint.name, "fixed_joint", body, placement))
            builder.attach_link(joint.child, body, placement)
            stack.append((iter(child_joints[joint.child]), body, placement))
        else:
            child = builder.add_body(joint.name, _MOVING[joint.kind], body, placement,
                                     joint.axis, joint.child, joint)
            builder.attach_link(joint.child, child, _IDENTITY)
            stack.append((iter(child_joints[joint.child]), child, _IDENTITY))

    if len(reached) != len(links):
        lost = sorted(set(links) - reached)
        shown = ", ".join(lost[:10]) + (", ..." if len(lost) > 10 else "")
        raise doc.error(doc.root, f"robot '{robot_name}'",
                        f"the joints form a cycle: links {shown} are not "
                        f"reachable from the root '{root}'")
    body_inertia = _compose_inertias(doc, builder, inertias)
    if not builder.joints:
        raise doc.error(doc.root, f"robot '{robot_name}'",
                        f"has no degree of freedom: every joint of the fixed base "
                        f"'{root}' is fixed (add a moving joint, or use floating_base=True)")
    coupling = None
    if mimic:
        coupling = _coupling(doc, builder.joints,
                             {j.name: (j, e) for j, e in zip(joints, joint_elements,
                                                             strict=True)})
    else:
        _warn_mimics(source, robot_name, joints)
    return RobotModel(robot_name, source, tuple(builder.joints),
                      tuple(Body(n, body_inertia[i]) for i, n in enumerate(builder.body_links)),
                      tuple(builder.frames), floating_base, coupling)


def _coupling(doc: XmlDocument, model_joints: list[Joint],
              by_name: dict[str, tuple[_UrdfJoint, ET.Element]]):
    """The mimic coupling of the tree, every `<mimic>` checked (module doc); None when
    the robot has no mimic joint."""
    from grid_codegen.coupling import build_coupling

    index = {j.name: i for i, j in enumerate(model_joints)}
    mimics: dict[int, tuple[int, float, float]] = {}
    for i, joint in enumerate(model_joints):
        if joint.mimic is None:
            continue
        urdf_joint, element = by_name[joint.name]
        tag = element.find("mimic")
        what = f"joint '{joint.name}'"
        leader = joint.mimic.joint
        if not joint.type.scalar:
            raise doc.error(tag, what, f"a {urdf_joint.kind} joint cannot mimic; mimic joints "
                            "are revolute, continuous or prismatic")
        if leader == joint.name:
            raise doc.error(tag, what, "mimics itself")
        if leader not in index:
            kind = by_name[leader][0].kind if leader in by_name else None
            why = (f"is a {kind} joint, not a moving one" if kind else
                   "does not exist")
            raise doc.error(tag, what, f"<mimic joint={quoted(leader)}>: the leader {why}")
        lead = model_joints[index[leader]]
        if not lead.type.scalar:
            raise doc.error(tag, what, f"mimics '{leader}', a {lead.type.value} joint; a "
                            "leader is revolute, continuous or prismatic")
        if lead.mimic is not None:
            raise doc.error(tag, what, f"mimics '{leader}', which mimics "
                            f"'{lead.mimic.joint}' itself: a leader must be independent "
                            "(chains and cycles of mimics are refused; point every "
                            "follower at the independent joint)")
        mimics[i] = (index[leader], joint.mimic.multiplier, joint.mimic.offset)
    return build_coupling(model_joints, mimics) if mimics else None


def _warn_mimics(source: str, robot: str, joints: list[_UrdfJoint]) -> None:
    mimics = [f"{j.name} (mimics {j.mimic.joint})" for j in joints
              if j.mimic is not None and j.kind != "fixed"]
    if mimics:
        log.warning("%s: robot '%s': %d mimic joint%s read as independent joints, as "
                    "Pinocchio does by default: %s", source, robot, len(mimics),
                    "" if len(mimics) == 1 else "s", ", ".join(mimics))


def _compose_inertias(doc: XmlDocument, builder: _TreeBuilder,
                      inertias: dict[str, _LinkInertia]) -> list[Inertia]:
    """Each body's inertia: its links' inertias composed in the body frame, with link
    inertias that have a small negative principal moment clamped (module doc)."""
    bodies: list[Inertia] = [Inertia.zero() for _ in builder.body_links]
    world = Inertia.zero()
    for link, body, placement in builder.attachments:
        part = inertias[link]
        if part.moments is not None:
            continue  # composed after the check below
        inertia = part.inertia if placement is _IDENTITY else part.inertia.transformed(
            placement)
        if body == _WORLD:
            world = world + inertia
        elif bodies[body].mass == 0.0 and not bodies[body].inertia_com.any():
            bodies[body] = inertia
        else:
            bodies[body] = bodies[body] + inertia
    for link, body, placement in builder.attachments:
        part = inertias[link]
        if part.moments is None:
            continue
        assert part.axes is not None
        raw = part.inertia.transformed(placement)
        composite = (world if body == _WORLD else bodies[body]) + raw
        trace = float(np.trace(composite.inertia_com))
        negative = float(part.moments[0])
        owner = ("the links welded to the world" if body == _WORLD else
                 f"body '{builder.body_links[body]}' (the link and the links welded to it)")
        moments = ", ".join(f"{m:.6g}" for m in part.moments)
        if not -negative <= INERTIA_CLAMP_TOLERANCE * trace:
            raise doc.error(part.element, f"link '{link}'",
                            f"inertia is not positive semi-definite (principal moments "
                            f"{moments}); the negative moment is more than "
                            f"{INERTIA_CLAMP_TOLERANCE:g} of the trace {trace:.6g} of "
                            f"{owner}, too large to be rounding: fix the URDF")
        clamped = part.axes @ np.diag(np.maximum(part.moments, 0.0)) @ part.axes.T
        fixed = Inertia(part.inertia.mass, part.inertia.com, (clamped + clamped.T) / 2.0)
        log.warning("%s: link '%s': inertia has a negative principal moment (%s), within "
                    "%g of the trace %.6g of %s: clamped to the nearest positive "
                    "semi-definite inertia", doc.source, link, moments,
                    INERTIA_CLAMP_TOLERANCE, trace, owner)
        inertia = fixed.transformed(placement)
        if body == _WORLD:
            world = world + inertia
        else:
            bodies[body] = bodies[body] + inertia
    return bodies


class _TreeBuilder:
    """Accumulates joints, bodies and frames in visit order, and which link is welded to
    which body (the inertias are composed once the tree is complete)."""

    def __init__(self) -> None:
        self.joints: list[Joint] = []
        self.body_links: list[str] = []
        self.frames: list[Frame] = []
        self.attachments: list[tuple[str, int, Placement]] = []  # (link, body, placement)
        self._nq = self._nv = 0

    def add_body(self, name: str, kind: JointType, parent: int, placement: Placement,
                 axis: np.ndarray, link: str, urdf: _UrdfJoint | None) -> int:
        extra = {}
        if urdf is not None:
            extra = dict(limits=urdf.limits, damping=urdf.damping, friction=urdf.friction,
                         mimic=urdf.mimic)
        joint = Joint(name, kind, parent, placement, axis, self._nq, self._nv, **extra)
        self.joints.append(joint)
        self._nq += joint.nq
        self._nv += joint.nv
        self.body_links.append(link)
        return len(self.joints) - 1

    def attach_link(self, link: str, body: int, placement: Placement) -> None:
        self.frames.append(Frame(link, "link", body, placement))
        self.attachments.append((link, body, placement))
