"""mbs_ros.campaign.report on hand-made result tables (no campaign is run): the pass rate and its Wilson interval
against the closed form and scipy, the metric statistics against values worked out by hand, the worst runs of
each criterion, the replay command read back as the shell and the runner read it, and the report's files."""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

pa = pytest.importorskip("pyarrow")

from mbs_ros.campaign.report import (summarize, wilson_interval, replay_command, write_report,  # noqa: E402
                                     file_stem)

Z = 1.959963984540054


def crit(metric, op, value):
    return SimpleNamespace(metric=metric, op=op, value=value, text=f"{metric} {op} {value}")


def campaign(criteria=(), duration=3.0):
    return SimpleNamespace(name="demo", source=None, scenario="vehicle_manipulator", runs=10, seed=7,
                           duration=duration, vary=(), metrics=(), criteria=tuple(criteria))


def table():
    """10 runs: max_err = 0.01 .. 0.10 (run i has 0.01 (i + 1)), run 9 an error (metric NaN); criterion
    max_err < 0.075 fails runs 7 and 8 (0.08, 0.09); min_gap > 0.3 (gap = 1 - max_err... by hand below)."""
    n = 10
    err = [0.01 * (i + 1) for i in range(n)]
    err[9] = math.nan
    gap = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.35, 0.2, 0.25, math.nan]
    status = ["pass"] * 7 + ["fail", "fail", "error"]
    reason = [""] * 7 + ["max_err = 0.08 >= 0.075; min_gap = 0.2 <= 0.3", "max_err = 0.09 >= 0.075; "
                         "min_gap = 0.25 <= 0.3", "worker died"]
    return pa.table({
        "run": list(range(n)), "status": status, "reason": reason, "wall_s": [1.5] * n,
        "param.robots[0].dynamics.mass_scale": [0.8 + 0.04 * i for i in range(n)],
        "param.robots[0].initial.position": [f"[{0.1 * i}, 0.0, -5.0]" for i in range(n)],
        "param.robots[0].controller.law": ["computed_torque"] * n,
        "metric.max_err": err, "metric.min_gap": gap})


CRITERIA = (crit("max_err", "<", 0.075), crit("min_gap", ">", 0.3))


def test_wilson_interval_is_the_closed_form_and_scipys():
    # closed forms: no passes -> [0, z^2 / (n + z^2)], all pass -> [n / (n + z^2), 1]
    for n in (1, 7, 20, 1000):
        lo, hi = wilson_interval(0, n)
        assert lo == pytest.approx(0.0, abs=1e-15) and hi == pytest.approx(Z * Z / (n + Z * Z), rel=1e-12)
        lo, hi = wilson_interval(n, n)
        assert hi == pytest.approx(1.0, abs=1e-15) and lo == pytest.approx(n / (n + Z * Z), rel=1e-12)
    stats = pytest.importorskip("scipy.stats")
    for k, n in ((7, 10), (1, 3), (95, 100), (500, 1000), (12, 13)):
        ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ref.low, ref.high), rel=1e-9, abs=1e-12)


def test_summary_counts_pass_rate_and_metric_statistics():
    s = summarize(campaign(CRITERIA), table())
    assert (s.runs, s.passed, s.failed, s.errors) == (10, 7, 2, 1)
    assert s.pass_rate == 0.7
    assert s.pass_interval == pytest.approx(wilson_interval(7, 10))
    m = s.metrics["max_err"]
    # nine values 0.01 .. 0.09: median 0.05; p95 at rank 0.95 * 8 = 7.6 -> 0.08 + 0.6 * 0.01 = 0.086
    assert (m.count, m.missing) == (9, 1)
    assert (m.min, m.median, m.p95, m.max) == pytest.approx((0.01, 0.05, 0.086, 0.09), abs=1e-12)
    g = s.metrics["min_gap"]
    # sorted 0.2 0.25 0.35 0.4 0.5 0.6 0.7 0.8 0.9: median 0.5; p95 = 0.8 + 0.6 * 0.1 = 0.86
    assert (g.min, g.median, g.p95, g.max) == pytest.approx((0.2, 0.5, 0.86, 0.9), abs=1e-12)
    assert s.wall_s_total == pytest.approx(15.0)


