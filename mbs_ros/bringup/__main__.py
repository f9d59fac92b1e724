"""``python -m mbs_ros.bringup SCENARIO [--duration S] [--record FILE] [--plot DIR] [--foxglove [PORT]]``: see
:mod:`mbs_ros.bringup.runner`."""

import sys

from mbs_ros.bringup.runner import main

if __name__ == "__main__":
    sys.exit(main())
