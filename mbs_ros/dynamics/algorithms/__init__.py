"""The numpy reference of every algorithm, each beside its compiled kernel in :mod:`mbs_ros.dynamics.kernels`:
:mod:`~mbs_ros.dynamics.algorithms.multibody` (kinematics, RNEA, CRBA, the structured Coriolis matrix, forward
dynamics; kernels.multibody), :mod:`~mbs_ros.dynamics.algorithms.derivatives` and
:mod:`~mbs_ros.dynamics.algorithms.passive_derivatives` (kernels.derivatives, kernels.passive_derivatives), and the
analyses built on them: constrained systems (:mod:`~mbs_ros.dynamics.algorithms.constraints`), equilibria
(:mod:`~mbs_ros.dynamics.algorithms.equilibrium`), linear and LPV models (:mod:`~mbs_ros.dynamics.algorithms.linear`,
:mod:`~mbs_ros.dynamics.algorithms.lpv`).
"""
