"""``python -m mbs_ros.bench``: the command line, the tables and the JSON document."""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import signal
import sys
import time
import traceback

import numpy as np

from mbs_ros.bench import __doc__ as PACKAGE_DOC
from mbs_ros.bench import timing

SECTIONS = ("kernels", "step", "scaling", "node", "headless", "derivatives", "contact", "contact_node")
NODE_SECTIONS = ("node", "contact_node")  # real processes: in --quick only when --only names them
TOL = 1e-8

FULL_SET = dict(
    kernels=("arm6", "uvms", "ur5", "ur5_ff", "chain12", "chain100", "tree100"),
    kernels_alone=("chain1000", "tree1000"),
    derivatives=("arm6", "uvms", "ur5", "ur5_ff", "chain12", "chain100", "tree100"),
    step=("uvms", "ur5_ff", "chain12", "chain100", "chain1000", "tree100", "tree1000"),
    scaling=(12, 30, 100, 300, 1000),
    contact=("solo12", "stack5"),
)
QUICK_SET = dict(
    kernels=("arm6", "uvms", "ur5", "ur5_ff", "chain12", "tree30"),
    kernels_alone=(),
    derivatives=("arm6", "uvms", "ur5", "ur5_ff", "chain12", "tree30"),
    step=("uvms", "ur5_ff", "chain12", "tree30"),
    scaling=(12, 30, 100),
    contact=("solo12", "stack5"),
)
# Pinocchio's Data for N revolute joints takes memory growing about as N^3 (peak RSS measured here: N = 200:
# 0.7 GB, 300: 2.1 GB, 400: 4.4 GB), so the N = 1000 models are timed without it.
NO_PIN_1000 = "no Pinocchio: its createData() needs ~N^3 memory (4.4 GB at N = 400)"


