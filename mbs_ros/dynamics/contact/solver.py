"""The velocity-level contact problem with exact Coulomb friction, solved by block Gauss–Seidel (``docs/contact.md``).

One time step of length h (Stewart & Trinkle 1996, Anitescu & Potra 1997; ``../shared/notes/contact.md``) leaves
the impulses ``λ`` of the constraints to find from the Delassus matrix ``G = J M⁻¹ Jᵀ`` and the free velocity
``g = J v_f`` (plus a stabilisation term): the constraint velocity is ``c = G λ + g``. The rows come in blocks:

* a **contact** ``i`` has three rows, its normal then two tangents, a friction coefficient ``μ_i ≥ 0``, and obeys
  Coulomb's law exactly (the nonlinear complementarity problem on the second-order cone, not its convex
  relaxation): ``λ_i ∈ K_μ = {‖λ_t‖ ≤ μ λ_n}``, ``c_n ≥ 0``, ``λ_n c_n = 0``; sticking (``c_i = 0``) inside the
  cone, sliding on its boundary with ``λ_t = −μ λ_n c_t/‖c_t‖`` (maximal dissipation), or separating (``λ_i = 0``).
  In De Saxcé's form: ``K_μ ∋ λ ⊥ c + μ‖c_t‖ e_n ∈ K_μ*``.
* a **unilateral** row (a joint limit) has ``λ ≥ 0``, ``c ≥ 0``, ``λ c = 0``.

:func:`solve` sweeps the blocks in order, each solved exactly given the others (a contact: separation, the
sticking solution ``−W⁻¹ b``, or the sliding one, found as the root in the friction angle of ``c_t ∥ −λ_t`` on
the cone's boundary with ``c_n = 0``), until the impulses stop changing; :func:`residual` measures how far a
``λ`` is from the exact law (the natural map of De Saxcé's form, in velocity units), the number the diagnostics
report. Everything is compiled (:mod:`mbs_ros.dynamics.kernels.jit`) and allocates only per call.
"""
from __future__ import annotations

import math

import numpy as np

from mbs_ros.dynamics.contact.admm import ANDERSON_MEMORY, ANDERSON_RHO, SLICE, _admm, _anderson_admm
from mbs_ros.dynamics.contact.cones import _project_cone, _saxce, _three_rows, residual
from mbs_ros.dynamics.contact import split as _split
from mbs_ros.dynamics.contact.split import least_norm_split
from mbs_ros.dynamics.kernels.jit import jit

__all__ = ["solve", "residual", "SolveResult", "local_contact", "warm_up"]

#: A solve has converged when its residual (velocity units) is within this fraction of the largest free constraint
#: velocity |g|: 1e-6 of gravity's h·g at rest (1e-8 m/s at h = 1 ms, a 1e-11 m position error per step).
#: Gauss–Seidel runs until no impulse changes by more than ``tol`` (1e-12) relative, far below it, so the closed
#: forms hold to rounding — unless it stalls within this tolerance (redundant contacts: :func:`_gauss_seidel`);
#: the tolerance decides when it hands over to ADMM and what ``converged`` reports.
RESIDUAL_TOLERANCE = 1e-6
_TWO_PI = 2.0 * math.pi
_SAMPLES = 16  # friction angles sampled to bracket the sliding root when Newton's guess fails


@jit
def _slide_conditions(W, b, mu, phi):
    """For λ = λ_n (1, μ cos φ, μ sin φ) with ``c_n = 0``: ``(λ_n, f, s)`` where ``f = c_t × d`` (zero when the
    tangential velocity is parallel to d = (cos φ, sin φ)) and ``s = c_t · d`` (must be ≤ 0: sliding opposes λ_t)."""
    cp, sp = math.cos(phi), math.sin(phi)
    denom = W[0, 0] + mu * (W[0, 1] * cp + W[0, 2] * sp)
    if denom <= 0.0:
        return -1.0, 0.0, 1.0
    ln = -b[0] / denom
    c1 = ln * (W[1, 0] + mu * (W[1, 1] * cp + W[1, 2] * sp)) + b[1]
    c2 = ln * (W[2, 0] + mu * (W[2, 1] * cp + W[2, 2] * sp)) + b[2]
    return ln, c1 * sp - c2 * cp, c1 * cp + c2 * sp


