"""Campaign files (mbs_ros.campaign.spec): the schema's checks (every error names the file and the key), the draws
per run index (a pure function of seed and index, in any order), the distributions against their closed forms
(Kolmogorov-Smirnov and chi-square tests of scipy.stats on 2000 draws, fixed seeds), grids and scaled values.
No process, no headless run."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
from scipy import stats

from mbs_ros.campaign.spec import CampaignError, load_campaign

N = 2000  # draws per distribution test
P_MIN = 1e-3  # a fixed seed's p-value must exceed this (a correct sampler fails 1 seed in 1000)


def _write(tmp_path, text, name="c.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _campaign(tmp_path, vary, runs=N, seed=11):
    text = (f"name: t\nscenario: vehicle_manipulator\nruns: {runs}\nseed: {seed}\nvary:\n"
            + textwrap.indent(textwrap.dedent(vary), "  "))
    return load_campaign(_write(tmp_path, text))


FULL = """\
    name: vm_model_error
    description: computed torque under model error
    scenario: vehicle_manipulator
    runs: 8
    seed: 3
    duration: 2.5
    vary:
      - path: robots[0].dynamics.mass_scale
        uniform: [0.8, 1.2]
      - path: robots[0].controller.kp
        uniform: [0.9, 1.1]
        scale: true
      - path: robots[0].initial.position
        normal: {mean: [0.0, 0.0, -5.0], std: 0.05}
        size: 3
      - path: robots[0].controller.law
        grid: [computed_torque, pd_gravity]
    metrics:
      - max_base_position_error
      - settling_time: {band: 0.02, signal: joint, name: joint_settling}
      - {python: "mypkg.metrics:peak_power", name: power}
    criteria:
      - max_base_position_error < 0.05
      - joint_settling <= 3
      - power.peak < 100
"""


def test_a_full_file_loads_into_its_fields(tmp_path):
    c = load_campaign(_write(tmp_path, FULL))
    assert (c.name, c.scenario, c.runs, c.seed, c.duration) == ("vm_model_error", "vehicle_manipulator", 8, 3, 2.5)
    assert [v.path for v in c.vary] == ["robots[0].dynamics.mass_scale", "robots[0].controller.kp",
                                        "robots[0].initial.position", "robots[0].controller.law"]
    assert [v.distribution for v in c.vary] == ["uniform", "uniform", "normal", "grid"]
    assert c.vary[1].scale and c.vary[1].base == 9.0 and c.vary[2].size == 3
    assert [(m.name, m.kind) for m in c.metrics] == [("max_base_position_error", "max_base_position_error"),
                                                      ("joint_settling", "settling_time"), ("power", "python")]
    assert c.metrics[1].params == {"band": 0.02, "signal": "joint"}
    assert [(k.metric, k.op, k.value) for k in c.criteria] == [("max_base_position_error", "<", 0.05),
                                                               ("joint_settling", "<=", 3.0), ("power.peak", "<", 100)]
    d = c.draw(5)
    assert set(d) == {v.path for v in c.vary} and len(d["robots[0].initial.position"]) == 3
    assert 0.9 * 9.0 <= d["robots[0].controller.kp"] <= 1.1 * 9.0
    json.dumps(d)  # plain Python values


def test_draws_are_a_pure_function_of_seed_and_index(tmp_path):
    """Run i's draw does not depend on which runs were drawn before (any order, any worker), equals numpy's
    default_rng([seed, i]) stream, and another seed gives other values."""
    c = _campaign(tmp_path, """\
        - path: robots[0].dynamics.mass_scale
          uniform: [0.8, 1.2]
        - path: robots[0].dynamics.current
          normal: {mean: 0.0, std: 0.2}
          size: 3
        """)
    forward = [c.draw(i) for i in range(50)]
    backward = [c.draw(i) for i in reversed(range(50))][::-1]
    assert forward == backward
    for i in (0, 7, 49):
        rng = np.random.default_rng([11, i])
        assert forward[i]["robots[0].dynamics.mass_scale"] == rng.uniform(0.8, 1.2)
        assert forward[i]["robots[0].dynamics.current"] == rng.normal(0.0, 0.2, 3).tolist()
    other = _campaign(tmp_path, """\
        - path: robots[0].dynamics.mass_scale
          uniform: [0.8, 1.2]
        """, seed=12)
    assert all(other.draw(i)["robots[0].dynamics.mass_scale"] != forward[i]["robots[0].dynamics.mass_scale"]
               for i in range(50))


def _draws(c, path, n=N):
    return np.array([c.draw(i)[path] for i in range(n)], dtype=float)


@pytest.mark.parametrize("vary, cdf", [
    ("uniform: [0.8, 1.2]", stats.uniform(loc=0.8, scale=0.4).cdf),
    ("normal: {mean: 1.5, std: 0.3}", stats.norm(loc=1.5, scale=0.3).cdf),
    ("log_uniform: [0.01, 10.0]", stats.loguniform(0.01, 10.0).cdf),
])
def test_continuous_distributions_follow_their_closed_forms(tmp_path, vary, cdf):
    """KS test of 2000 runs' draws against the distribution's CDF from scipy.stats: p > 1e-3 (seed 11)."""
    c = _campaign(tmp_path, f"""\
        - path: robots[0].dynamics.mass_scale
          {vary}
        """)
    x = _draws(c, "robots[0].dynamics.mass_scale")
    assert stats.kstest(x, cdf).pvalue > P_MIN


def test_a_vector_of_draws_has_independent_entries_each_with_the_distribution(tmp_path):
    """size 3 normal with per-entry means [1, 2, 3] and std 0.5: each entry passes the KS test against its own
    normal, and the entries' sample correlations are below 4/sqrt(N) (about 4 standard errors)."""
    c = _campaign(tmp_path, """\
        - path: robots[0].initial.position
          normal: {mean: [1.0, 2.0, 3.0], std: 0.5}
          size: 3
        """)
    x = np.array([c.draw(i)["robots[0].initial.position"] for i in range(N)])
    for j, mean in enumerate((1.0, 2.0, 3.0)):
        assert stats.kstest(x[:, j], stats.norm(loc=mean, scale=0.5).cdf).pvalue > P_MIN
    corr = np.corrcoef(x.T)
    assert np.abs(corr[np.triu_indices(3, 1)]).max() < 4.0 / np.sqrt(N)


