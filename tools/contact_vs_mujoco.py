"""The incline scenes of test/unit/test_contact_closed_forms.py in MuJoCo (elliptic cones), against the closed
form: ``python -m tools.contact_vs_mujoco``. A bench/test-only comparison (MuJoCo is not a runtime dependency)."""
from __future__ import annotations

import math

import mujoco
import numpy as np

G = 9.81


def incline(theta, mu, T=2.0, h=1e-3, impratio=1.0, solref=(0.02, 1.0)):
    """(downslope speed, downslope distance) after T of a 2 kg, 0.2 m box placed at rest on the incline."""
    deg = math.degrees(theta)
    xml = f"""<mujoco><option timestep="{h}" cone="elliptic" impratio="{impratio}" gravity="0 0 -{G}"
      integrator="implicitfast"/><worldbody>
      <geom type="plane" size="5 5 0.1" euler="{deg} 0 0" friction="{mu} 0 0" condim="3"
            solref="{solref[0]} {solref[1]}"/>
      <body pos="0 {-0.1 * math.sin(theta)} {0.1 * math.cos(theta)}" euler="{deg} 0 0"><freejoint/>
        <geom type="box" size="0.1 0.1 0.1" mass="2" friction="{mu} 0 0" condim="3"
              solref="{solref[0]} {solref[1]}"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    q0 = d.qpos[:3].copy()
    for _ in range(int(round(T / h))):
        mujoco.mj_step(m, d)
    down = np.array([0.0, -math.cos(theta), -math.sin(theta)])
    return float(d.qvel[:3] @ down), float((d.qpos[:3] - q0) @ down)


def main():
    for solref in ((0.02, 1.0), (0.002, 1.0)):
        for impratio in (1.0, 100.0):
            for deg, mu in ((30.0, 0.3), (26.0, 0.5)):
                th = math.radians(deg)
                a = max(G * (math.sin(th) - mu * math.cos(th)), 0.0)
                v, x = incline(th, mu, impratio=impratio, solref=solref)
                print(f"solref {solref} impratio {impratio:g} incline {deg:g} deg mu {mu}: v {v:.6f} "
                      f"(closed form {2 * a:.6f}), moved {x:.3e} m")


if __name__ == "__main__":
    main()
