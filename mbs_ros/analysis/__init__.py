"""Reading and analysing recorded runs, ROS-free: :mod:`.reader` (MCAP -> per-topic series), :mod:`.series`
(tracking errors, energy). :mod:`mbs_ros.plot` and :mod:`mbs_ros.animate` sit above them."""