def test_a_vector_entry_with_low_equal_to_high_is_held_there(tmp_path):
    """uniform over [[0.9, 1, 2], [1.1, 1, 3]]: entries 1 is 1.0 exactly in every run, the others vary in
    their own ranges; a vector where no entry varies, or one with low > high, is refused."""
    c = _campaign(tmp_path, """\
        - path: robots[0].dynamics.current
          uniform: [[0.9, 1.0, 2.0], [1.1, 1.0, 3.0]]
          size: 3
        """, runs=50)
    x = np.array([c.draw(i)["robots[0].dynamics.current"] for i in range(50)])
    assert np.all(x[:, 1] == 1.0)
    assert np.all((0.9 <= x[:, 0]) & (x[:, 0] < 1.1)) and np.all((2.0 <= x[:, 2]) & (x[:, 2] < 3.0))
    assert len(set(x[:, 0])) == 50 and len(set(x[:, 2])) == 50
    for bounds in ("[[1, 1, 1], [1, 1, 1]]", "[[0, 2, 0], [1, 1, 1]]"):
        with pytest.raises(CampaignError, match=r"vary\[0\]\.uniform: low must be <= high in every entry"):
            _campaign(tmp_path, f"- {{path: 'robots[0].dynamics.current', uniform: {bounds}, size: 3}}\n")


@pytest.mark.parametrize("vary, values", [
    ("integers: [3, 7]", [3, 4, 5, 6, 7]),
    ("choice: [0.5, 1.0, 2.0]", [0.5, 1.0, 2.0]),
])
def test_discrete_distributions_draw_each_value_equally_often(tmp_path, vary, values):
    """Chi-square test of the counts of 2000 draws against equal frequencies: p > 1e-3; nothing else drawn."""
    c = _campaign(tmp_path, f"""\
        - path: robots[0].dynamics.sensor_seed
          {vary}
        """)
    x = _draws(c, "robots[0].dynamics.sensor_seed")
    counts = [int(np.sum(x == v)) for v in values]
    assert sum(counts) == N
    assert stats.chisquare(counts).pvalue > P_MIN


