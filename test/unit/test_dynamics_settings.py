"""The dynamics node's ROS-free parts: its parameter table (defaults, types, the docs page generated from it), the
bounds of every numeric parameter (test/parameter_extremes.py) and the wall-clock pacing. No process, no rclpy."""
from __future__ import annotations

import re
from pathlib import Path

import parameter_extremes as extremes
import pytest

from mbs_ros.cores.dynamics_settings import DEFAULTS, settings_from_values
from mbs_ros.cores.pacing import MAX_TICK_RATE_HZ, Pacer, timer_period
from mbs_ros.cores.parameters import TYPES, markdown_table, table

ROOT = Path(__file__).resolve().parents[2]
PARAMETERS = table("dynamics")

# The node's documented defaults (README, config/rigid_body.yaml comments), written out here.
EXPECTED_DEFAULTS = dict(
    robot_description="", model_file="", base_group="se3", mass=1.0, inertia=(0.01, 0.0, 0.0, 0.01, 0.0, 0.01),
    com=(0.0, 0.0, 0.0), gravity=(0.0, 0.0, -9.81), integrator="rk4", physics_rate=1000.0, publish_rate=100.0,
    wrench_rate=100.0, markers_rate=20.0, contacts_rate=20.0, diagnostics_rate=1.0, initial_position=(0.0, 0.0, 0.0),
    initial_rpy=(0.0, 0.0, 0.0), initial_twist=(0.0,) * 6, initial_joint_positions=(), initial_joint_velocities=(),
    world_frame="world", base_frame="base_link", cmd_timeout=0.5, max_mass_ratio=1.0e6, locked_joints=(),
    locked_joint_positions=(), mimic="reduce",
    joint_armature=(), use_events_executor=True, publish_clock=False, real_time_factor=1.0,
    lockstep=False, base_actuated=True, control_rate=100.0, publish_markers=True, marker_wrench_scale=0.01, max_wrench=(),
    max_effort=(), fluid_density=0.0, current=(0.0, 0.0, 0.0), current_rate=(0.0, 0.0, 0.0),
    environment_temperature=288.15, energy_rate=10.0, start_paused=False, pause_at=0.0, wait_for_command=False,
    sensors="", mass_scale=1.0, added_mass_scale=1.0, link_mass_scales=(), sensor_seed=0.0, thread_priority=0.0,
    world="",
    object_mass_scale=1.0, object_mu_scale=1.0, disturbance=(), friction_scale=1.0,
    object_offset=(0.0, 0.0, 0.0, 0.0), joint_limits=True)


def test_table_holds_the_documented_defaults_and_settings_take_them():
    assert {n: p.default for n, p in PARAMETERS.items()} == EXPECTED_DEFAULTS
    assert {n: getattr(DEFAULTS, n) for n in PARAMETERS} == EXPECTED_DEFAULTS
    assert settings_from_values(dict(EXPECTED_DEFAULTS)) == DEFAULTS  # the defaults pass the node's own checks


def test_every_parameter_has_a_type_that_fits_its_default():
    kinds = {"string": str, "bool": bool, "double": float, "double[]": tuple, "string[]": tuple,
             "double|double[]": (float, tuple)}
    for name, p in PARAMETERS.items():
        assert p.type in TYPES, name
        assert isinstance(p.default, kinds[p.type]), name
        if p.choices:
            assert p.default in p.choices, name
    assert PARAMETERS["integrator"].choices == ("euler", "heun", "rk3", "rk4")


def test_a_choice_outside_the_table_is_refused():
    from mbs_ros.dynamics.model.source import ParameterError

    with pytest.raises(ParameterError, match="integrator must be one of euler, heun, rk3, rk4"):
        settings_from_values(dict(EXPECTED_DEFAULTS, integrator="rk5"))
    with pytest.raises(ParameterError, match="mimic"):
        settings_from_values(dict(EXPECTED_DEFAULTS, mimic="follow"))


def test_docs_page_lists_the_parameters_of_the_table():
    text = (ROOT / "docs" / "dynamics_node.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- parameters: begin -->\n(.*?)<!-- parameters: end -->", text, flags=re.S)
    assert found, "docs/dynamics_node.md has no generated parameter table"
    assert found.group(1) == markdown_table(PARAMETERS), "regenerate the table (see docs/dynamics_node.md)"
    rows = [line.split("|")[1].strip().strip("`") for line in found.group(1).splitlines()[2:]]
    assert rows == list(PARAMETERS)


