"""``python -m mbs_ros.bench``: see :mod:`mbs_ros.bench`."""
import sys

from mbs_ros.bench.cli import main

sys.exit(main())
