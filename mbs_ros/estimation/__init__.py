"""State estimation (ROS-free): the invariant EKF on SE₂(3) for IMU + DVL + depth + compass (Barrau & Bonnabel
2017; Potokar, Norman & Mangelson 2021), which the estimator node runs on the sensors' topics."""