@jit
def local_contact(W, b, mu, out):
    """The exact Coulomb impulse of one contact with Delassus block ``W`` (3×3) and velocity ``c = W λ + b``;
    written to ``out`` (3,). Returns 0 (separating), 1 (sticking) or 2 (sliding); 3 when no sliding root was
    found (then ``out`` is the sticking impulse projected onto the cone, counted by the caller)."""
    if b[0] >= 0.0:  # λ = 0 gives c_n = b_n ≥ 0: the contact opens (any tangential velocity is allowed)
        out[0] = 0.0
        out[1] = 0.0
        out[2] = 0.0
        return 0
    # sticking: W λ = −b
    a00, a01, a02 = W[0, 0], W[0, 1], W[0, 2]
    a10, a11, a12 = W[1, 0], W[1, 1], W[1, 2]
    a20, a21, a22 = W[2, 0], W[2, 1], W[2, 2]
    det = a00 * (a11 * a22 - a12 * a21) - a01 * (a10 * a22 - a12 * a20) + a02 * (a10 * a21 - a11 * a20)
    ln = lt1 = lt2 = 0.0
    if det != 0.0:
        r0, r1, r2 = -b[0], -b[1], -b[2]
        ln = (r0 * (a11 * a22 - a12 * a21) - a01 * (r1 * a22 - a12 * r2) + a02 * (r1 * a21 - a11 * r2)) / det
        lt1 = (a00 * (r1 * a22 - a12 * r2) - r0 * (a10 * a22 - a12 * a20) + a02 * (a10 * r2 - r1 * a20)) / det
        lt2 = (a00 * (a11 * r2 - r1 * a21) - a01 * (a10 * r2 - r1 * a20) + r0 * (a10 * a21 - a11 * a20)) / det
        if ln >= 0.0 and math.sqrt(lt1 * lt1 + lt2 * lt2) <= mu * ln:
            out[0] = ln
            out[1] = lt1
            out[2] = lt2
            return 1
    if mu == 0.0:  # frictionless: c_n = 0 with λ_t = 0
        out[0] = -b[0] / a00
        out[1] = 0.0
        out[2] = 0.0
        return 2
    # sliding: a root of f(φ) with λ_n ≥ 0 and s ≤ 0. Newton from the sticking impulse's direction first.
    phi = math.atan2(lt2, lt1) if (lt1 != 0.0 or lt2 != 0.0) else math.atan2(-b[2], -b[1])
    found = False
    for _ in range(30):
        ln, f, s = _slide_conditions(W, b, mu, phi)
        if ln < 0.0 or s > 0.0:
            break
        # df/dφ by a central difference of the smooth f (no closed form needed at this size)
        e = 1e-7
        _, fp, _ = _slide_conditions(W, b, mu, phi + e)
        _, fm, _ = _slide_conditions(W, b, mu, phi - e)
        d = (fp - fm) / (2.0 * e)
        if d == 0.0:
            break
        step = f / d
        phi -= step
        if abs(step) < 1e-15:
            ln, f, s = _slide_conditions(W, b, mu, phi)
            found = ln >= 0.0 and s <= 0.0
            break
    if not found:  # bracket a sign change of f among sampled angles, then bisect
        best = -1.0
        prev_phi = 0.0
        _, prev_f, _ = _slide_conditions(W, b, mu, 0.0)
        for k in range(1, _SAMPLES + 1):
            p = _TWO_PI * k / _SAMPLES
            _, fk, _ = _slide_conditions(W, b, mu, p)
            if (prev_f <= 0.0) != (fk <= 0.0):
                lo, hi, flo = prev_phi, p, prev_f
                for _ in range(80):
                    mid = 0.5 * (lo + hi)
                    _, fm, _ = _slide_conditions(W, b, mu, mid)
                    if (fm <= 0.0) == (flo <= 0.0):
                        lo, flo = mid, fm
                    else:
                        hi = mid
                mid = 0.5 * (lo + hi)
                lm, _, sm = _slide_conditions(W, b, mu, mid)
                if lm >= 0.0 and sm <= 0.0:
                    phi = mid
                    found = True
                    best = lm
                    break
            prev_phi, prev_f = p, fk
        if found:
            ln = best
    if found:
        ln, f, s = _slide_conditions(W, b, mu, phi)
        out[0] = ln
        out[1] = mu * ln * math.cos(phi)
        out[2] = mu * ln * math.sin(phi)
        return 2
    # no root (W far from symmetric positive): the sticking impulse projected on the cone
    _project_cone(ln, lt1, lt2, mu, out)
    return 3


