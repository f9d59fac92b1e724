"""``python -m mbs_ros.animate FILE.mcap OUT.gif|OUT.mp4``: the robot of a recorded run drawn over time.

The same as ``python -m mbs_ros.plot FILE.mcap --animate OUT`` (which can also write the PNG plots in one go);
this entry point exists so that the package named in the docs answers ``--help`` instead of failing.
"""

import argparse
import sys
from typing import Optional, Sequence


def main(argv: Optional[Sequence[str]] = None) -> int:
    from mbs_ros.animate.drawing import DEFAULT_FPS, DEFAULT_MAX_FRAMES
    p = argparse.ArgumentParser(
        prog="python -m mbs_ros.animate",
        description="The robots of a recorded run (MCAP) drawn over time into a GIF or MP4: links from "
                    "<ns>/robot_description (else --model, else /tf frames as points), the base path, the base "
                    "reference and the end-effector path. Same as `python -m mbs_ros.plot FILE --animate OUT`.")
    p.add_argument("file", help="an MCAP file (mbs_ros.recording, ros2 bag record -s mcap)")
    p.add_argument("out", metavar="OUT.gif|OUT.mp4",
                   help="the animation to write (.gif: Pillow; .mp4: needs ffmpeg on PATH)")
    p.add_argument("--model", metavar="SCENARIO|MODEL_FILE", default=None,
                   help="the robot when the file has no <ns>/robot_description: a scenario (name or file) or a "
                        "URDF/xacro/robot YAML file")
    p.add_argument("--fps", type=float, default=None, help=f"frames per second (default {DEFAULT_FPS:g})")
    p.add_argument("--max-frames", type=int, default=None,
                   help=f"at most this many frames (default {DEFAULT_MAX_FRAMES}; a longer run is shown faster)")
    p.add_argument("--progress", choices=["auto", "always", "never"], default="auto",
                   help="progress on stderr while reading the file")
    args = p.parse_args(argv)
    forwarded = [args.file, "--animate", args.out, "--progress", args.progress]
    if args.model is not None:
        forwarded += ["--model", args.model]
    if args.fps is not None:
        forwarded += ["--fps", repr(args.fps)]
    if args.max_frames is not None:
        forwarded += ["--max-frames", str(args.max_frames)]
    from mbs_ros.plot import main as plot_main
    return plot_main(forwarded)


if __name__ == "__main__":
    sys.exit(main())
