"""The robot of a recorded run, drawn over time: ``python -m mbs_ros.plot FILE.mcap --animate OUT.gif|OUT.mp4``.

For people without a viewer: the links from the URDF's visuals (``<ns>/robot_description`` in the file, else
``--model``) posed from ``/tf`` or from the joint states with :class:`mbs_ros.dynamics.Model`, with the base
path, the base reference and the end-effector path. Mesh visuals (STL, DAE, OBJ, ...; ``package://`` URIs as
:mod:`mbs_ros.packages` resolves them) are read with trimesh and decimated to at most
:data:`MAX_ROBOT_TRIANGLES` triangles per robot. Sources, frames and formats: docs/plot.md.

The parts: :mod:`mbs_ros.animate.geometry` (the robots' shapes), :mod:`mbs_ros.animate.poses` (their links over time), :mod:`mbs_ros.animate.drawing` (the
frames and the file).
"""

from mbs_ros.animate.geometry import (  # noqa: F401
    DEFAULT_COLOR,
    MAX_ROBOT_TRIANGLES,
    MIN_MESH_TRIANGLES,
    AnimationError,
    RobotGeometry,
    Visual,
    decimate,
    robot_from_urdf,
    robots,
)
from mbs_ros.animate.poses import LinkPoses, end_effector, end_effector_path, link_poses  # noqa: F401
from mbs_ros.animate.drawing import (  # noqa: F401
    DEFAULT_FPS,
    DEFAULT_MAX_FRAMES,
    DEFAULT_SIZE,
    FORMATS,
    AnimationResult,
    _Drawn,
    animate,
    frame_times,
)

__all__ = ["AnimationError", "Visual", "RobotGeometry", "LinkPoses", "AnimationResult", "robot_from_urdf",
           "robots", "link_poses", "end_effector", "end_effector_path", "frame_times", "animate",
           "DEFAULT_FPS", "DEFAULT_MAX_FRAMES", "FORMATS"]