@jit
def _sweeps(G, g, mu, n_contacts, lam, max_sweeps, tol):
    """Block Gauss–Seidel sweeps in place on ``lam``; returns (sweeps done, largest last change, failed local
    solves in the last sweep)."""
    m = g.shape[0]
    W = np.empty((3, 3))
    b = np.empty(3)
    out = np.empty(3)
    change = 0.0
    failed = 0
    k = 0
    for k in range(1, max_sweeps + 1):
        change = 0.0
        failed = 0
        scale = 0.0
        for i in range(n_contacts):
            r = 3 * i
            acc0, acc1, acc2 = _three_rows(G, g, lam, r)  # the block's three rows of G λ + g
            for a in range(3):
                acc = acc0 if a == 0 else (acc1 if a == 1 else acc2)
                for c in range(3):
                    W[a, c] = G[r + a, r + c]
                    acc -= G[r + a, r + c] * lam[r + c]
                b[a] = acc
            code = local_contact(W, b, mu[i], out)
            if code == 3:
                failed += 1
            for a in range(3):
                d = abs(out[a] - lam[r + a])
                if d > change:
                    change = d
                if abs(out[a]) > scale:
                    scale = abs(out[a])
                lam[r + a] = out[a]
        for r in range(3 * n_contacts, m):
            acc = g[r]
            for j in range(m):
                acc += G[r, j] * lam[j]
            acc -= G[r, r] * lam[r]
            new = -acc / G[r, r]
            if new < 0.0:
                new = 0.0
            d = abs(new - lam[r])
            if d > change:
                change = d
            if new > scale:
                scale = new
            lam[r] = new
        if change <= tol * max(scale, 1e-300) or change == 0.0:
            break
    return k, change, failed


@jit
def _screen(G, mu, inert_fraction):
    """:func:`solve`'s checks of its input in one pass: 1 a friction coefficient not finite or negative, 2 a
    diagonal entry of G below ``−inert_fraction`` × its largest magnitude, 3 an inert row (:func:`_inert_rows`),
    0 none of these (a NaN on the diagonal passes, as the numpy checks let it)."""
    for i in range(mu.shape[0]):
        if not (math.isfinite(mu[i]) and mu[i] >= 0.0):
            return 1
    m = G.shape[0]
    if m == 0:
        return 0
    lo, hi, big = math.inf, -math.inf, 0.0
    for i in range(m):
        d = G[i, i]
        if d != d:
            return 0
        lo = min(lo, d)
        hi = max(hi, d)
        big = max(big, abs(d))
    if lo < -inert_fraction * max(big, 1e-300):
        return 2
    threshold = inert_fraction * max(hi, 0.0)
    for i in range(m):
        if G[i, i] <= threshold:
            return 3
    return 0


#: Gauss–Seidel's sweeps between two looks at the residual (:func:`_gauss_seidel`).
STALL_CHUNK = 10
#: A chunk of sweeps has stalled only if no impulse moved by more than this fraction of the largest over it: a split
#: still on its way (uvms_grasp's fingers: 1e-4 per chunk) carried on through the warm start into every next step
#: and walked a finger's load onto one of its two points, until the handle pivoted about it (ca1c10f's regression).
STALL_MOVE = 1e-6


@jit
def _gauss_seidel_more(G, g, mu, n_contacts, lam, max_sweeps, tol, st, stop_sweeps) -> bool:
    """:func:`_gauss_seidel`'s chunks from the state ``st`` (sweeps done, failed local solves in the last sweep,
    the last chunk's residual, the residual, max |g| and the residual tolerance, both set here at the first call
    where < 0: the tolerance's default) until ``stop_sweeps`` sweeps are done; True when the run is over."""
    if st[4] < 0.0:
        g_max = 0.0
        for a in range(g.shape[0]):
            g_max = max(g_max, abs(g[a]))
        st[4] = g_max
        if st[5] < 0.0:
            st[5] = RESIDUAL_TOLERANCE * g_max + 1e-15
    residual_tol = st[5]
    done, failed, last = int(st[0]), int(st[1]), st[2]
    before = np.empty_like(lam)
    while done < max_sweeps:
        if done >= stop_sweeps:
            st[0], st[1], st[2] = done, failed, last
            return False
        n = min(STALL_CHUNK, max_sweeps - done)
        before[:] = lam
        k, change, failed = _sweeps(G, g, mu, n_contacts, lam, n, tol)
        done += k
        if k < n:
            break
        res = residual(G, g, mu, n_contacts, lam)
        if res <= residual_tol and res > 0.5 * last:
            moved, scale = 0.0, 0.0
            for a in range(lam.shape[0]):
                moved = max(moved, abs(lam[a] - before[a]))
                scale = max(scale, abs(lam[a]))
            if moved <= STALL_MOVE * scale:
                st[0], st[1], st[3] = done, failed, res
                return True
        last = res
    st[0], st[1], st[3] = done, failed, residual(G, g, mu, n_contacts, lam)
    return True


