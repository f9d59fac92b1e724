"""Thin rclpy nodes: parameters, topics, services and message <-> numpy conversion."""