def test_worst_runs_per_criterion_are_the_largest_above_an_upper_bound_and_the_smallest_below_a_lower_one():
    s = summarize(campaign(CRITERIA), table())
    upper, lower = s.criteria
    assert upper.failed_runs == (7, 8) and lower.failed_runs == (7, 8)
    assert [w.run for w in upper.worst] == [8, 7, 6, 5, 4]
    assert [w.holds for w in upper.worst] == [False, False, True, True, True]
    assert [w.run for w in lower.worst] == [7, 8, 6, 5, 4]
    assert upper.worst[0].params["robots[0].initial.position"] == pytest.approx([0.8, 0.0, -5.0])
    assert upper.worst[0].params["robots[0].dynamics.mass_scale"] == pytest.approx(0.8 + 0.04 * 8)
    text = str(s)
    assert "10 runs, 7 pass, 2 fail, 1 error" in text and "70.0 %" in text
    assert "run 9: error: worker died" in text
    assert re.search(r"criterion max_err < 0.075: failed in 2 of 9 runs", text)


def test_a_criterion_on_a_per_robot_metric_judges_every_robot():
    t = pa.table({"run": [0, 1], "status": ["pass", "fail"], "reason": ["", "x"], "wall_s": [1.0, 1.0],
                  "metric.a/err": [0.1, 0.1], "metric.b/err": [0.2, 0.9]})
    s = summarize(campaign([crit("err", "<=", 0.5)]), t)
    c = s.criteria[0]
    assert c.columns == ("metric.a/err", "metric.b/err") and c.failed_runs == (1,)
    assert (c.worst[0].run, c.worst[0].metric, c.worst[0].value) == (1, "b/err", 0.9)


def test_replay_command_reads_back_to_the_drawn_values_bit_for_bit():
    odd = 0.1 + 0.2  # 0.30000000000000004: a short format would lose its last bit
    row = {"run": 12, "status": "fail", "reason": "", "param.robots[0].dynamics.mass_scale": odd,
           "param.robots[0].initial.position": "[0.30000000000000004, -1e-17, -5.0]",
           "param.robots[0].controller.kp": "[4.0, 4.0, 16.0]", "param.robots[0].dynamics.sensor_seed": 3,
           "param.robots[0].controller.law": "computed torque", "metric.x": 1.0}
    line = replay_command(campaign(), row)
    argv = shlex.split(line)
    assert argv[:4] == ["python", "-m", "mbs_ros.bringup", "vehicle_manipulator"]
    sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    assert sets[:3] == ["lockstep=true", "sim_time=true", "real_time_factor=0"]
    got = {}
    for s in sets[3:]:
        key, _, value = s.partition("=")
        got[key] = yaml.safe_load(value)  # what the runner's --set does with VALUE
    assert got["robots[0].dynamics.mass_scale"] == odd and isinstance(got["robots[0].dynamics.mass_scale"], float)
    assert got["robots[0].initial.position"] == [odd, -1e-17, -5.0]
    assert got["robots[0].controller.kp"] == [4.0, 4.0, 16.0]
    assert got["robots[0].dynamics.sensor_seed"] == 3 and got["robots[0].controller.law"] == "computed torque"
    assert argv[argv.index("--duration") + 1] == "3.0"
    assert argv[argv.index("--record") + 1] == "out/replay/demo_run12.mcap"
    assert argv[argv.index("--plot") + 1] == "out/replay/demo_run12"
    assert "\n" not in line
    assert "--duration" not in replay_command(campaign(duration=None), row)


def test_write_report_writes_the_summary_and_every_plot_it_links(tmp_path):
    c = campaign(CRITERIA)
    path = write_report(c, table(), tmp_path / "r")
    text = path.read_text()
    assert path == tmp_path / "r" / "report.md"
    assert str(summarize(c, table())).splitlines()[0] in text
    links = re.findall(r"\]\((plots/[^)]+\.png)\)", text)
    expected = {"max_err_ecdf.png", "max_err_hist.png", "min_gap_ecdf.png", "min_gap_hist.png"}
    for metric in ("max_err", "min_gap"):
        for p in ("robots_0_dynamics_mass_scale", "robots_0_initial_position"):  # not the law: the same in each
            expected.add(f"{metric}_vs_{p}.png")
    assert {Path(x).name for x in links} == expected
    assert {p.name for p in (tmp_path / "r" / "plots").iterdir()} == expected
    for x in links:
        assert (tmp_path / "r" / x).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the failed and errored runs' replay commands
    for run in (7, 8, 9):
        assert f"out/replay/demo_run{run}.mcap" in text
    assert "out/replay/demo_run6.mcap" not in text