def test_grids_take_the_index_mod_n_combination_the_last_varying_fastest(tmp_path):
    c = _campaign(tmp_path, """\
        - path: robots[0].controller.law
          grid: [computed_torque, pd_gravity]
        - path: robots[0].dynamics.mass_scale
          grid: [0.8, 1.0, 1.2]
        - path: robots[0].controller.kd
          uniform: [4.0, 8.0]
        """, runs=12)
    assert c.grid_points == 6
    got = [(c.draw(i)["robots[0].controller.law"], c.draw(i)["robots[0].dynamics.mass_scale"]) for i in range(12)]
    expected = [(law, m) for law in ("computed_torque", "pd_gravity") for m in (0.8, 1.0, 1.2)]
    assert got == expected * 2
    assert c.draw(0)["robots[0].controller.kd"] != c.draw(6)["robots[0].controller.kd"]  # random part per index


def test_scale_multiplies_the_scenarios_value(tmp_path):
    """kp 9 in the file, times a factor drawn in [0.5, 0.6]; the true model's mass_scale (not in the file) times
    its default 1; a vector initial position times a vector of factors."""
    c = _campaign(tmp_path, """\
        - path: robots[0].controller.kp
          uniform: [0.5, 0.6]
          scale: true
        - path: robots[0].dynamics.mass_scale
          choice: [2.0]
          scale: true
        - path: robots[0].initial.position
          grid: [[1.0, 1.0, 2.0]]
          scale: true
        """, runs=3)
    for i in range(3):
        d = c.draw(i)
        assert 4.5 <= d["robots[0].controller.kp"] <= 5.4
        assert d["robots[0].dynamics.mass_scale"] == 2.0
        assert d["robots[0].initial.position"] == [0.0, 0.0, -10.0]


BAD = [
    ("runs: 0", "runs", "must be >= 1"),
    ("runs: many", "runs", "must be a whole number, got 'many'"),
    ("seed: -1", "seed", "must be >= 0"),
    ("duration: 0", "duration", "must be > 0"),
    ("scenario: nosuch_scenario", "scenario", "not found"),
    ("colour: red", "colour", "unknown key"),
    ("vary: [{path: 'robots[0].dynamics.mass_scale', uniform: [a, 1.2]}]", "vary[0].uniform[0]",
     "must be a number, got 'a'"),
    ("vary: [{path: 'robots[0].dynamics.mass_scale', uniform: [1.2, 0.8]}]", "vary[0].uniform", "low must be < high"),
    ("vary: [{path: 'robots[0].dynamics.mass_scale', log_uniform: [0.0, 2]}]", "vary[0].log_uniform[0]",
     "must be > 0"),
    ("vary: [{path: 'robots[0].dynamics.mass_scale', normal: {mean: 1, std: -1}}]", "vary[0].normal.std",
     "must be >= 0"),
    ("vary: [{path: 'robots[0].dynamics.mass_scale', normal: {mean: 1}}]", "vary[0].normal.std", "missing"),
    ("vary: [{path: 'robots[0].dynamics.mass_scale', uniform: [0.8, 1.2], choice: [1]}]", "vary[0]",
     "exactly one distribution"),
    ("vary: [{path: 'robots[0].dynamics.mass_scale'}]", "vary[0]", "exactly one distribution"),
    ("vary: [{path: 'robots[0].dynamics.current', uniform: [[0, 0, 0], [1, 1, 1]]}]", "vary[0].uniform[0]",
     "needs 'size: 3'"),
    ("vary: [{path: 'robots[0].dynamics.current', uniform: [[0, 0], [1, 1]], size: 3}]", "vary[0].uniform[0]",
     "must have 3 entries"),
    ("vary: [{path: 'robots[0].dynamcs.mass_scale', uniform: [0.8, 1.2]}]", "vary[0].path",
     "did you mean 'dynamics'"),
    ("vary: [{path: 'robots[2].dynamics.mass_scale', uniform: [0.8, 1.2]}]", "vary[0].path", "robots has 1 entry"),
    ("vary: [{path: 'robots[0]..x', uniform: [0.8, 1.2]}]", "vary[0].path", "not a path"),
    ("vary: [{uniform: [0.8, 1.2]}]", "vary[0].path", "missing"),
    ("vary: [{path: 'robots[0].initial.twist', uniform: [0.8, 1.2], scale: true}]", "vary[0].scale",
     "nothing to scale"),
    ("vary: [{path: 'robots[0].controller.law', choice: [a, b], scale: true}]", "vary[0].scale", "scales by numbers"),
    ("vary: [{path: 'robots[0].controller.kp', uniform: [1, 2]}, {path: 'robots[0].controller.kp', "
     "uniform: [1, 2]}]", "vary[1].path", "varied twice"),
    ("vary: [{path: 'robots[0].controller.law', grid: [computed_torque, pd_gravity]}]\nruns: 3", "runs",
     "not a multiple of the 2 grid combinations"),
    ("metrics: [max_joint_eror]", "metrics[0]", "did you mean 'max_joint_error'"),
    ("metrics: [settling_time]", "metrics[0].settling_time.band", "missing"),
    ("metrics: [{settling_time: {band: 0.1, signal: speed}}]", "metrics[0].settling_time.signal", "must be one of"),
    ("metrics: [{python: 'not a function'}]", "metrics[0].python", "must be 'package.module:function'"),
    ("metrics: [faults, faults]", "metrics[1]", "listed twice"),
    ("metrics: [faults]\ncriteria: ['max_joint_error < 0.2']", "criteria[0]", "not listed under metrics"),
    ("metrics: [faults]\ncriteria: ['faults less than 1']", "criteria[0]", "must read 'metric op value'"),
    ("metrics: [faults]\ncriteria: ['faults < one']", "criteria[0]", "the value must be a number, got 'one'"),
]


