"""``python -m mbs_ros.recording``: the recorder's command line (:mod:`mbs_ros.recording.cli`)."""

import sys

from mbs_ros.recording.cli import main

if __name__ == "__main__":
    sys.exit(main())
