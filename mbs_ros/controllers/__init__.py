"""ROS-free control laws (computed torque, passivity-based, PD + gravity)."""
