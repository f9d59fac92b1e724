"""The nodes' ROS-free cores: what each node computes, with explicit inputs and outputs, and nothing of rclpy.

The nodes in :mod:`mbs_ros.nodes` are adapters (messages -> core calls -> messages) and the headless run
(:mod:`mbs_ros.headless`) wires the same cores in one process, so no check, grid loop or conversion exists twice:

- :mod:`mbs_ros.cores.loop` the simulation loop (the Simulator, its sensor suite, the publication grids, the lockstep periods);
  :mod:`mbs_ros.cores.commands` the command intake (accepted, or rejected with its kind and reason); :mod:`mbs_ros.cores.dynamics` the
  dynamics node's model, simulator and state views; :mod:`mbs_ros.cores.dynamics_settings` its settings;
- :mod:`mbs_ros.cores.controller`, :mod:`mbs_ros.cores.controller_settings`, :mod:`mbs_ros.cores.controller_state` the controller's law, limits and the
  state it takes from odom/joint_states or the estimator; :mod:`mbs_ros.cores.reference` the reference node's trajectories;
  :mod:`mbs_ros.cores.estimator`, :mod:`mbs_ros.cores.estimator_settings` the estimator's filter intake;
- :mod:`mbs_ros.cores.parameters` every node parameter declared once with its rules, :mod:`mbs_ros.cores.params` the checks derived from
  them, :mod:`mbs_ros.cores.paramsfile` ``--params-file`` reading; :mod:`mbs_ros.cores.rotations`, :mod:`mbs_ros.cores.pacing`, :mod:`mbs_ros.cores.ratelimit` helpers.
"""
