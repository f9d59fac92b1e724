"""Issue 31's figure: the estimator's worst work and CPU time per callback under hostile IMU input, ROS-free: what one
estimator_node callback does (the payload checks, the stamp check against a clock at 10 s, feed() with the node's
work budget; a drain left pending runs as the node's continuation timer would). CPU time (time.process_time), not
wall time: the figure should not depend on the machine's load. Run from the repository root:
``OMP_NUM_THREADS=1 python tools/estimator_hostile_timing.py``.
"""
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mbs_ros.cores import estimator as core
from mbs_ros.cores.estimator_settings import MAX_WORK_PER_CALL, Fusion, Rejected, build_setup, settings_from_values
from mbs_ros.cores.parameters import table
from mbs_ros.dynamics.model import source as ms
ROV = str(Path(__file__).resolve().parents[1] / "config" / "robots" / "bluerov2_heavy.yaml")
d = Path(tempfile.mkdtemp()); (d / "s.yaml").write_text("environment: {fluid_density: 1025.0, seabed_depth: 20.0}\nsensors:\n  - {name: imu, type: imu, link: base_link, rate: 100}\n")
source = ms.load_source("", ROV)
values = {n: p.default for n, p in table("estimator").items()}; values.update(ms.model_defaults(source))
values.update(model_file=ROV, sensors=str(d / "s.yaml"), physics_rate=500.0, imu="imu", publish_rate=50.0)
setup = build_setup(settings_from_values(values, source), source)
MS, NS = 1_000_000, 1_000_000_000
def run(label, msgs):
    f = Fusion(setup, origin_ns=None); f.work_budget = MAX_WORK_PER_CALL
    worst, worst_work, n = 0.0, 0, 0
    for t, w, a in msgs:
        t0 = time.process_time(); w0 = f.counts["work"]
        try:
            core.feed(f, "imu", core.check_stamp(t, 10 * NS), core.imu_payload(w, a))
        except Rejected:
            pass
        worst = max(worst, time.process_time() - t0); worst_work = max(worst_work, f.counts["work"] - w0); n += 1
        while f.pending:  # the node's continuation timer
            t0 = time.process_time(); w0 = f.counts["work"]; f.drain()
            worst = max(worst, time.process_time() - t0); worst_work = max(worst_work, f.counts["work"] - w0); n += 1
    print(f"{label}: {n} callbacks, worst CPU {worst * 1e3:.1f} ms, worst work {worst_work} sub-steps")
g = [0.0, 0.0, 9.81]
run("probe 1e6 rad/s x30", [(0, [0, 0, 0], g)] + [((k + 1) * 10 * MS, [1e6, 0, 0], g) for k in range(30)])
run("probe sec=2^31-1 then real", [(0, [0, 0, 0], g), ((2**31 - 1) * NS, [0, 0, 0], g)] + [((k + 1) * 10 * MS, [0, 0, 0], g) for k in range(30)])
run("accepted extremes 100 rad/s 500 m/s2, 5 s gaps", [(0, [0, 0, 0], g)] + [((k + 1) * 5 * NS if k % 2 else (k + 1) * 5 * NS - 10 * MS, [100, -100, 100], [500, -500, 500]) for k in range(6)])
run("normal 100 Hz at rest", [(k * 10 * MS, [0.01, 0, 0], g) for k in range(200)])