def test_file_stems_are_stable_file_names():
    assert file_stem("robots[0].dynamics.mass_scale") == "robots_0_dynamics_mass_scale"
    assert file_stem("uvms/max_joint_error") == "uvms_max_joint_error"
    assert np.all([re.fullmatch(r"[A-Za-z0-9_-]+", file_stem(x)) for x in ("a b", "é", "[]", "x.y/z")])


def test_a_run_without_a_value_fails_the_criterion_and_is_the_worst():
    t = pa.table({"run": [0, 1, 2], "status": ["pass", "fail", "pass"],
                  "reason": ["", "t = 0.300 s: non-finite state (uvms)", ""], "wall_s": [1.0, 0.2, 1.0],
                  "metric.err": [0.1, math.nan, 0.2]})
    for op in ("<", ">"):
        c = summarize(campaign([crit("err", op, 0.15)]), t).criteria[0]
        assert 1 in c.failed_runs and c.worst[0].run == 1 and not c.worst[0].holds
        assert math.isnan(c.worst[0].value)


def test_an_infinite_value_counts_as_the_largest_and_is_left_out_of_the_plots(tmp_path):
    # settling times: 1, 2, 3 s and two runs that never settle (inf)
    t = pa.table({"run": list(range(5)), "status": ["pass"] * 3 + ["fail"] * 2, "reason": [""] * 5,
                  "wall_s": [1.0] * 5, "param.p": [0.1, 0.2, 0.3, 0.4, 0.5],
                  "metric.settling_time": [1.0, 2.0, 3.0, math.inf, math.inf]})
    c = campaign([crit("settling_time", "<", 4.0)])
    m = summarize(c, t).metrics["settling_time"]
    # rank 0.5 * 4 = 2 -> 3.0; rank 0.95 * 4 = 3.8 between inf and inf; rank 0.6 * 4 = 2.4 between 3 and inf
    assert (m.min, m.median, m.p95, m.max, m.missing) == (1.0, 3.0, math.inf, math.inf, 0)
    from mbs_ros.campaign.report import percentile
    assert percentile([1.0, 2.0, 3.0, math.inf, math.inf], 60) == math.inf
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert summarize(c, t).criteria[0].failed_runs == (3, 4)
    write_report(c, t, tmp_path)
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {"settling_time_ecdf.png", "settling_time_hist.png",
                                                                "settling_time_vs_p.png"}


def test_the_assertion_message_lists_each_failed_criterion_its_worst_runs_and_the_other_failures():
    from mbs_ros.campaign.testing import failure_message

    text = failure_message(campaign(CRITERIA), table(), "/results")
    lines = text.splitlines()
    assert lines[0] == "campaign demo: 3 of 10 runs did not pass (results and report in /results)"
    assert lines[1] == "criterion 'max_err < 0.075' failed in 2 of 9 runs (runs 7, 8); worst:"
    assert lines[2].startswith("  run 8: max_err = 0.09; replay: python -m mbs_ros.bringup vehicle_manipulator ")
    assert lines[3].startswith("  run 7: max_err = 0.08; replay: ")
    assert lines[4] == "criterion 'min_gap > 0.3' failed in 2 of 9 runs (runs 7, 8); worst:"
    assert lines[5].startswith("  run 7: min_gap = 0.2; replay: ") and lines[6].startswith("  run 8: min_gap = 0.25;")
    assert lines[7].startswith("run 9 error: worker died; replay: python -m mbs_ros.bringup ")
    assert "out/replay/demo_run9.mcap" in lines[7] and len(lines) == 8
    passing = pa.table({"run": [0], "status": ["pass"], "reason": [""], "wall_s": [1.0], "metric.max_err": [0.01]})
    assert failure_message(campaign(CRITERIA), passing) is None


def test_the_summary_lists_worst_runs_only_for_a_criterion_some_run_fails():
    """issue 31 item 25: a criterion every run meets listed 5 "worst" runs (read as failures); now it says so."""
    s = summarize(campaign((crit("max_err", "<", 1.0), crit("min_gap", ">", 0.3))), table())
    lines = str(s).splitlines()
    met = [i for i, line in enumerate(lines) if line.startswith("criterion max_err < 1.0")]
    assert len(met) == 1 and lines[met[0]] == "criterion max_err < 1.0: met in all 9 runs"
    assert not lines[met[0] + 1].startswith("  run ")
    failing = lines.index("criterion min_gap > 0.3: failed in 2 of 9 runs; worst:")
    assert [line.split(":")[0] for line in lines[failing + 1:failing + 6]] == [
        "  run 7", "  run 8", "  run 6", "  run 5", "  run 4"]


