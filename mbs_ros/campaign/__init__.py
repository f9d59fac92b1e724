"""Controller test campaigns: many randomized headless runs of a scenario with metrics and pass/fail criteria
(issue 19). ROS-free; Ray is imported only by the Ray engine."""
