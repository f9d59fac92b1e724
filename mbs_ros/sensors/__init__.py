"""Sensor models (ROS-free): what a real robot measures, from the simulator's own state and accelerations, with the
standard noise models (IMU, pressure/depth, DVL, magnetometer, GNSS, joint encoders, force/torque). Declared per
robot in YAML (docs/sensors.md); sampled on whole physics steps by :class:`~mbs_ros.sensors.suite.SensorSuite`,
which the dynamics node publishes."""