def test_a_vector_parameters_plot_has_one_panel_per_component_in_a_grid_and_the_legend_outside(tmp_path):
    """issue 31 item 25: a 9-component parameter gave 9 panels in a row with overlapping labels and the legend over
    the first panel. Now: a 3 x 3 grid, each panel's points the recorded (component, metric) pairs, no two panels'
    labels overlapping, the legend a figure legend clear of every panel."""
    n, size = 12, 9
    rng = np.random.default_rng(3)
    kp = rng.uniform(1.0, 50.0, (n, size))
    err = rng.uniform(0.0, 0.1, n)
    status = ["fail" if e >= 0.075 else "pass" for e in err]
    t = pa.table({"run": list(range(n)), "status": status, "reason": [""] * n, "wall_s": [1.0] * n,
                  "param.robots[0].controller.kp": ["[" + ", ".join(repr(float(x)) for x in row) + "]" for row in kp],
                  "metric.max_err": list(err)})
    figures = {}
    write_report(campaign([crit("max_err", "<", 0.075)]), t, tmp_path, figures=figures)
    fig = figures["max_err_vs_robots_0_controller_kp.png"]
    try:
        axes = [a for a in fig.axes if a.get_visible()]
        assert len(axes) == size
        grid = {(round(a.get_position().x0, 3), round(a.get_position().y0, 3)) for a in axes}
        assert len({x for x, _ in grid}) == 3 and len({y for _, y in grid}) == 3
        fails = err >= 0.075
        for k, a in enumerate(axes):
            assert a.get_xlabel() == f"[{k}]"
            assert a.get_legend() is None
            points = np.concatenate([c.get_offsets() for c in a.collections if len(c.get_offsets())])
            got = np.array(sorted(map(tuple, np.asarray(points))))
            np.testing.assert_allclose(got, np.array(sorted(zip(kp[:, k], err))), rtol=1e-12)
            red = [c for c in a.collections if c.get_label() == "fails max_err < 0.075"]
            assert len(red[0].get_offsets()) == int(fails.sum())
        assert [a.get_ylabel() for a in axes[::3]] == ["max_err"] * 3
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        boxes = [a.get_tightbbox(renderer) for a in axes]
        for i in range(size):
            for j in range(i + 1, size):
                assert not boxes[i].overlaps(boxes[j]), (i, j, boxes[i], boxes[j])
        (legend,) = fig.legends
        assert {tx.get_text() for tx in legend.get_texts()} >= {"pass", "fails max_err < 0.075"}
        box = legend.get_window_extent(renderer)
        assert not any(box.overlaps(a.get_window_extent(renderer)) for a in axes)
        assert "(one panel per component)" in fig.get_suptitle()
    finally:
        import matplotlib.pyplot as plt
        for f in figures.values():
            plt.close(f)


def test_a_parameter_held_in_every_run_is_not_plotted_nor_a_vector_entry_held(tmp_path):
    # 'held': a one-value grid (the same 1.0 in each run); 'links': a vector of 3 whose entries 1 and 2 are held
    t = pa.table({"run": [0, 1, 2], "status": ["pass"] * 3, "reason": [""] * 3, "wall_s": [1.0] * 3,
                  "param.held": [1.0, 1.0, 1.0], "param.links": ["[1.2, 1.0, 1.0]", "[1.5, 1.0, 1.0]",
                                                                  "[1.1, 1.0, 1.0]"],
                  "metric.err": [0.1, 0.2, 0.3]})
    write_report(campaign([crit("err", "<", 4.0)]), t, tmp_path)
    assert {p.name for p in (tmp_path / "plots").iterdir()} == {"err_ecdf.png", "err_hist.png", "err_vs_links.png"}
    from mbs_ros.campaign.report import _param_series, _varied

    kept = _varied(_param_series(t.column("param.links").to_pylist()))
    assert [s[0] for s in kept] == ["[0]"] and list(kept[0][1]) == [1.2, 1.5, 1.1]


