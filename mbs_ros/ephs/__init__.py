"""Exergetic port-Hamiltonian systems (EPHS), a small ROS-free compositional layer after Lohmayer, Capobianco
and Leyendecker, "Exergetic Port-Hamiltonian Systems for multibody dynamics" (seed 000).

A system is an interconnection :class:`Pattern` (§2) of boxes filled by the four primitive components, or by
other patterns: :class:`Storage` (energy E(x); flow ẋ, effort dE, eqs. 1, 2), :class:`Dirac` (reversible,
power-neutral, eqs. 3, 19, 21), :class:`Onsager` (irreversible, f = M e/θ₀ with M ≥ 0 annihilating the driving
forces, eqs. 6, 29) and :class:`Environment` (isothermal reservoir at θ₀, exergy ≡ 0, eqs. 7, 30). Typed
:class:`Port` s meet at junctions (eq. 4: equal states, equal efforts, inner flows summing to the outer flow).
``Pattern.flatten()`` gives a :class:`System`, the explicit ODE ẋ = F(x) over the storage states with per
component power and entropy production, and a Lie-group (RKMK) integrator for pose-valued states (§3.8).

    from mbs_ros.ephs import damped_oscillator
    system = damped_oscillator(m=1.0, k=4.0, d=0.3).flatten()      # layout: osc.pe (q), osc.ke (p), env (s)
    t, xs = system.simulate(system.state({"osc.pe": 1.0}), dt=1e-3, steps=1000)
    system.powers(xs[-1]), system.entropy_production(xs[-1]), system.energy(xs[-1])

:mod:`mbs_ros.ephs.examples` builds eqs. (5), (8), the body + spring + damper on a line and the rigid body (22) on SE(3),
linear first [υ; ω] (the paper orders (ω, υ); converted there)."""
from mbs_ros.ephs.components import Dirac, Environment, Onsager, Storage
from mbs_ros.ephs.examples import (body_spring_damper, canonical_coupling, coadjoint_matrix, damped_oscillator,
                       harmonic_oscillator, linear_damper, linear_spring, mechanical_friction, paper_order,
                       point_mass, rigid_body, spatial_momentum, spring)
from mbs_ros.ephs.pattern import Block, Pattern, System
from mbs_ros.ephs.ports import Port, pairing

__all__ = ["Port", "pairing", "Storage", "Environment", "Dirac", "Onsager", "Pattern", "System", "Block",
           "harmonic_oscillator", "damped_oscillator", "body_spring_damper", "rigid_body", "point_mass", "spring",
           "linear_spring", "linear_damper", "mechanical_friction", "canonical_coupling", "coadjoint_matrix",
           "spatial_momentum", "paper_order"]