@jit
def _gauss_seidel(G, g, mu, n_contacts, lam, max_sweeps, tol, residual_tol):
    """:func:`_sweeps` on ``lam`` then its :func:`residual`, and max |g|, in one compiled call: (sweeps,
    failed local solves in the last sweep, residual, max |g|). The sweeps run in chunks of :data:`STALL_CHUNK`
    until no impulse changes by more than ``tol`` relative; after a chunk that did not get there, they stop when
    the residual is within ``residual_tol`` (< 0: the default, :data:`RESIDUAL_TOLERANCE` × max |g|), the
    chunk did not halve it and no impulse moved over it by more than :data:`STALL_MOVE` of the largest —
    stalled: redundant contacts (a foot's patch points, a face's four corners) leave the impulses' split among
    them free, and the sweeps can nudge it about for ever without changing c. A split still moving is not
    stalled: stopped there, the warm start carries its drift into the next step (a finger's two points)."""
    st = np.array([0.0, 0.0, np.inf, 0.0, -1.0, residual_tol])
    _gauss_seidel_more(G, g, mu, n_contacts, lam, max_sweeps, tol, st, max_sweeps)
    return int(st[0]), int(st[1]), st[3], st[4]


def _stages_gauss_seidel(G, g, mu, n_contacts, lam, max_sweeps, tol, residual_tol, checkpoint):
    """:func:`_gauss_seidel` in slices of :data:`~mbs_ros.dynamics.contact.admm.SLICE` sweeps, ``checkpoint()``
    between them: (sweeps, failed local solves in the last sweep, residual, the residual tolerance)."""
    st = np.array([0.0, 0.0, np.inf, 0.0, -1.0, -1.0 if residual_tol is None else float(residual_tol)])
    done = 0
    while not _gauss_seidel_more(G, g, mu, n_contacts, lam, max_sweeps, tol, st, done + SLICE):
        done = int(st[0])
        checkpoint()
    return int(st[0]), int(st[1]), st[3], st[5]


def _fallback_sweeps(G, g, mu, n_contacts, lam, sweeps, tol, checkpoint):
    """:func:`_sweeps` on ``lam`` (``sweeps`` at most), in slices with ``checkpoint()`` between them when one is
    given (the sweeps keep no state but ``lam``: the same numbers as one call); (sweeps, failed in the last)."""
    if checkpoint is None:
        more, _, failed = _sweeps(G, g, mu, n_contacts, lam, sweeps, tol)
        return more, failed
    done = 0
    while True:
        n = min(SLICE, sweeps - done)
        k, _, failed = _sweeps(G, g, mu, int(n_contacts), lam, int(n), float(tol))
        done += k
        if k < n or done >= sweeps:
            return done, failed
        checkpoint()


def _nothing() -> None:
    pass