# ----------------------------------------------------------------------------------------------- pacing

DT_NS = 1_000_000  # 1 kHz


def test_pacer_steps_what_the_wall_clock_demands_in_small_batches():
    pacer = Pacer(DT_NS, real_time_factor=1.0)
    assert pacer.max_batch_steps == 10  # 10 ms of simulation time per callback
    pacer.anchor(k=100, now_ns=5_000_000_000)
    assert pacer.steps_now(100, 5_000_000_000) == 0
    assert pacer.steps_now(100, 5_000_000_000 + 3_500_000) == 3  # 3.5 ms later: steps 101..103 are due
    assert pacer.steps_now(100, 5_000_000_000 + 40_000_000) == 10  # 40 due: one batch of 10 now
    half = Pacer(DT_NS, real_time_factor=0.5)
    half.anchor(0, 0)
    assert half.due(8_000_000) == 4  # half speed: 8 ms of wall clock are 4 steps


def test_pacer_lags_beyond_fifty_milliseconds_and_reanchors():
    pacer = Pacer(DT_NS, real_time_factor=2.0)
    assert pacer.max_lag_steps == 100  # 50 ms of wall clock at twice real time
    pacer.anchor(0, 0)
    assert not pacer.lagging(0, 50_000_000)  # exactly 100 steps behind
    assert pacer.lagging(0, 50_500_000)
    pacer.anchor(0, 50_500_000)
    assert not pacer.lagging(0, 50_500_000) and pacer.due(50_500_000) == 0


def test_a_lone_skip_ahead_is_a_stall_and_one_within_ten_seconds_of_another_a_warning():
    """The first skip (60 ms late at 1 kHz, real time) is logged as a stall, with its lag; another 5 s later is a
    warning (the simulation slower than asked); one 10.5 s after that is a lone stall again."""
    pacer = Pacer(DT_NS, real_time_factor=1.0)
    pacer.anchor(0, 0)
    persistent, text = pacer.skip(0, 60_000_000)  # 60 steps due at 60 ms, none taken
    assert not persistent and text.startswith("0.060 s behind the wall clock: skipping ahead (a stall"), text
    pacer.anchor(0, 60_000_000)
    persistent, text = pacer.skip(0, 5_060_000_000)  # 5 s later: 5000 steps behind, 5 s
    assert persistent and text == ("falling behind the wall clock by 5.000 s: skipping ahead (the simulation runs "
                                   "slower than real_time_factor 1)"), text
    pacer.anchor(0, 5_060_000_000)
    persistent, text = pacer.skip(0, 15_560_000_000)
    assert not persistent and text.startswith("10.500 s behind"), text
    double = Pacer(DT_NS, real_time_factor=2.0)  # twice real time: 120 steps behind are 60 ms of wall clock
    double.anchor(0, 0)
    assert double.skip(0, 60_000_000)[1].startswith("0.060 s behind")


def test_short_stalls_within_ten_seconds_stay_stalls_and_a_slow_simulation_is_warned_about():
    """Two stalls of 55 ms 7 s apart (the demo's dynamics node on a slow 2-core host: one while the nodes start,
    one as the run ends) lose 0.11 s in 10 s: both INFO. A simulation at 0.8 of real time falls 50 ms behind every
    0.25 s: its skips lose 0.2 s per second, and from the first 0.2 s lost within 10 s on each is a warning."""
    pacer = Pacer(DT_NS, real_time_factor=1.0)
    pacer.anchor(0, 0)
    assert not pacer.skip(0, 55_000_000)[0]  # 55 steps due, none taken
    pacer.anchor(0, 55_000_000)
    persistent, text = pacer.skip(7000, 7_110_000_000)  # 7 s later, at step 7000: 55 ms behind again
    assert not persistent and "0.2 s within 10 s are warned about" in text, text
    slow = Pacer(DT_NS, real_time_factor=1.0)
    k, now, warned = 0, 0, []
    slow.anchor(k, now)
    for _ in range(12):  # 0.25 s of wall clock, 0.2 s of it simulated: 50 steps (+1) behind at each
        now += 250_000_000
        k += 199
        warned.append(slow.skip(k, now)[0])
        slow.anchor(k, now)
    assert warned == [False] * 3 + [True] * 9, warned  # 0.051 s each: the fourth makes more than 0.2 s


