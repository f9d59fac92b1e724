"""The benchmark as a command: ``python -m mbs_ros.bench [--quick] [--json] [--only SECTION ...]`` (``make bench``).

In one process and one run, ours and the peer side by side with the ratio ours/peer, each row checked for
agreement first and marked against its target:

1. ``kernels``: ``rnea``, ``crba``, ``computeCoriolisMatrix``, ``aba``, ``computeAllTerms`` against Pinocchio
   (``Model.inverse_dynamics``, ``mass_matrix``, ``coriolis_matrix``, ``forward_dynamics``, ``all_terms``) on the
   6-DOF arm (fixed), the SE(3) vehicle + arm (12 DOF), the UR5 of example-robot-data (fixed and free-flyer),
   chains of 12, 100 (and 1000: ours alone) revolute links and binary trees. Target: every kernel <= 5x
   Pinocchio, aba <= 3x.
2. ``step``: one ``integrators.step`` (RK4 and Euler) against one ``mujoco.mj_step`` (mjINT_RK4, mjINT_EULER) on
   the same URDF, contacts and limits off. Target: RK4 <= 2x MuJoCo's on the 12-DOF model and the UR5
   free-flyer.
3. ``scaling``: the RK4 step time over chains and binary trees of N = 12 ... 1000 bodies, the fitted exponent
   p of t ~ N^p for both, and the time per body-step at N = 1000. Target: <= MuJoCo's.
4. ``node``: the dynamics node as a process: the physics rate it holds at 1 kHz in real time and its CPU share
   (target: 1 kHz under half a core); lockstep with the controller node at 500 Hz (target: real-time factor
   >= 10); the state -> command round trip (target: median < 0.5 ms).

5. ``headless``: the vehicle-manipulator scenario with computed torque at 500 Hz and RK4 physics at 1 kHz run by
   :func:`mbs_ros.headless.run_scenario`: the compiled law and the one-call lockstep period checked against their
   references, the real-time factor on thread CPU time and the per-period breakdown. Target: >= 50x real time.
6. ``derivatives``: ``computeRNEADerivatives`` and ``computeABADerivatives`` against Pinocchio
   (``Model.rnea_derivatives``, ``Model.aba_derivatives``: ∂/∂q along q ⊕ δ, ∂/∂v, M or M⁻¹) on the kernels
   section's robots. Target: within 2x of Pinocchio.
7. ``contact``: one contact step (``ContactWorld.step``: Coal, the exact Coulomb solver, the step on the group)
   against one ``mujoco.mj_step`` (elliptic cones) on the same settled scene, h = 1 ms: Solo12 standing on a PD
   stance (example-robot-data's URDF, collision meshes as convex hulls) and a stack of five boxes; the cost per
   contact and the split of our step part by part (:mod:`mbs_ros.bench.contact`). Target: <= 2x MuJoCo's.
8. ``contact_node``: the dynamics node with contacts free-running in real time as real processes (solo12_stand's
   nodes: Solo12 standing on the ground, physics at 1 kHz): the share of real time it keeps, its CPU share, the
   mean and longest contact step and its longest callback (:mod:`mbs_ros.bench.contact_node`). Target: real time
   within one core.

Timing (:mod:`mbs_ros.bench.timing`): thread CPU time, alternating blocks, the median of the paired block
ratios; each side's median µs per call. Agreement: relative errors against the peer (``--tol``, 1e-8); any
disagreement, or an error in a section, makes the exit code 1 (targets never do). ``--quick``: small models,
few repetitions, no N = 1000, no node sections (``node``, ``contact_node``) unless ``--only`` names them: the CI
smoke test of agreement (``test/e2e/test_bench.py``). The sections' modules document exactly what is compared and
measured.
"""