def test_long_titles_stay_inside_the_figure_and_clear_of_the_legend(tmp_path):
    """uvms_grasp_robustness's report: the title 'uvms_grasp_robustness: carried_distance vs
    robots[0].dynamics.object_mass_scale', centred over a one-panel figure, ran off both edges and under the legend,
    and 'uvms_grasp_robustness: ECDF of time_to_carry (20 runs, 14 infinite)' off the right edge. Now a title too
    wide goes on two lines (and the figure is widened if still too wide): inside the figure, clear of the figure
    legend and the panel, no character lost, measured at the resolution the PNG is written at."""
    import matplotlib.pyplot as plt

    n = 6
    t = pa.table({"run": list(range(n)), "status": ["pass"] * 3 + ["fail"] * 3, "reason": [""] * n,
                  "wall_s": [1.0] * n,
                  "param.robots[0].dynamics.object_mass_scale": [0.75 + 0.15 * i for i in range(n)],
                  "metric.carried_distance": [0.53, 0.52, 0.51, 0.37, 0.36, 0.35],
                  "metric.time_to_carry": [8.8, 8.9, 9.0, math.inf, math.inf, math.inf]})
    c = campaign([crit("carried_distance", ">", 0.4), crit("time_to_carry", "<", 10.5)])
    c.name = "uvms_grasp_robustness"
    figures = {}
    write_report(c, t, tmp_path, figures=figures)
    titles = {"carried_distance_vs_robots_0_dynamics_object_mass_scale.png":
              "uvms_grasp_robustness: carried_distance vs robots[0].dynamics.object_mass_scale",
              "time_to_carry_ecdf.png": "uvms_grasp_robustness: ECDF of time_to_carry (6 runs, 3 infinite)",
              "carried_distance_hist.png": "uvms_grasp_robustness: histogram of carried_distance"}
    try:
        for fname, text in titles.items():
            fig = figures[fname]
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            (ax,) = [a for a in fig.axes if a.get_visible()]
            title = fig._suptitle if fig._suptitle is not None else ax.title
            assert "".join(title.get_text().split()) == "".join(text.split()), fname
            box = title.get_window_extent(renderer)
            assert 0.0 <= box.x0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height, (fname, box, fig.bbox)
            for legend in fig.legends:
                assert not box.overlaps(legend.get_window_extent(renderer)), (fname, box)
            if title is not ax.title:
                assert not box.overlaps(ax.get_window_extent(renderer)), fname
            png = plt.imread(tmp_path / "plots" / fname)
            assert png.shape[:2] == (round(fig.bbox.height), round(fig.bbox.width)), fname
        assert len(figures["carried_distance_vs_robots_0_dynamics_object_mass_scale.png"].legends) == 1
    finally:
        for f in figures.values():
            plt.close(f)


def test_the_tick_labels_under_a_panel_do_not_run_into_each_other(tmp_path):
    """uvms_grasp_robustness's object_offset panels (+-1 cm, 3.4 in wide) had nine labels '-0.0100' .. '0.0100'
    that ran into each other. Each panel's visible x tick labels are now clear of one another."""
    import matplotlib.pyplot as plt

    n = 12
    rng = np.random.default_rng(31)
    off = rng.uniform([-0.01, -0.01, 0.0, -0.1], [0.01, 0.01, 0.0, 0.1], (n, 4))
    err = rng.uniform(0.3, 0.6, n)
    t = pa.table({"run": list(range(n)), "status": ["pass" if e > 0.4 else "fail" for e in err], "reason": [""] * n,
                  "wall_s": [1.0] * n,
                  "param.robots[0].dynamics.object_offset": ["[" + ", ".join(repr(float(x)) for x in row) + "]"
                                                             for row in off],
                  "param.robots[0].dynamics.friction_scale": list(rng.uniform(0.5, 1.25, n)),
                  "metric.carried_distance": list(err)})
    figures = {}
    write_report(campaign([crit("carried_distance", ">", 0.4)]), t, tmp_path, figures=figures)
    try:
        for fname in ("carried_distance_vs_robots_0_dynamics_object_offset.png",
                      "carried_distance_vs_robots_0_dynamics_friction_scale.png"):
            fig = figures[fname]
            fig.canvas.draw()
            renderer = fig.canvas.get_renderer()
            for ax in [a for a in fig.axes if a.get_visible()]:
                lo, hi = ax.get_xlim()
                labels = [tl for tl, tick in zip(ax.get_xticklabels(), ax.get_xticks())
                          if tl.get_visible() and tl.get_text() and lo <= tick <= hi]
                assert len(labels) >= 3, (fname, [tl.get_text() for tl in labels])
                boxes = [tl.get_window_extent(renderer) for tl in labels]
                for i in range(len(boxes) - 1):
                    assert boxes[i].x1 < boxes[i + 1].x0, (fname, labels[i].get_text(), labels[i + 1].get_text())
    finally:
        for f in figures.values():
            plt.close(f)
