"""grid_codegen: URDF parsing, the immutable robot model and (later) the code emitters."""

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
from grid_codegen.urdf import parse_urdf, rpy_to_matrix
from grid_codegen.urdf_xml import URDFError

__all__ = ["Body", "Frame", "Inertia", "Joint", "JointLimits", "JointType", "Mimic",
           "Placement", "RobotModel", "URDFError", "parse_urdf", "rpy_to_matrix"]