def test_lockstep_periods_start_no_earlier_than_the_speed_limit():
    pacer = Pacer(DT_NS, real_time_factor=1.0)
    pacer.anchor(0, 1_000)
    assert pacer.period_may_start(1_000)
    pacer.period_started(10, 1_000)  # 10 steps: the next period from 10 ms later
    assert not pacer.period_may_start(1_000 + 9_999_999)
    assert pacer.period_may_start(1_000 + 10_000_000)
    pacer.period_started(10, 50_000_000)  # late: the schedule restarts from now (no burst of periods to catch up)
    assert pacer.period_may_start(50_000_000)
    pacer.period_started(10, 50_000_000)
    assert not pacer.period_may_start(59_999_999) and pacer.period_may_start(60_000_000)
    free = Pacer(DT_NS, real_time_factor=0.0)
    free.period_started(10, 0)
    assert free.period_may_start(0)


def test_timer_period():
    assert timer_period(0.001, 1.0, lockstep=False) == pytest.approx(1.0 / MAX_TICK_RATE_HZ)  # capped at 500 Hz
    assert timer_period(0.01, 1.0, lockstep=False) == pytest.approx(0.01)
    assert timer_period(0.01, 2.0, lockstep=False) == pytest.approx(0.005)
    assert timer_period(0.001, 0.0, lockstep=False) == 0.0
    assert timer_period(0.001, 0.0, lockstep=True) == pytest.approx(0.05)
    assert timer_period(0.001, 1.0, lockstep=True) == pytest.approx(1.0 / MAX_TICK_RATE_HZ)


def _dynamics_value(name, value):
    values = dict(EXPECTED_DEFAULTS, **{name: value})
    if name == "physics_rate" and value < 100.0:  # every rate at most physics_rate
        values.update(publish_rate=min(value, 1.0), wrench_rate=0.0, markers_rate=0.0, contacts_rate=0.0, diagnostics_rate=0.0,
                      energy_rate=0.0, cmd_timeout=0.0)
    return values


@pytest.mark.parametrize("name, value, accepted", extremes.cases(
    extremes.DYNAMICS_RUNTIME + extremes.DYNAMICS_RUNTIME_VECTORS + extremes.DYNAMICS_STARTUP + [extremes.PAUSE_AT]))
def test_every_numeric_parameter_at_its_extremes(name, value, accepted):
    """The settings (start-up and run time alike) take the lowest and highest value and refuse one just outside,
    naming the parameter; max_wrench is checked against the model (a single body of 1 kg)."""
    from mbs_ros.dynamics.model.source import ParameterError
    from mbs_ros.cores.dynamics_settings import build_model, command_limits

    values = _dynamics_value(name, value)
    if accepted:
        s = settings_from_values(values)
        command_limits(build_model(s), s)
    else:
        with pytest.raises(ParameterError, match=name):
            s = settings_from_values(values)
            command_limits(build_model(s), s)


@pytest.mark.parametrize("name, value", [("wrench_rate", 0.0), ("markers_rate", 0.0), ("contacts_rate", 0.0), ("diagnostics_rate", 0.0),
                                         ("energy_rate", 0.0), ("real_time_factor", 0.0), ("cmd_timeout", 0.0),
                                         ("pause_at", 0.0), ("pause_at", 1e-300),
                                         ("environment_temperature", 5e-324), ("cmd_timeout", 1e-300),
                                         ("diagnostics_rate", 5e-324), ("real_time_factor", 1e-300)])
def test_off_values_and_the_issues_tiny_values(name, value):
    """0 still means off (rates), as fast as possible (real_time_factor) or hold forever (cmd_timeout, start-up);
    the tiny positive values that made a quantity infinite or every command expire at once are refused."""
    from mbs_ros.dynamics.model.source import ParameterError

    if value == 0.0:
        assert getattr(settings_from_values(dict(EXPECTED_DEFAULTS, **{name: value})), name) == 0.0
    else:
        with pytest.raises(ParameterError, match=name):
            settings_from_values(dict(EXPECTED_DEFAULTS, **{name: value}))


