"""``python -m mbs_ros.bench``: see :mod:`mbs_ros.bench`."""
import sys

from .cli import main

sys.exit(main())
