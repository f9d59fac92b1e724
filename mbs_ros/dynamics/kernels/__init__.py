"""The compiled (numba) kernels, each with its numpy reference in :mod:`mbs_ros.dynamics.algorithms`: the array
layout they share (:mod:`~mbs_ros.dynamics.kernels.layout`), spatial algebra (:mod:`~mbs_ros.dynamics.kernels.spatial`),
the recursions (:mod:`~mbs_ros.dynamics.kernels.multibody`), the Munthe-Kaas step
(:mod:`~mbs_ros.dynamics.kernels.step`), derivatives, control laws (:mod:`~mbs_ros.dynamics.kernels.laws`), one
control period of the headless fast path (:mod:`~mbs_ros.dynamics.kernels.period`); the Python side
:class:`~mbs_ros.dynamics.kernels.compiled.CompiledModel`, the backends (:mod:`~mbs_ros.dynamics.kernels.backends`)
and the numba decorator with its fallback (:mod:`~mbs_ros.dynamics.kernels.jit`).
"""