def test_cmd_timeout_is_at_least_one_physics_step_at_any_rate():
    from mbs_ros.dynamics.model.source import ParameterError

    at_50hz = dict(EXPECTED_DEFAULTS, physics_rate=50.0, publish_rate=50.0, wrench_rate=50.0, markers_rate=20.0,
                   contacts_rate=50.0, diagnostics_rate=1.0, energy_rate=10.0)
    assert settings_from_values(dict(at_50hz, cmd_timeout=0.02)).cmd_timeout == 0.02
    with pytest.raises(ParameterError, match="one physics step .* 0.02 s"):
        settings_from_values(dict(at_50hz, cmd_timeout=0.019))


def test_pause_at_gives_the_step_it_pauses_at_on_the_step_or_period_grid():
    """pause_at [s after t0] -> the step index k the simulation pauses itself at: exactly t0 + pause_at on the grid
    (physics steps; in lockstep control periods, where the state is published), else the first grid point after it;
    at run time only a step ahead of the simulation's is taken."""
    from mbs_ros.dynamics.model.source import ParameterError
    from mbs_ros.cores.dynamics_settings import check_pause_at, pause_step

    at_500hz = dict(EXPECTED_DEFAULTS, physics_rate=500.0, publish_rate=100.0, wrench_rate=100.0)  # dt = 2 ms

    def k(**values):
        return pause_step(settings_from_values(dict(at_500hz, **values)))

    assert k() is None and k(pause_at=0.0) is None  # never
    assert k(pause_at=2.5) == 1250 and k(pause_at=0.07) == 35  # on the grid: there (0.07 s is not 0.07e9 ns exactly)
    assert k(pause_at=0.002) == 1 and k(pause_at=0.0021) == 2 and k(pause_at=0.375) == 188  # else the next step
    lockstep = dict(lockstep=True, control_rate=100.0)  # 5 steps per period
    assert k(pause_at=2.5, **lockstep) == 1250 and k(pause_at=0.01, **lockstep) == 5
    assert k(pause_at=0.002, **lockstep) == 5 and k(pause_at=2.501, **lockstep) == 1255  # the next period's end
    s = settings_from_values(dict(at_500hz, pause_at=2.5))
    assert check_pause_at(s, 1249, 2_000_000) == 1250
    for now in (1250, 1300):  # reached, or past: refused, naming it
        with pytest.raises(ParameterError, match=r"pause_at 2.5 s: the simulation is already at t0 \+ 2\.[56]0+ s"):
            check_pause_at(s, now, 2_000_000)
    assert check_pause_at(settings_from_values(at_500hz), 10**6, 2_000_000) is None  # 0 is always taken
    with pytest.raises(ParameterError, match="pause_at must be 0 .never. or at least one physics step"):
        settings_from_values(dict(at_500hz, pause_at=0.0019))


@pytest.mark.parametrize("name, value, accepted", extremes.cases([extremes.ARM_EFFORT]))
def test_max_effort_at_its_extremes_on_the_arm(name, value, accepted):
    """max_effort on the 2-link arm (13.5 kg): [1e-9, 1e6 N m/kg x 13.5 kg], one number or one per joint."""
    from mbs_ros.dynamics.model import source as ms
    from mbs_ros.dynamics.model.source import ParameterError
    from mbs_ros.cores.dynamics_settings import build_model, command_limits

    source = ms.load_source("", str(ROOT / "config" / "robots" / "arm_2link_planar.yaml"))
    values = dict(EXPECTED_DEFAULTS, base_group="fixed", base_frame=ms.base_link(source))
    model = build_model(settings_from_values(values, source), source)
    for given in (value, [value, 1.0]):
        s = settings_from_values(dict(values, max_effort=given), source)
        if accepted:
            assert command_limits(model, s).max_effort[0] == value
        else:
            with pytest.raises(ParameterError, match="max_effort limits must lie in \\[1e-09, 1.35e\\+07\\]"):
                command_limits(model, s)
