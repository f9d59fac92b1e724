"""The Ray engine on a real local Ray instance (no mock): a 20-run campaign gives the same table as the local engine,
and a Ray worker process killed with SIGKILL loses no run (the task's max_retries retries it; a run that kills every
worker it gets is an "error" row). One Ray instance for the module (num_cpus=2, a small object store): Ray's
start-up is slow and memory-heavy. The tasks are test/campaign_tasks.py's, on the workers' PYTHONPATH.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="Ray is not installed (make setup installs it: requirements.txt)")
pytest.importorskip("pyarrow")

from campaign_tasks import ToyCampaign, calls, kill_always_task, toy_row, toy_task, write_source  # noqa: E402
from mbs_ros.campaign.engines import run_campaign  # noqa: E402

TEST_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ray_instance():
    path = os.pathsep.join(p for p in [str(TEST_DIR), os.environ.get("PYTHONPATH", "")] if p)
    ray.init(num_cpus=2, object_store_memory=100 * 1024 * 1024, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        yield
    finally:
        ray.shutdown()


def make_campaign(tmp_path, runs, **kw) -> ToyCampaign:
    (tmp_path / "calls").mkdir()
    return ToyCampaign(name="toy", source=write_source(tmp_path / "toy.yaml"), runs=runs, seed=11,
                       calls_dir=str(tmp_path / "calls"), **kw)


def without_wall(rows) -> list:
    return [{k: v for k, v in row.items() if k != "wall_s"} for row in rows]


def test_ray_gives_the_same_table_as_the_local_engine(tmp_path, ray_instance):
    campaign = make_campaign(tmp_path, runs=20)
    on_ray = run_campaign(campaign, out_dir=tmp_path / "ray", engine="ray", progress=False, task=toy_task)
    local = run_campaign(campaign, out_dir=tmp_path / "local", workers=2, progress=False, task=toy_task)
    assert on_ray.schema.equals(local.schema)
    assert without_wall(on_ray.to_pylist()) == without_wall(local.to_pylist())
    assert without_wall(on_ray.to_pylist()) == without_wall(toy_row(campaign, i) for i in range(20))
    assert {r["status"] for r in on_ray.to_pylist()} == {"pass", "fail"}
    assert ray.is_initialized()  # an instance the caller started is the caller's to stop


def test_a_killed_ray_worker_loses_no_run(tmp_path, ray_instance):
    campaign = make_campaign(tmp_path, runs=6, kill=(1, 4))
    table = run_campaign(campaign, out_dir=tmp_path / "o", engine="ray", progress=False, task=toy_task)
    assert without_wall(table.to_pylist()) == without_wall(toy_row(campaign, i) for i in range(6))
    n = calls(campaign)
    assert n[1] == 2 and n[4] == 2 and all(n[i] == 1 for i in (0, 2, 3, 5))


def test_a_run_that_kills_every_ray_worker_is_an_error_row(tmp_path, ray_instance):
    campaign = make_campaign(tmp_path, runs=3, kill=(2,))
    rows = run_campaign(campaign, out_dir=tmp_path / "o", engine="ray", progress=False,
                        task=kill_always_task).to_pylist()
    assert rows[2]["status"] == "error" and rows[2]["reason"].startswith("worker died")
    assert calls(campaign)[2] == 2  # max_retries=1: two attempts
    assert without_wall(rows[:2]) == without_wall(toy_row(campaign, i) for i in range(2))


REAL = """\
name: vm_ray
scenario: vehicle_manipulator
runs: 4
seed: 9
duration: 0.5
vary:
  - path: robots[0].dynamics.mass_scale
    uniform: [0.8, 1.2]
  - path: robots[0].initial.position
    normal: {mean: [0.0, 0.0, -5.0], std: 0.05}
    size: 3
metrics: [max_base_position_error, max_joint_error, faults]
criteria: ["max_joint_error < 1.0"]
"""


def test_a_real_campaign_on_ray_gives_execute_runs_rows(tmp_path, ray_instance):
    from mbs_ros.campaign.execute import execute_run
    from mbs_ros.campaign.spec import load_campaign

    path = tmp_path / "vm.yaml"
    path.write_text(REAL, encoding="utf-8")
    campaign = load_campaign(path)
    table = run_campaign(campaign, out_dir=tmp_path / "o", engine="ray", progress=False)
    assert without_wall(table.to_pylist()) == without_wall(execute_run(campaign, i) for i in range(4))
    assert set(table.column("status").to_pylist()) == {"pass"}
