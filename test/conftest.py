"""Test-run hygiene for ROS 2: isolate each run and keep DDS traffic on this machine; parallel workers; sampled sweeps.

Set in ``pytest_configure`` (before any test module creates a node), so the test process and every child
process it starts (nodes under test) share them:

- ``ROS_DOMAIN_ID``: one domain per test process, so parallel runs (two developers' checkouts, CI beside a local
  run) and the parallel workers of one run (pytest-xdist, ``make test``) never see each other's topics.
  ``MBS_TEST_DOMAIN_ID`` forces a value (a worker ``gwN`` of a parallel run then takes that value + N); otherwise
  each process claims a domain in 1..100 that no other test process on this machine holds: starting from one
  derived from the pid, the first whose lock file (``$TMPDIR/mbs_ros_test_domain_<id>.lock``, an exclusive
  ``flock`` held for the process's life, released in ``pytest_unconfigure`` and by the kernel when it ends, even
  on a crash) it can take. (The pid alone collided: two runs at once shared a domain one time in seven and
  recorded each other's odometry.) A ``ROS_DOMAIN_ID`` already in the shell is deliberately overridden: tests
  must not talk to a live system.
- ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``: discovery stays on loopback (``ROS_LOCALHOST_ONLY`` is
  ignored by kilted).
- ``FASTDDS_BUILTIN_TRANSPORTS=UDPv4``: no shared-memory transport, so killed nodes leave no ``/dev/shm``
  segments behind.
- ``FASTDDS_DEFAULT_PROFILES_FILE`` (unless set): ``config/fastdds/profile.xml``, no XTypes type lookup, whose race
  in Fast DDS 3.2.3 crashed about one node start in 500 (:mod:`mbs_ros.dds`).
- ``AMENT_PREFIX_PATH`` gains the venv prefix when pytest runs from a venv (``.venv/bin/pytest`` started
  by hand), so ``ament_index_python`` finds mbs_ros and the message packages; ``make test`` sets it already.

Parallel runs (``make test`` runs ``-n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder``): each test
module runs whole on one worker, in its order, so a node a module-scoped fixture starts once serves all of the
module's tests, and a module's tests that read what earlier ones left (a node's log) see it; modules are handed to
whichever worker is free, the ones with long tests first (:func:`_long_modules_first`).
(``--dist loadgroup``, finer, does not group under pytest >= 9.2, whose node ids pytest-xdist 3.8 cannot suffix.)
Temporary files are per test (``tmp_path``, per worker under xdist) and node logs get unique names
(:class:`mbs_ros.process.NodeProcess`).

Sampled sweeps: a test whose cases re-prove one property at more sizes (refused start-ups, repeats of one trial)
runs a seeded random subset of them every run, drawn with :func:`sweeps.sample`, and all of them with
``--full-sweeps`` (or ``MBS_FULL_SWEEPS=1``). The seed is new each run and printed in the header (``--sweep-seed S``
or ``MBS_SWEEP_SEED=S`` repeats a run's subset); the workers of a parallel run share it.
"""

import fcntl
import os
import random
import sys
import tempfile

import pytest

# test/unit, test/ros and test/e2e import the shared helpers (ros_helpers, urdf_text) from here
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
KINDS = ("unit", "ros", "e2e")

_DOMAIN_LOCK = None  # the open lock file of the claimed domain, kept for the life of the process


