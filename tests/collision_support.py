"""Robots with collision geometry for the collision tests and benchmark: a synthetic
arm with box, cylinder, capsule and sphere primitives, and iiwa14 (whose URDF has no
collision geometry) given cylinders along its links."""

from __future__ import annotations

import re

from support import REPO

INERTIAL = ('<inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" '
            'ixy="0" ixz="0" iyz="0"/></inertial>')


def _joint(name: str, parent: str, child: str, xyz: str, axis: str) -> str:
    return (f'<joint name="{name}" type="revolute"><parent link="{parent}"/>'
            f'<child link="{child}"/><origin xyz="{xyz}"/><axis xyz="{axis}"/>'
            '<limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')


def arm_urdf(capsule: bool = True, l3_geometry: str | None = None) -> str:
    """A 3-dof arm: a box base, a cylinder, a capsule (a cylinder when `capsule` is
    False: Pinocchio's URDF reader has no capsules), a tilted box and a welded sphere."""
    l2 = ('<capsule radius="0.035" length="0.25"/>' if capsule
          else '<cylinder radius="0.035" length="0.25"/>')
    l3 = l3_geometry or '<box size="0.06 0.05 0.2"/>'
    def link(name: str, body: str) -> str:
        return f'<link name="{name}">{body}</link>'

    def collision(origin: str, geometry: str) -> str:
        return (f'<collision><origin {origin}/><geometry>{geometry}</geometry>'
                '</collision>')

    return "\n".join([
        '<robot name="arm">',
        link("base", collision('xyz="0 0 0"', '<box size="0.2 0.2 0.1"/>')),
        link("l1", INERTIAL + collision('xyz="0 0 0.15"',
                                        '<cylinder radius="0.04" length="0.3"/>')),
        link("l2", INERTIAL + collision('xyz="0 0 0.15"', l2)),
        link("l3", INERTIAL + collision('xyz="0 0 0.1" rpy="0.3 0 0"', l3)),
        link("tool", collision('xyz="0 0 0.05"', '<sphere radius="0.05"/>')),
        _joint("j1", "base", "l1", "0 0 0.05", "0 0 1"),
        _joint("j2", "l1", "l2", "0 0 0.3", "0 1 0"),
        _joint("j3", "l2", "l3", "0 0 0.3", "0 1 0"),
        '<joint name="tool_joint" type="fixed"><parent link="l3"/><child link="tool"/>'
        '<origin xyz="0 0 0.2"/></joint>',
        "</robot>"])


def iiwa14_with_cylinders() -> str:
    """iiwa14's URDF with one cylinder per link, from the link's origin to its child
    joint (radius 0.06; the last link a 0.1 m stub)."""
    text = (REPO / "robots/iiwa14/iiwa14.urdf").read_text()
    joints = re.findall(r'<joint[^>]*>.*?</joint>', text, flags=re.S)
    child_offset = {}
    for j in joints:
        parent = re.search(r'<parent link="([^"]+)"', j).group(1)
        xyz = re.search(r'<origin[^>]*xyz="([^"]+)"', j)
        child_offset.setdefault(parent, [float(x) for x in xyz.group(1).split()]
                                if xyz else [0.0, 0.0, 0.0])

    def add(match: re.Match) -> str:
        name, body = match.group(1), match.group(2)
        off = child_offset.get(name, [0.0, 0.0, 0.1])
        length = max(0.05, sum(x * x for x in off) ** 0.5)
        if abs(off[2]) < 0.5 * length:  # not along z: a sphere at the midpoint
            geometry = '<sphere radius="0.07"/>'
        else:
            geometry = f'<cylinder radius="0.06" length="{length:.4f}"/>'
        mid = " ".join(f"{x / 2:.4f}" for x in off)
        return (f'<link name="{name}">{body}<collision><origin xyz="{mid}"/><geometry>'
                f'{geometry}</geometry></collision></link>')

    return re.sub(r'<link name="([^"]+)">(.*?)</link>', add, text, flags=re.S)


CAPSULE_ARM = (("l1", "0.04", "0.3"), ("l2", "0.035", "0.25"), ("l3", "0.03", "0.25"),
               ("l4", "0.03", "0.2"))
"""(link, radius, length) of capsule_arm_urdf's capsules, each centred on its link's z."""


def capsule_arm_urdf(capsule: bool = True) -> str:
    """A 4-dof arm of capsules on a base sphere, a tool sphere welded to the last link:
    every primitive is exact under collision_native. `capsule=False` writes cylinders
    of the same sizes (for Pinocchio's URDF reader, which has no capsules; the tests then
    give coal the capsules)."""
    tag = "capsule" if capsule else "cylinder"

    def collision(z: str, geometry: str) -> str:
        return (f'<collision><origin xyz="0 0 {z}"/><geometry>{geometry}</geometry>'
                '</collision>')

    links = ['<link name="base">' + collision("0", '<sphere radius="0.08"/>') + '</link>']
    for name, radius, length in CAPSULE_ARM:
        links.append(f'<link name="{name}">{INERTIAL}'
                     + collision(f"{float(length) / 2:g}",
                                 f'<{tag} radius="{radius}" length="{length}"/>') + '</link>')
    links.append('<link name="tool">' + collision("0.03", '<sphere radius="0.04"/>')
                 + '</link>')
    joints = [_joint("j1", "base", "l1", "0 0 0.1", "0 0 1"),
              _joint("j2", "l1", "l2", "0 0 0.3", "0 1 0"),
              _joint("j3", "l2", "l3", "0 0 0.25", "0 1 0"),
              _joint("j4", "l3", "l4", "0 0 0.25", "1 0 0"),
              '<joint name="tool_joint" type="fixed"><parent link="l4"/><child link="tool"/>'
              '<origin xyz="0 0 0.2"/></joint>']
    return "\n".join(['<robot name="capsule_arm">', *links, *joints, "</robot>"])
