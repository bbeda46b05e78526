"""The float64 numpy reference oracle every generated kernel is judged against."""

from __future__ import annotations

import os

from grid_codegen import parse_urdf
from grid_rbd.reference.robot import GRAVITY, ReferenceRobot


def load(urdf_path: str | os.PathLike, floating_base: bool = False,
         ee_joint_names: list[str] | tuple[str, ...] | None = None) -> ReferenceRobot:
    """Parse a URDF and return its reference oracle (see `ReferenceRobot`)."""
    return ReferenceRobot(parse_urdf(urdf_path, floating_base=floating_base), ee_joint_names)


__all__ = ["GRAVITY", "ReferenceRobot", "load"]
