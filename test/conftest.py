"""Test-run hygiene for ROS 2: isolate each run and keep DDS traffic on this machine.

Set in ``pytest_configure`` (before any test module creates a node), so the test process and every child
process it starts (nodes under test) share them:

- ``ROS_DOMAIN_ID``: one domain per test run, so parallel runs (two developers' checkouts, CI beside a local
  run) never see each other's topics. ``MBS_TEST_DOMAIN_ID`` forces a value; otherwise the run claims a domain
  in 1..100 that no other test run on this machine holds: starting from one derived from the pid, the first
  whose lock file (``$TMPDIR/mbs_ros_test_domain_<id>.lock``, an exclusive ``flock`` held for the run's life and
  released by the kernel when it ends, even on a crash) it can take. (The pid alone collided: two runs at once
  shared a domain one time in seven and recorded each other's odometry.) A ``ROS_DOMAIN_ID`` already in the
  shell is deliberately overridden: tests must not talk to a live system.
- ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``: discovery stays on loopback (``ROS_LOCALHOST_ONLY`` is
  ignored by kilted).
- ``FASTDDS_BUILTIN_TRANSPORTS=UDPv4``: no shared-memory transport, so killed nodes leave no ``/dev/shm``
  segments behind.
- ``AMENT_PREFIX_PATH`` gains the venv prefix when pytest runs from a venv (``.venv/bin/pytest`` started
  by hand), so ``ament_index_python`` finds mbs_ros and the message packages; ``make test`` sets it already.
"""

import fcntl
import os
import sys
import tempfile

import pytest

# test/unit, test/ros and test/e2e import the shared helpers (ros_helpers, urdf_text) from here
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
KINDS = ("unit", "ros", "e2e")

_DOMAIN_LOCK = None  # the open lock file of the claimed domain, kept for the life of the run


def _claim_domain() -> str:
    """A ROS domain in 1..100 no other test run on this machine holds (module docstring)."""
    global _DOMAIN_LOCK
    start = os.getpid() % 100
    for i in range(100):
        domain = (start + i) % 100 + 1
        f = open(os.path.join(tempfile.gettempdir(), f"mbs_ros_test_domain_{domain}.lock"), "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _DOMAIN_LOCK = f
        return str(domain)
    return str(start + 1)  # a hundred runs at once: share (cannot happen on a 2-core machine)


def pytest_configure(config):
    domain = os.environ.get("MBS_TEST_DOMAIN_ID") or _claim_domain()
    os.environ["ROS_DOMAIN_ID"] = domain
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["FASTDDS_BUILTIN_TRANSPORTS"] = "UDPv4"

    if sys.prefix != sys.base_prefix:  # running inside a venv
        prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
        if sys.prefix not in prefixes:
            os.environ["AMENT_PREFIX_PATH"] = os.pathsep.join([sys.prefix, *prefixes])


def pytest_report_header(config):
    return (f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} "
            f"AMENT_PREFIX_PATH={os.environ.get('AMENT_PREFIX_PATH', '')}")


def pytest_collection_modifyitems(config, items):
    """Each test has one kind (unit, ros, e2e): its own ``@pytest.mark.ros``/``e2e`` (a test in test/unit that
    starts a process), else its folder's. So ``-m unit`` (and ``-m "unit and not ros and not e2e"``, which
    ``make test-fast`` runs) starts no process, and ``-m ros`` also finds the node tests kept beside their numerics."""
    for item in items:
        if any(item.get_closest_marker(kind) for kind in KINDS):
            continue
        kind = os.path.basename(os.path.dirname(str(item.fspath)))
        if kind in KINDS:
            item.add_marker(getattr(pytest.mark, kind))
