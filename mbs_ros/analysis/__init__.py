"""Reading and analysing recorded runs, ROS-free: :mod:`.mcapfile` (an MCAP file's complete messages, its damage,
recovery), :mod:`.reader` (MCAP -> per-topic series), :mod:`.series` (tracking errors, energy).
:mod:`mbs_ros.plot` and :mod:`mbs_ros.animate` sit above them."""