@pytest.mark.parametrize("change, key, words", BAD)
def test_every_error_names_the_file_and_the_key(tmp_path, change, key, words):
    base = {"scenario": "vehicle_manipulator", "runs": "4", "seed": "1"}
    lines = change.split("\n")
    for line in lines:
        base.pop(line.split(":")[0], None)
    text = "\n".join(f"{k}: {v}" for k, v in base.items()) + "\n" + change + "\n"
    path = _write(tmp_path, text)
    with pytest.raises(CampaignError) as err:
        load_campaign(path)
    assert err.value.key == key and words in err.value.reason, str(err.value)
    assert str(err.value).startswith(f"{path}: {key}: ")


def test_yaml_syntax_errors_give_the_line_and_a_missing_file_says_so(tmp_path):
    path = _write(tmp_path, "scenario: vehicle_manipulator\nruns: [1\n")
    with pytest.raises(CampaignError) as err:
        load_campaign(path)
    assert err.value.line is not None and str(err.value).startswith(f"{path}:")
    with pytest.raises(CampaignError, match="campaign file not found"):
        load_campaign(tmp_path / "nothing.yaml")


def test_a_scenario_beside_the_campaign_file_is_found(tmp_path):
    scenario = (tmp_path / "mine.yaml")
    from mbs_ros.scenario.schema import scenario_path

    scenario.write_text(scenario_path("vehicle_manipulator").read_text(encoding="utf-8"), encoding="utf-8")
    c = load_campaign(_write(tmp_path, "scenario: mine.yaml\nruns: 1\nseed: 0\n", name="camp.yaml"))
    assert c.scenario == str(scenario.resolve()) and c.name == "camp" and c.vary == ()


def test_a_campaign_pickles_and_compares_as_a_value(tmp_path):
    """The engines send the campaign to worker processes: a pickled copy equals it and draws the same."""
    import pickle

    c = load_campaign(_write(tmp_path, FULL))
    copy = pickle.loads(pickle.dumps(c))
    assert copy == c and [copy.draw(i) for i in range(8)] == [c.draw(i) for i in range(8)]