def warm_up() -> None:
    """Call every compiled kernel of the solver (and of the contact step, :func:`kernels.warm_up`) once on a tiny
    problem (one contact, one unilateral row; both ADMMs' iterations too): numba loads them from its cache (or
    compiles them) at the first call, tens of milliseconds that a node pays at start-up instead of inside its first
    contact step."""
    from mbs_ros.dynamics.contact import kernels  # the contact step's own kernels: ContactWorld.warm_up calls this

    kernels.warm_up()
    G = np.array([[2.0, 0.1, 0.0, 0.0], [0.1, 2.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    g = np.array([-1.0, 0.3, 0.0, -0.5])
    mu = np.array([0.5])
    solve(G, g, mu, 1)
    for checkpoint in (None, _nothing):  # and in slices (a node's contact steps: ContactWorld.checkpoint)
        solve(G, g, mu, 1, admm_iterations=SLICE + 1, checkpoint=checkpoint)
        _admm(G, g, mu, 1, np.zeros(4), SLICE + 1, 0.0, checkpoint)
        _anderson_admm(G, g, mu, 1, np.zeros(4), SLICE + 1, 0.0, ANDERSON_MEMORY, ANDERSON_RHO, checkpoint)
        _fallback_sweeps(G, g, mu, 1, np.zeros(4), SLICE + 1, 0.0, checkpoint)
    _saxce(G, g, mu, 1, np.zeros(4), np.empty(4))
    _split.warm_up()


class SolveResult:
    """What :func:`solve` found: the impulses ``lam`` (m,), the constraint velocities ``c = G λ + g``, the sweeps
    done, the residual (velocity units, :func:`residual`) and whether it converged within the budget."""

    __slots__ = ("lam", "velocity", "sweeps", "residual", "converged", "failed_local")

    def __init__(self, lam, velocity, sweeps, residual, converged, failed_local):
        self.lam = lam
        self.velocity = velocity
        self.sweeps = sweeps
        self.residual = residual
        self.converged = converged
        self.failed_local = failed_local

    def __repr__(self):
        return (f"SolveResult(sweeps={self.sweeps}, residual={self.residual:.3g}, converged={self.converged}, "
                f"failed_local={self.failed_local})")


#: A row is inert when its diagonal of G is at most this fraction of G's largest (J M⁻¹ Jᵀ of a row no body can
#: move along is 0, up to the rounding of the mass matrix's factor).
INERT_FRACTION = 1e-12


def _inert_rows(G, n_contacts: int):
    """Rows no body can move along (``G_ii ≤ INERT_FRACTION · max G_jj``, or the whole matrix zero). A contact
    whose normal row is inert is inert as a whole: its normal force is carried by the joints' bearings, not
    decided by the contact (statically undetermined), so it takes no impulse and so no friction either."""
    d = np.diag(G)
    inert = d <= INERT_FRACTION * max(float(np.max(d)), 0.0)
    for i in range(n_contacts):
        if inert[3 * i]:
            inert[3 * i:3 * i + 3] = True
    return inert  # solve() keeps a contact's tangent row inert alone as a unit row with no free velocity


def solve(G, g, mu, n_contacts: int, lam0=None, max_sweeps: int = 200, tol: float = 1e-12,
          residual_tol: float | None = None, admm_iterations: int = 3000,
          fallback_sweeps: int = 5000, checkpoint=None, split: bool = True) -> SolveResult:
    """Impulses for the rows of ``G`` (m×m, symmetric positive semi-definite) and ``g`` (m,): ``n_contacts``
    blocks of three rows (normal, two tangents) with friction ``mu`` (n_contacts,), then unilateral rows.
    ``lam0`` warm-starts (e.g. the last step's impulses). Stops when a sweep changes no impulse by more than
    ``tol`` relative to the largest, or after ``max_sweeps``; ``converged`` means the residual is within
    ``residual_tol`` (default :data:`RESIDUAL_TOLERANCE` × max|g|). Never raises on a hard problem: the caller reports
    ``converged`` and ``residual`` (the step still finishes). ``checkpoint`` (a callable): every stage runs in
    slices of :data:`~mbs_ros.dynamics.contact.admm.SLICE` iterations with ``checkpoint()`` between them (a node
    may suspend the step there: docs/dynamics_node.md, "Contact steps in slices"); the same numbers as without.
    ``split``: where sticking contacts are redundant (``G`` singular on their rows), the converged impulses are
    moved to the least-norm member of the solution set (:func:`~mbs_ros.dynamics.contact.split.least_norm_split`:
    the same velocities, the load shared as vanishing equal compliance would share it); False: Gauss–Seidel's."""
    G = np.ascontiguousarray(G, dtype=float)
    g = np.ascontiguousarray(g, dtype=float).reshape(-1)
    m = g.shape[0]
    if G.shape != (m, m):
        raise ValueError(f"G must be {m}x{m} for {m} rows, got shape {G.shape}")
    if not (0 <= n_contacts and 3 * n_contacts <= m):
        raise ValueError(f"{n_contacts} contacts need {3 * n_contacts} rows, have {m}")
    mu = np.ascontiguousarray(mu, dtype=float).reshape(-1)
    if mu.shape[0] != n_contacts:
        raise ValueError(f"mu must have one value per contact ({n_contacts}), got {mu.shape[0]}")
    screen = _screen(G, mu, INERT_FRACTION)  # the checks below in one compiled pass (0: none applies)
    if screen == 1:
        raise ValueError(f"friction coefficients must be finite and non-negative, got {mu.tolist()}")
    if screen == 2:
        raise ValueError("the Delassus matrix must be positive semi-definite (a negative diagonal)")
    if screen == 3:  # rows no body can move along: their impulse is 0, the rest solved alone
        inert = _inert_rows(G, n_contacts)
        keep = ~inert
        tangent = np.zeros(m, dtype=bool)  # a tangent row alone inert stays in its block as a unit row with g = 0:
        tangent[:3 * n_contacts] = inert[:3 * n_contacts] & np.repeat(~inert[:3 * n_contacts:3], 3)
        keep |= tangent  # its impulse is then 0 whether the contact sticks (c = λ) or slides (c_t against λ_t)
        Gk, gk = G.copy(), g.copy()
        Gk[tangent, :] = 0.0
        Gk[:, tangent] = 0.0
        Gk[tangent, tangent] = 1.0
        gk[tangent] = 0.0
        kept_contacts = keep[:3 * n_contacts:3]
        lam_k = None if lam0 is None else np.asarray(lam0, dtype=float).reshape(m)[keep]
        sub = solve(Gk[np.ix_(keep, keep)], gk[keep], mu[kept_contacts], int(kept_contacts.sum()), lam_k, max_sweeps,
                    tol, residual_tol, admm_iterations, fallback_sweeps, checkpoint, split)
        lam = np.zeros(m)
        lam[keep] = sub.lam
        return SolveResult(lam, G @ lam + g, sub.sweeps, sub.residual, sub.converged, sub.failed_local)
    lam = np.zeros(m) if lam0 is None else np.array(lam0, dtype=float).reshape(m)
    if not m:
        sweeps, failed, res, residual_tol = 0, 0, 0.0, 1e-15 if residual_tol is None else residual_tol
    elif checkpoint is None:
        sweeps, failed, res, g_max = _gauss_seidel(G, g, mu, int(n_contacts), lam, int(max_sweeps), float(tol),
                                                   -1.0 if residual_tol is None else float(residual_tol))
        if residual_tol is None:
            residual_tol = RESIDUAL_TOLERANCE * g_max + 1e-15
    else:
        sweeps, failed, res, residual_tol = _stages_gauss_seidel(G, g, mu, int(n_contacts), lam, int(max_sweeps),
                                                                 float(tol), residual_tol, checkpoint)
    if res > residual_tol and admm_iterations:  # Gauss–Seidel stalls (stacks, redundant contacts): ADMM from here,
        it, res = _anderson_admm(G, g, mu, int(n_contacts), lam, max(int(admm_iterations) // 8, 1),  # accelerated
                                 float(residual_tol), ANDERSON_MEMORY, ANDERSON_RHO, checkpoint)
        sweeps += it
    if res > residual_tol and admm_iterations:  # then the adaptive-ρ ADMM from the best iterate
        it, res = _admm(G, g, mu, n_contacts, lam, int(admm_iterations), float(residual_tol), checkpoint)
        sweeps += it
    if res > residual_tol and fallback_sweeps:  # then Gauss–Seidel again from the best iterate, kept if better
        trial = lam.copy()
        more, failed = _fallback_sweeps(G, g, mu, n_contacts, trial, int(fallback_sweeps), float(tol), checkpoint)
        sweeps += more
        res_trial = residual(G, g, mu, n_contacts, trial)
        if res_trial < res:
            lam, res = trial, res_trial
    if res <= residual_tol and split:  # redundant sticking contacts: the least-norm member of the solution set
        if checkpoint is not None:  # a slice of its own (tens of µs, a pivoted Cholesky of the sticking rows)
            checkpoint()
        lam, res = least_norm_split(G, g, mu, n_contacts, lam, res, residual_tol)
    return SolveResult(lam, G @ lam + g, int(sweeps), float(res), bool(res <= residual_tol), int(failed))
