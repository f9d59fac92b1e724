"""Our contact solver (warm-started, as each step runs it) against Pinocchio 4's exact ADMM
(``pin.ADMMConstraintSolver`` with ``solve_ncp``, called cold from Python with its constraint models built per call,
as feeding it our Delassus matrix each step would) on the settled Solo12 and 5-box-stack problems of the bench:
time per solve (process CPU) and the natural-map residual. ``python -m tools.contact_solver_timing``
(docs/contact.md, "The solver")."""
from __future__ import annotations

import time

import numpy as np
import pinocchio as pin

from mbs_ros.bench.contact import pipeline, solo12, stack5
from mbs_ros.dynamics.contact.solver import residual, solve


def pin_solve(G, g, mu, nc, tol: float = 1e-14, max_iterations: int = 100000):
    """``(converged, lam)``: Pinocchio's exact (NCP) ADMM on our ``G``, ``g`` (its contacts order rows (t1, t2, n))
    to ``tol`` within ``max_iterations`` (the defaults: the tests' reference, test_contact_solver)."""
    model = pin.Model()
    jid = model.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "ff")
    model.appendBodyToJoint(jid, pin.Inertia.Identity(), pin.SE3.Identity())
    perm = np.concatenate([[3 * i + 1, 3 * i + 2, 3 * i] for i in range(nc)])
    models, datas = pin.StdVec_ConstraintModel(), pin.StdVec_ConstraintData()
    for i in range(nc):
        c = pin.PointContactConstraintModel(model, jid)
        c.setFriction(float(mu[i]))
        cm = pin.ConstraintModel(c)
        models.append(cm)
        datas.append(cm.createData())
    settings = pin.ADMMSolverSettings()
    settings.max_iterations = int(max_iterations)
    for name in ("absolute_feasibility_tol", "absolute_complementarity_tol", "relative_feasibility_tol",
                 "relative_complementarity_tol"):
        setattr(settings, name, tol)
    settings.solve_ncp = True
    result = pin.ADMMSolverResult()
    ok = pin.ADMMConstraintSolver(3 * nc).solve(pin.DelassusOperatorDense(G[np.ix_(perm, perm)]), g[perm], models,
                                                datas, settings, result)
    lam = np.empty(3 * nc)
    lam[perm] = result.retrieveConstraintImpulses()
    return ok, lam


def main(repeats: int = 20) -> None:
    for name, make in (("solo12", solo12), ("stack5", stack5)):
        p = pipeline(make(300))
        _, G, g = p["parts"]["Delassus G, g"]()
        nc = p["n_contacts"]
        mu = np.array([c.mu for c in p["contacts"]])
        lam0 = p["parts"]["rows, warm start"]()[3]
        rows = [("ours, warm-started (as each step)", lambda: solve(G, g, mu, nc, lam0=lam0, max_sweeps=100).lam)]
        for tol in (1e-6, 1e-9):
            rows.append((f"pinocchio ADMM, tol {tol:g}, cold",
                         lambda tol=tol: pin_solve(G, g, mu, nc, tol, max_iterations=1000)[1]))
        for label, f in rows:
            f()
            t = time.process_time()
            for _ in range(repeats):
                lam = f()
            dt = (time.process_time() - t) / repeats
            print(f"{name} ({nc} contacts): {label}: {dt * 1e6:.0f} us, residual {residual(G, g, mu, nc, lam):.1e} "
                  f"(scale max|g| {np.abs(g).max():.1e})")


if __name__ == "__main__":
    main()
