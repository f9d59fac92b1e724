import sys

from mbs_ros.validation.cli import main

sys.exit(main())
