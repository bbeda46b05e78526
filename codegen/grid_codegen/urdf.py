"""URDF -> `RobotModel`: read links and joints, check them, merge fixed joints, and lay
the tree out in Pinocchio's joint order (depth first from the root, each link's child
joints visited in the byte order of their names, as urdfdom stores them)."""

from __future__ import annotations

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
from grid_codegen.urdf_xml import XmlDocument, parse_xml

log = logging.getLogger(__name__)

_MOVING = {"revolute": JointType.REVOLUTE, "continuous": JointType.REVOLUTE,
           "prismatic": JointType.PRISMATIC}
_UNSUPPORTED = {"floating", "planar"}


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


def _origin(doc: XmlDocument, parent: ET.Element, what: str) -> Placement:
    element = parent.find("origin")
    if element is None:
        return Placement.identity()
    xyz = doc.floats(element, "xyz", what, 3, (0.0, 0.0, 0.0))
    rpy = doc.floats(element, "rpy", what, 3, (0.0, 0.0, 0.0))
    return Placement(rpy_to_matrix(*rpy), np.array(xyz))


def _read_inertia(doc: XmlDocument, link: ET.Element, name: str) -> Inertia:
    inertial = link.find("inertial")
    what = f"link '{name}'"
    if inertial is None:
        return Inertia.zero()
    frame = _origin(doc, inertial, what)
    mass_el = inertial.find("mass")
    mass = doc.number(mass_el, "value", what) if mass_el is not None else 0.0
    if mass < 0.0:
        raise doc.error(mass_el, what, f"mass {mass} is negative")
    inertia_el = inertial.find("inertia")
    I = np.zeros((3, 3))
    if inertia_el is not None:
        ixx, ixy, ixz, iyy, iyz, izz = (
            doc.number(inertia_el, k, what, 0.0)
            for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz"))
        I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
        eig = np.linalg.eigvalsh(I)
        scale = max(1.0, float(np.abs(I).max()))
        # A point mass (zero inertia) is allowed; a negative principal moment is not.
        if eig.min() < -1e-12 * scale:
            raise doc.error(inertia_el, what,
                            f"inertia is not positive definite (principal moments "
                            f"{', '.join(f'{e:.6g}' for e in eig)})")
    return Inertia(mass, frame.p, frame.R @ I @ frame.R.T)


def _read_joint(doc: XmlDocument, element: ET.Element) -> _UrdfJoint:
    name = element.get("name")
    what = f"joint '{name}'"
    if not name:
        raise doc.error(element, "joint", "<joint> has no name")
    kind = element.get("type")
    if kind in _UNSUPPORTED:
        raise doc.error(element, what, f"joint type '{kind}' is not supported; use revolute, "
                        "continuous, prismatic or fixed (floating_base=True for a free base)")
    if kind not in _MOVING and kind != "fixed":
        raise doc.error(element, what, f"unknown joint type '{kind}'; expected revolute, "
                        "continuous, prismatic or fixed")
    links = {}
    for role in ("parent", "child"):
        tag = element.find(role)
        if tag is None or not tag.get("link"):
            raise doc.error(element, what, f"has no <{role} link=...>")
        links[role] = tag.get("link")
    axis = np.array([1.0, 0.0, 0.0])
    axis_el = element.find("axis")
    if axis_el is not None:
        axis = np.array(doc.floats(axis_el, "xyz", what, 3, (1.0, 0.0, 0.0)))
    norm = float(np.linalg.norm(axis))
    if kind != "fixed":
        if norm < 1e-12:
            raise doc.error(axis_el, what, "axis is zero")
        axis = axis / norm
    limits = JointLimits()
    limit_el = element.find("limit")
    if limit_el is not None and kind != "continuous":
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
        mimic = Mimic(mimic_el.get("joint", ""),
                      doc.number(mimic_el, "multiplier", what, 1.0),
                      doc.number(mimic_el, "offset", what, 0.0))
    return _UrdfJoint(name, kind, links["parent"], links["child"], _origin(doc, element, what),
                      axis, limits, damping, friction, mimic)


def _find_root(doc: XmlDocument, links: dict[str, ET.Element],
               joints: list[_UrdfJoint], joint_elements: list[ET.Element]) -> str:
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
        raise doc.error(doc.root, f"robot '{doc.root.get('name')}'",
                        "the joints form a cycle: every link has a parent")
    if len(roots) > 1:
        raise doc.error(doc.root, f"robot '{doc.root.get('name')}'",
                        f"the tree has {len(roots)} roots ({', '.join(sorted(roots))}); "
                        "expected one")
    return roots[0]


def parse_urdf(urdf: str | os.PathLike | bytes, *, floating_base: bool = False,
               source: str | None = None) -> RobotModel:
    """Parse a URDF (a path, or the document's bytes) into a `RobotModel`.

    Raises `URDFError` naming the file and the element for any defect.
    """
    if isinstance(urdf, bytes):
        data, source = urdf, source or "<urdf string>"
    else:
        source = source or os.fspath(urdf)
        with open(urdf, "rb") as fh:
            data = fh.read()
    doc = parse_xml(data, source)
    if doc.root.tag != "robot":
        raise doc.error(doc.root, f"<{doc.root.tag}>", "the root element must be <robot>")
    robot_name = doc.root.get("name", "robot")

    links: dict[str, ET.Element] = {}
    for element in doc.root.findall("link"):
        name = element.get("name")
        if not name:
            raise doc.error(element, "link", "<link> has no name")
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
    root = _find_root(doc, links, joints, joint_elements)
    inertias = {name: _read_inertia(doc, element, name) for name, element in links.items()}

    child_joints: dict[str, list[_UrdfJoint]] = {name: [] for name in links}
    for joint in joints:
        child_joints[joint.parent].append(joint)
    for kids in child_joints.values():
        kids.sort(key=lambda j: j.name.encode())

    builder = _TreeBuilder(robot_name, source)
    if floating_base:
        builder.add_body("root_joint", JointType.FREE_FLYER, -1, Placement.identity(),
                         np.zeros(3), root, None)
        builder.attach_link(root, 0, Placement.identity(), inertias[root])
    else:
        builder.attach_link(root, -1, Placement.identity(), inertias[root])
    reached = {root}

    def visit(link: str, body: int, to_link: Placement) -> None:
        # Depth first, as Pinocchio's parser: a child's whole subtree before its sibling.
        for joint in child_joints[link]:
            reached.add(joint.child)
            placement = to_link.compose(joint.origin)
            if joint.kind == "fixed":
                builder.frames.append(Frame(joint.name, "fixed_joint", body, placement))
                builder.attach_link(joint.child, body, placement, inertias[joint.child])
                visit(joint.child, body, placement)
                continue
            if joint.mimic is not None:
                log.warning("%s: joint '%s' mimics '%s'; read as an independent joint",
                            source, joint.name, joint.mimic.joint)
            child = builder.add_body(joint.name, _MOVING[joint.kind], body, placement,
                                     joint.axis, joint.child, joint)
            builder.attach_link(joint.child, child, Placement.identity(), inertias[joint.child])
            visit(joint.child, child, Placement.identity())

    visit(root, 0 if floating_base else -1, Placement.identity())
    if reached != set(links):
        lost = sorted(set(links) - reached)
        raise doc.error(doc.root, f"robot '{robot_name}'",
                        f"the joints form a cycle: links {', '.join(lost)} are not "
                        f"reachable from the root '{root}'")
    return RobotModel(robot_name, source, tuple(builder.joints),
                      tuple(Body(n, builder.body_inertia[i])
                            for i, n in enumerate(builder.body_links)),
                      tuple(builder.frames), floating_base)


class _TreeBuilder:
    """Accumulates joints, bodies (with merged inertia) and frames in visit order."""

    def __init__(self, robot_name: str, source: str):
        self.robot_name, self.source = robot_name, source
        self.joints: list[Joint] = []
        self.body_links: list[str] = []
        self.body_inertia: list[Inertia] = []
        self.frames: list[Frame] = []

    def add_body(self, name: str, kind: JointType, parent: int, placement: Placement,
                 axis: np.ndarray, link: str, urdf: _UrdfJoint | None) -> int:
        idx_q = sum(j.nq for j in self.joints)
        idx_v = sum(j.nv for j in self.joints)
        extra = {}
        if urdf is not None:
            extra = dict(limits=urdf.limits, damping=urdf.damping, friction=urdf.friction,
                         mimic=urdf.mimic)
        self.joints.append(Joint(name, kind, parent, placement, axis, idx_q, idx_v, **extra))
        self.body_links.append(link)
        self.body_inertia.append(Inertia.zero())
        return len(self.joints) - 1

    def attach_link(self, link: str, body: int, placement: Placement, inertia: Inertia
                    ) -> None:
        self.frames.append(Frame(link, "link", body, placement))
        if body >= 0:
            self.body_inertia[body] = self.body_inertia[body] + inertia.transformed(placement)
