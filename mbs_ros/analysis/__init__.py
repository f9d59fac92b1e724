"""Reading and analysing recorded runs, ROS-free: :mod:`mbs_ros.analysis.mcapfile` (an MCAP file's complete messages, its damage,
recovery), :mod:`mbs_ros.analysis.reader` (MCAP -> per-topic series), :mod:`mbs_ros.analysis.series` (tracking errors, energy).
:mod:`mbs_ros.plot` and :mod:`mbs_ros.animate` sit above them."""