def _worker_index():
    """N of this process's pytest-xdist worker id ``gwN``, or None outside a parallel run's worker."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else None


def _claim_domain() -> str:
    """A ROS domain in 1..100 no other test process on this machine holds (module docstring)."""
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
    return str(start + 1)  # a hundred test processes at once: share (cannot happen on a 2-core machine)


def _release_domain() -> None:
    global _DOMAIN_LOCK
    if _DOMAIN_LOCK is not None:
        fcntl.flock(_DOMAIN_LOCK, fcntl.LOCK_UN)
        _DOMAIN_LOCK.close()
        _DOMAIN_LOCK = None


def pytest_addoption(parser):
    group = parser.getgroup("mbs_ros")
    group.addoption("--full-sweeps", action="store_true", default=os.environ.get("MBS_FULL_SWEEPS") == "1",
                    help="run every case of the sampled sweeps (default: a seeded random subset of each)")
    group.addoption("--sweep-seed", default=None, metavar="S",
                    help="the seed of the sweeps' subsets (default: MBS_SWEEP_SEED, else a new one each run)")


def pytest_configure(config):
    forced = os.environ.get("MBS_TEST_DOMAIN_ID")
    worker = _worker_index()
    if forced:
        domain = str(int(forced) + (worker or 0))
    else:
        domain = _claim_domain()
    os.environ["ROS_DOMAIN_ID"] = domain
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["FASTDDS_BUILTIN_TRANSPORTS"] = "UDPv4"
    from mbs_ros.dds import dds_defaults

    dds_defaults()  # no XTypes type lookup: Fast DDS 3.2's race there crashes a node start in ~500 (mbs_ros/dds.py)
    # one seed for the whole run: the controller of a parallel run sets it before it starts its workers, which
    # inherit it (they must collect the same tests)
    seed = config.getoption("--sweep-seed") or os.environ.get("MBS_SWEEP_SEED") or str(random.SystemRandom().
                                                                                       randrange(10 ** 6))
    os.environ["MBS_SWEEP_SEED"] = seed
    if config.getoption("--full-sweeps"):
        os.environ["MBS_FULL_SWEEPS"] = "1"  # for the sweeps inside a test body too (test/sweeps.py)

    if sys.prefix != sys.base_prefix:  # running inside a venv
        prefixes = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
        if sys.prefix not in prefixes:
            os.environ["AMENT_PREFIX_PATH"] = os.pathsep.join([sys.prefix, *prefixes])


def pytest_unconfigure(config):
    _release_domain()


def pytest_report_header(config):
    sweeps = ("every case" if config.getoption("--full-sweeps") else
              f"a subset of each (seed {os.environ['MBS_SWEEP_SEED']}: --sweep-seed repeats it, --full-sweeps "
              "runs all)")
    return (f"ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} (each parallel worker claims its own) "
            f"AMENT_PREFIX_PATH={os.environ.get('AMENT_PREFIX_PATH', '')}\nsweeps: {sweeps}")


def pytest_collection_modifyitems(config, items):
    """Each test has one kind (unit, ros, e2e): its own ``@pytest.mark.ros``/``e2e`` (a test in test/unit that
    starts a process), else its folder's. So ``-m unit`` (and ``-m "unit and not ros and not e2e"``, which
    ``make test-fast`` runs) starts no process, and ``-m ros`` also finds the node tests kept beside their numerics.
    Then, in a parallel run's workers, the modules' order (module docstring)."""
    for item in items:
        if not any(item.get_closest_marker(kind) for kind in KINDS):
            kind = os.path.basename(os.path.dirname(str(item.fspath)))
            if kind in KINDS:
                item.add_marker(getattr(pytest.mark, kind))
    if _worker_index() is not None:
        _long_modules_first(items)


def _long_modules_first(items):
    """Order the modules as a parallel run hands them out (``--no-loadscope-reorder`` keeps this order): the ones
    with a long test first, so that none of them starts last and leaves the other workers idle while it runs: unit
    modules with a ``slow`` test (one test of a minute: the filter's Monte-Carlo consistency, the papers' studies),
    then e2e (scenario runs), then ros (node processes), then the other unit modules, which fill the gaps. Stable:
    a module's tests keep their order. Every worker sorts the same collection alike."""
    slow = {i.nodeid.split("::", 1)[0] for i in items if i.get_closest_marker("slow")}

    def rank(item):
        module = item.nodeid.split("::", 1)[0]
        if module in slow and item.get_closest_marker("unit"):
            return 0
        return 1 if item.get_closest_marker("e2e") else 2 if item.get_closest_marker("ros") else 3

    items.sort(key=rank)