def _progress(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def environment() -> dict:
    env = dict(python=platform.python_version(), platform=platform.platform(), logical_cpus=os.cpu_count())
    try:
        with open("/proc/cpuinfo") as f:
            env["cpu"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        env["cpu"] = platform.processor() or "?"
    try:
        env["loadavg_at_start"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    for mod, name in (("numpy", "numpy"), ("pinocchio", "pin"), ("mujoco", "mujoco"), ("numba", "numba"),
                      ("psutil", "psutil")):
        try:
            env[name] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - absent or broken: say so
            env[name] = None
    try:
        from mbs_ros.dynamics import Model

        m = Model.from_urdf('<robot name="one"><link name="a"><inertial><mass value="1"/><inertia ixx="1" ixy="0" '
                            'ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link><link name="b"><inertial><mass '
                            'value="1"/><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial></link>'
                            '<joint name="j" type="revolute"><parent link="a"/><child link="b"/><axis xyz="0 0 1"/>'
                            '<limit lower="-1" upper="1" effort="1" velocity="1"/></joint></robot>')
        env["mbs_ros_backend"] = getattr(m, "backend", "numpy (Model has no backend attribute)")
        env["MBS_BACKEND"] = os.environ.get("MBS_BACKEND")
    except Exception as e:  # noqa: BLE001
        env["mbs_ros_backend"] = f"? ({e})"
    return env


class Run:
    def __init__(self, args):
        self.args = args
        self.quick = args.quick
        self.plan = timing.QUICK if args.quick else timing.FULL
        self.sets = QUICK_SET if args.quick else FULL_SET
        self.tol = args.tol
        self.rows = []
        self.scaling = None
        self.node = None
        self.contact_node = None
        self.headless = None
        self.errors = []  # (section, message)
        self.skipped = []  # (section, what, reason)
        self.step_cache = {}
        self._cases = {}

    def case(self, key):
        from mbs_ros.bench import models

        if key not in self._cases:
            self._cases[key] = models.build(key)
        return self._cases[key]

    def _each(self, section, keys, fn):
        for key in keys:
            _progress(f"{section}: {key}")
            try:
                self.rows.extend(fn(self.case(key)))
            except FileNotFoundError as e:
                self.skipped.append((section, key, str(e)))
            except Exception as e:  # noqa: BLE001 - one model's failure is reported, the others still run
                self.errors.append((section, f"{key}: {type(e).__name__}: {e}"))
                traceback.print_exc(file=sys.stderr)

    # ------------------------------------------------------------------------------------------ sections
    def kernels(self):
        try:
            import pinocchio  # noqa: F401
        except ImportError as e:
            self.skipped.append(("kernels", "all", f"pinocchio is not importable ({e}); pip install pin"))
            return
        from mbs_ros.bench import kernels

        self._each("kernels", self.sets["kernels"], lambda c: kernels.run(c, self.plan, self.tol))
        self._each("kernels", self.sets["kernels_alone"],
                   lambda c: kernels.run_alone(c, self.plan, self.tol, NO_PIN_1000))

    def derivatives_section(self):
        try:
            import pinocchio  # noqa: F401
        except ImportError as e:
            self.skipped.append(("derivatives", "all", f"pinocchio is not importable ({e}); pip install pin"))
            return
        from mbs_ros.bench import derivatives

        self._each("derivatives", self.sets["derivatives"], lambda c: derivatives.run(c, self.plan, self.tol))

    def _mujoco(self, section):
        try:
            import mujoco  # noqa: F401
        except ImportError as e:
            self.skipped.append((section, "all", f"mujoco is not importable ({e}); pip install mujoco"))
            return False
        return True

    def step(self):
        if not self._mujoco("step"):
            return
        from mbs_ros.bench import stepping

        self._each("step", self.sets["step"],
                   lambda c: stepping.run(c, self.plan, self.tol, cache=self.step_cache))

    def scaling_section(self):
        if not self._mujoco("scaling"):
            return
        from mbs_ros.bench import stepping

        out = {}
        for family in ("chain", "tree"):
            pts = []
            for n in self.sets["scaling"]:
                key = f"{family}{n}"
                row = self.step_cache.get((key, "rk4"))
                if row is None:
                    _progress(f"scaling: {key}")
                    try:
                        rows = stepping.run(self.case(key), self.plan, self.tol, methods=("rk4",),
                                            cache=self.step_cache)
                    except Exception as e:  # noqa: BLE001
                        self.errors.append(("scaling", f"{key}: {type(e).__name__}: {e}"))
                        continue
                    row = rows[0]
                    row = dict(row, section="scaling")
                    self.rows.append(row)
                pts.append(dict(n=n, ours_us=row["ours_us"], mujoco_us=row["peer_us"], err=row["err"],
                                agree=row["agree"], ratio=row["ratio"]))
            if not pts:
                continue
            ns = [p["n"] for p in pts]
            largest = pts[-1]
            n = largest["n"]
            ratio = largest["ratio"]  # per body-step ratio = per step ratio (same N on both sides)
            met = bool(ratio <= 1.0) if n >= 1000 else None
            out[family] = dict(points=pts, exponent_ours=stepping.fit_exponent(ns, [p["ours_us"] for p in pts]),
                               exponent_mujoco=stepping.fit_exponent(ns, [p["mujoco_us"] for p in pts]),
                               n_largest=n, ours_ns_per_body_step=1e3 * largest["ours_us"] / n,
                               mujoco_ns_per_body_step=1e3 * largest["mujoco_us"] / n, ratio=ratio,
                               target="<= 1x at N = 1000" if n >= 1000 else "(N = 1000 only in the full run)",
                               met=met)
        self.scaling = out

    def contact_section(self):
        if not self._mujoco("contact"):
            return
        try:
            import coal  # noqa: F401
        except ImportError as e:
            self.skipped.append(("contact", "all", f"coal is not importable ({e}); pip install coal"))
            return
        from mbs_ros.bench import contact

        for key in self.sets["contact"]:
            _progress(f"contact: {key}")
            try:
                self.rows.extend(contact.run(key, self.quick, self.plan, self.tol))
            except FileNotFoundError as e:
                self.skipped.append(("contact", key, str(e)))
            except Exception as e:  # noqa: BLE001 - one scene's failure is reported, the other still runs
                self.errors.append(("contact", f"{key}: {type(e).__name__}: {e}"))
                traceback.print_exc(file=sys.stderr)

    def node_section(self):
        from mbs_ros.bench import node

        self.node = node.run(self.quick, log_dir=self.args.node_logs, progress=_progress)
        for part in ("realtime", "lockstep", "round_trip"):
            if "error" in self.node.get(part, {}):
                self.errors.append(("node", f"{part}: {self.node[part]['error']}"))

    def contact_node_section(self):
        from mbs_ros.bench import contact_node

        self.contact_node = contact_node.run(self.quick, log_dir=self.args.node_logs, progress=_progress)
        if "error" in self.contact_node:
            self.errors.append(("contact_node", self.contact_node["error"]))

    def headless_section(self):
        from mbs_ros.bench import headless

        rows, self.headless = headless.run(self.quick, self.plan, self.tol, progress=_progress)
        self.rows.extend(rows)

    # ------------------------------------------------------------------------------------------ verdicts
    def agreement_failures(self):
        return [r for r in self.rows if not r["agree"]]

    def targets(self):
        """(what, met) for every row with a target."""
        out = [(f"{r['section']} {r['model']} {r['kernel']}", r["met"]) for r in self.rows
               if r.get("met") is not None and r["section"] != "scaling"]
        for fam, s in (self.scaling or {}).items():
            if s["met"] is not None:
                out.append((f"scaling {fam} N={s['n_largest']} per body-step", s["met"]))
        for part in ("realtime", "lockstep", "round_trip"):
            res = (self.node or {}).get(part)
            if res is not None:
                out.append((f"node {part}", bool(res.get("met", False))))
        if self.headless is not None:
            out.append(("headless real-time factor", self.headless["met"]))
        if self.contact_node is not None and "error" not in self.contact_node:
            out.append(("contact_node real time", self.contact_node["met"]))
        return out


# ---------------------------------------------------------------------------------------------- printing
def _us(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if x < 10:
        return f"{x:.2f}"
    if x < 1000:
        return f"{x:.1f}"
    return f"{x:,.0f}"


def _ratio(r):
    return "—" if r.get("ratio") is None else f"{r['ratio']:.2f}x"


def _iqr(r):
    return "" if r.get("ratio") is None else f"{r['ratio_q25']:.2f}-{r['ratio_q75']:.2f}"


def _err(x, agree):
    return f"{x:.0e}" + ("" if agree else " FAIL")


def _verdict(met):
    return "" if met is None else ("met" if met else "MISSED")


def _table(headers, rows, aligns):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(str(c).rjust(w) if a == ">" else str(c).ljust(w) for c, w, a in zip(cells, widths, aligns))

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def print_header(env, run):
    p = run.plan
    print("mbs_ros benchmark: ours (mbs_ros.dynamics) against Pinocchio and MuJoCo in one process, then the node"
          + (" [--quick]" if run.quick else ""))
    print(f"environment: {env.get('cpu')}, {env.get('logical_cpus')} logical CPUs, load "
          f"{' '.join(str(x) for x in env.get('loadavg_at_start', []))} at start; Python {env['python']}; "
          f"numpy {env['numpy']}, pin {env['pin']}, mujoco {env['mujoco']}, numba {env['numba']}; "
          f"mbs_ros backend: {env['mbs_ros_backend']}")
    print(f"method: thread CPU time; {p.blocks} blocks per side alternating ours, peer, ours, ... of {p.samples} "
          f"samples of ~{p.sample_s * 1e3:g} ms; µs/call = median of a side's block medians; ratio = ours/peer, "
          f"the median of the paired block ratios (IQR beside it); agreement tolerance {run.tol:g} relative")
    sys.stdout.flush()


def print_kernels(run):
    rows = [r for r in run.rows if r["section"] == "kernels"]
    if not rows:
        return
    print("\n1. Kernels vs Pinocchio (same URDF text and state; target: every kernel <= 5x, aba <= 3x)")
    body = [(r["label"], r["nv"], r["kernel"], _us(r["ours_us"]), _us(r["peer_us"]), _ratio(r), _iqr(r),
             _err(r["err"], r["agree"]), r["target"], _verdict(r["met"])) for r in rows]
    print(_table(("model", "nv", "kernel", "ours µs", "pin µs", "ratio", "IQR", "rel.err", "target", ""), body,
                 "<><>>>>><<"))
    notes = sorted({f"{r['label']}: {r['note']}; rel.err against our numpy backend" for r in rows if r.get("note")})
    for n in notes:
        print(f"  {n}")
    print("  coriolis: agreement on C v (C is not unique); crba: Pinocchio fills the upper triangle; "
          "computeAllTerms: Pinocchio's also computes Jacobians, CoM and energies")
    sys.stdout.flush()


def print_derivatives(run):
    rows = [r for r in run.rows if r["section"] == "derivatives"]
    if not rows:
        return
    print("\n6. Derivatives of the dynamics vs Pinocchio (∂/∂q along q ⊕ δ, ∂/∂v, and M or M⁻¹; target: <= 2x)")
    body = [(r["label"], r["nv"], r["kernel"], _us(r["ours_us"]), _us(r["peer_us"]), _ratio(r), _iqr(r),
             _us(r["kernel_us"]), "—" if r["kernel_ratio"] is None else f"{r['kernel_ratio']:.2f}x",
             _err(r["err"], r["agree"]), r["target"], _verdict(r["met"])) for r in rows]
    print(_table(("model", "nv", "kernel", "ours µs", "pin µs", "ratio", "IQR", "kernel µs", "kernel ratio",
                  "rel.err", "target", ""), body, "<><>>>>>>><<"))
    print("  ours: Model.rnea_derivatives / aba_derivatives (argument checks included; the target's); kernel: the "
          "compiled kernel alone; rel.err: the worst of the three matrices, both; Pinocchio fills the upper "
          "triangle of M and M⁻¹")
    sys.stdout.flush()


def print_step(run):
    rows = [r for r in run.rows if r["section"] == "step"]
    if not rows:
        return
    print("\n2. One step vs MuJoCo mj_step (dt = 1 ms, contacts/limits off, same gravity; target: RK4 <= 2x on the "
          "12-DOF vehicle-manipulator and the UR5 free-flyer)")
    body = [(r["label"], r["nv"], r["kernel"], _us(r["ours_us"]), _us(r["peer_us"]), _ratio(r), _iqr(r),
             _err(r["qacc_err"], r["qacc_err"] <= r["tol"]), _err(r["step_err"], r["step_err"] <= r["tol"]),
             f"{r['delta_ours']:.0e}", r["target"], _verdict(r["met"])) for r in rows]
    print(_table(("model", "nv", "step", "ours µs", "mujoco µs", "ratio", "IQR", "qacc err", "step err", "Δ ours",
                  "target", ""), body, "<><>>>>>>><<"))
    print("  qacc err: mj_forward vs our forward dynamics; step err: mj_step vs MuJoCo's scheme replayed with our "
          "forward dynamics; Δ ours: our step vs mj_step (information: the schemes differ on a free joint, and "
          "MuJoCo's Euler is semi-implicit, ours explicit Lie-Euler)")
    sys.stdout.flush()


def print_scaling(run):
    if not run.scaling:
        return
    print("\n3. Scaling of one RK4 step with N bodies (fixed base; t ~ N^p fitted by least squares on log-log)")
    body = []
    for fam, s in run.scaling.items():
        for p in s["points"]:
            body.append((fam, p["n"], _us(p["ours_us"]), _us(p["mujoco_us"]), f"{1e3 * p['ours_us'] / p['n']:.0f}",
                         f"{1e3 * p['mujoco_us'] / p['n']:.0f}", f"{p['ratio']:.2f}x", _err(p["err"], p["agree"])))
    print(_table(("model", "N", "ours µs", "mujoco µs", "ours ns/body", "mujoco ns/body", "ratio", "rel.err"), body,
                 "<>>>>>>>"))
    for fam, s in run.scaling.items():
        print(f"  {fam}: exponent ours {s['exponent_ours']:.2f}, MuJoCo {s['exponent_mujoco']:.2f}; at N = "
              f"{s['n_largest']}: {s['ours_ns_per_body_step']:.0f} vs {s['mujoco_ns_per_body_step']:.0f} ns per "
              f"body-step ({s['ratio']:.2f}x; target {s['target']}) {_verdict(s['met'])}")
    sys.stdout.flush()


def print_contact(run):
    rows = [r for r in run.rows if r["section"] == "contact"]
    if not rows:
        return
    print("\n7. One contact step vs MuJoCo mj_step (h = 1 ms, elliptic cones, settled scenes; target: <= 2x)")
    body = [(r["label"], r["nv"], f"{r['n_contacts']} / {r['mujoco_contacts']}", _us(r["ours_us"]),
             _us(r["peer_us"]), _ratio(r), _iqr(r), _us(r["us_per_contact"]), _us(r["solve_us_per_contact"]),
             f"{r['sweeps']}", f"{r['weight_err']:.0e}", _err(r["err"], r["agree"]), r["target"],
             _verdict(r["met"])) for r in rows]
    print(_table(("scene", "nv", "contacts ours/mj", "ours µs", "mujoco µs", "ratio", "IQR", "µs/contact",
                  "solve µs/contact", "sweeps", "weight err", "rel.err", "target", ""), body, "<>>>>>>>>>>><<"))
    print("  µs/contact: the whole step over our contacts; weight err: the ground's normal force against the "
          "weight (information); rel.err: our compiled step against the numpy reference (same state, contacts, "
          "warm start)")
    for r in rows:
        print(f"  split of our step, {r['model']} (each part timed alone at the settled state):")
        body = [(s["part"], _us(s["us"]), f"{100 * s['us'] / r['ours_us']:.0f} %") for s in r["split"]]
        print("    " + _table(("part", "µs", "share"), body, "<>>").replace("\n", "\n    "))
    sys.stdout.flush()


def _node_control_rate() -> float:
    from mbs_ros.bench.node import CONTROL_RATE

    return CONTROL_RATE


def print_node(run):
    n = run.node
    if n is None:
        return
    print(f"\n4. The node (real processes; ROS_DOMAIN_ID {n.get('ros_domain_id')}, localhost, namespace "
          f"{n.get('namespace')}; {n.get('window_s')} s windows; logs in {n.get('log_dir')})")
    rt = n.get("realtime", {})
    if "error" in rt:
        print(f"  real time: FAILED: {rt['error']}")
    else:
        print(f"  real time, 12-DOF vehicle-manipulator at {rt['requested_hz']:g} Hz, publishing at "
              f"{rt['publish_rate_hz']:g} Hz: {rt['physics_rate_hz']:.1f} steps per wall second, node CPU "
              f"{100 * rt['cpu_share']:.0f} % of one core (target {rt['target']}) {_verdict(rt['met'])}")
    for fl in n.get("floor", []):
        if "error" in fl:
            print(f"  floor: FAILED: {fl['error']}")
        else:
            print(f"  floor: one Odometry through an rclpy echo process ({fl['executor']}): median "
                  f"{fl['median_ms']:.3f} ms, p99 {fl['p99_ms']:.3f} ms over {fl['messages']} messages; one such "
                  f"exchange per {1e3 / _node_control_rate():g} ms period bounds the lockstep real-time factor at "
                  f"{fl['lockstep_rtf_bound']:.1f}")
    ls = n.get("lockstep", {})
    if "error" in ls:
        print(f"  lockstep: FAILED: {ls['error']}")
    else:
        print(f"  lockstep with the controller at {ls['control_rate_hz']:g} Hz (physics {ls['physics_rate_hz']:g} "
              f"Hz): real-time factor {ls['real_time_factor']:.2f} (target {ls['target']}) {_verdict(ls['met'])}; "
              f"CPU: dynamics {100 * ls['cpu_share_dynamics']:.0f} %, controller "
              f"{100 * ls['cpu_share_controller']:.0f} % of one core")
    rtt = n.get("round_trip", {})
    if "error" in rtt:
        print(f"  round trip: FAILED: {rtt['error']}")
    else:
        rtf = rtt.get("real_time_factor_while_measuring")
        print(f"  state -> command round trip (lockstep, {rtt['periods']} periods): median {rtt['median_ms']:.3f} "
              f"ms, p99 {rtt['p99_ms']:.3f} ms (target {rtt['target']}) {_verdict(rtt['met'])}"
              + (f"; real-time factor {rtf:.2f} while subscribed" if rtf else ""))
        print("    = reception here of the command stamped t (later of cmd_wrench, joint_command) - reception here "
              "of the state t (later of odom, joint_states), middleware reception times")
    sys.stdout.flush()


def print_headless(run):
    h = run.headless
    rows = [r for r in run.rows if r["section"] == "headless"]
    if h is None and not rows:
        return
    print("\n5. Headless run: 12-DOF vehicle-manipulator, computed torque at 500 Hz, RK4 physics at 1 kHz "
          "(mbs_ros.headless.run_scenario; target: >= 50x real time on one core)")
    if rows:
        body = [(r["kernel"], _us(r["ours_us"]), _us(r["peer_us"]), _ratio(r), _iqr(r), _err(r["err"], r["agree"]))
                for r in rows]
        print(_table(("part", "ours µs", "reference µs", "ratio", "IQR", "err"), body, "<>>>>>"))
        print("  computed torque: compiled kernel vs the numpy reference (compiled=False); lockstep period: one "
              "compiled call for both steps vs one advance(1) per step (states must be identical: err 0)")
    if h is None:
        return
    fl = h.get("physics_floor", {})
    print(f"  real-time factor {h['real_time_factor']:.1f}x on thread CPU time ({h['us_per_period']:.0f} µs per "
          f"2 ms period; wall-clock factor of a {h['duration_s']:g} s run with set-up: "
          f"{h['wall_real_time_factor']:.1f}x) (target {h['target']}) {_verdict(h['met'])}")
    py = h.get("python_path")
    if py:
        print(f"  the same run the Python way (run_scenario(fast=False), the same records): "
              f"{py['real_time_factor']:.1f}x ({py['us_per_period']:.0f} µs per period)")
    if fl.get("us_per_period"):
        print(f"  physics alone (2 RK4 steps, compiled): {fl['us_per_period']:.1f} µs per period, a bound of "
              f"{fl['real_time_factor_bound']:.0f}x")
    if h.get("breakdown"):
        print("  per-period breakdown of the fast path (thread CPU: the compiled call timed, physics timed alone):")
        body = [(b["part"], f"{100 * b['share']:.1f} %", f"{b['us']:.1f}") for b in h["breakdown"]]
        print("    " + _table(("part", "share", "µs"), body, "<>>").replace("\n", "\n    "))
    sys.stdout.flush()


def print_contact_node(run):
    c = run.contact_node
    if c is None:
        return
    print(f"\n8. The dynamics node with contacts in real time (real processes: {c.get('scenario')}'s nodes, not "
          f"lockstep, no push; ROS_DOMAIN_ID {c.get('ros_domain_id')}; logs in {c.get('log_dir')})")
    if "error" in c:
        print(f"  FAILED: {c['error']}")
        return

    def ms(x):
        return "—" if x is None else f"{x:.3f} ms"

    print(f"  Solo12 standing ({c['contacts']} contacts) at {c['physics_rate_hz']:g} Hz physics, control "
          f"{c['control_rate_hz']:g} Hz, over {c['window_s']:.1f} s: {c['real_time_factor']:.2f} of real time "
          f"({c['sim_s']:.2f} s simulated), dynamics node CPU {100 * c['cpu_share']:.0f} % of one core (controller "
          f"{100 * (c['cpu_share_controller'] or 0):.0f} %) (target {c['target']}) {_verdict(c['met'])}")
    if c.get("cpu_per_sim_s"):
        print(f"  CPU per simulated second: {c['cpu_per_sim_s']:.2f} s (below 1: one free core keeps real time; "
              f"load at start {' '.join(str(x) for x in c.get('loadavg', []))})")
    host = c.get("host_mujoco_us")
    print(f"  this host: MuJoCo's mj_step of Solo12 standing {'—' if host is None else f'{host:.1f} µs'} of CPU "
          "(the same figures differ twofold between days on a shared host; compare runs on the same day)")
    print(f"  contact step (thread CPU time): mean {ms(c['contact_step_mean_ms'])} over the window's "
          f"{c['contact_steps_in_window']} "
          f"contact steps, longest {ms(c['contact_step_longest_ms'])} since the start (the landing included); "
          f"longest callback (wall clock) {ms(c['longest_callback_ms'])} ({c['longest_callback']}) against a "
          f"{1e3 / c['physics_rate_hz']:g} ms physics period")
    sys.stdout.flush()


def print_summary(run, wall):
    print("\nsummary")
    t = run.targets()
    met = [w for w, ok in t if ok]
    missed = [w for w, ok in t if not ok]
    print(f"  targets: {len(met)} met, {len(missed)} missed" + (": " + "; ".join(missed) if missed else ""))
    fails = run.agreement_failures()
    n_checks = len(run.rows)
    if fails:
        print(f"  agreement: {len(fails)} of {n_checks} rows disagree beyond {run.tol:g}: "
              + "; ".join(f"{r['section']} {r['model']} {r['kernel']} ({r['err']:.1e})" for r in fails))
    elif n_checks:
        print(f"  agreement: all {n_checks} rows within {run.tol:g}")
    for sec, what, why in run.skipped:
        print(f"  skipped {sec} {what}: {why}")
    for sec, msg in run.errors:
        print(f"  ERROR in {sec}: {msg.splitlines()[0]}")
    print(f"  wall time {wall:.0f} s")


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m mbs_ros.bench", description=PACKAGE_DOC,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="small models, few repetitions, no N = 1000, no node sections (node, contact_node) "
                             "unless --only names them; a smoke test of agreement (exit 1 on a disagreement), not of "
                             "time")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of the tables")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, metavar="SECTION",
                        help=f"run only these sections ({', '.join(SECTIONS)})")
    parser.add_argument("--tol", type=float, default=TOL, help=f"agreement tolerance, relative (default {TOL:g})")
    parser.add_argument("--node-logs", metavar="DIR", help="keep the node processes' logs here (default: a temporary "
                                                           "directory, printed)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C does, so that every node process started is stopped (finally blocks, atexit)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    t0 = time.monotonic()
    sections = list(args.only) if args.only else [s for s in SECTIONS if not (args.quick and s in NODE_SECTIONS)]
    run = Run(args)
    env = environment()
    if not args.json:
        print_header(env, run)
    for name, fn, show in (("kernels", run.kernels, print_kernels), ("step", run.step, print_step),
                           ("scaling", run.scaling_section, print_scaling), ("node", run.node_section, print_node),
                           ("headless", run.headless_section, print_headless),
                           ("derivatives", run.derivatives_section, print_derivatives),
                           ("contact", run.contact_section, print_contact),
                           ("contact_node", run.contact_node_section, print_contact_node)):
        if name not in sections:
            continue
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - a section's crash is reported; the next one runs
            run.errors.append((name, f"{type(e).__name__}: {e}"))
            traceback.print_exc(file=sys.stderr)
        if not args.json:
            show(run)
    wall = time.monotonic() - t0
    ok = not run.agreement_failures() and not run.errors
    if args.json:
        doc = dict(environment=env, quick=args.quick, sections=sections, tolerance=args.tol,
                   method=dict(clock="time.thread_time_ns", **vars(run.plan)),
                   rows=run.rows, scaling=run.scaling, node=run.node, headless=run.headless,
                   contact_node=run.contact_node,
                   targets=[dict(what=w, met=m) for w, m in run.targets()],
                   agreement_ok=not run.agreement_failures(),
                   errors=[dict(section=s, message=m) for s, m in run.errors],
                   skipped=[dict(section=s, what=w, reason=r) for s, w, r in run.skipped],
                   wall_s=wall, ok=ok)
        print(json.dumps(_jsonable(doc), indent=1))
    else:
        print_summary(run, wall)
    return 0 if ok else 1
