"""Contact and joint limits: the exact Coulomb contact problem (:mod:`mbs_ros.dynamics.contact.solver`)."""
from mbs_ros.dynamics.contact.solver import SolveResult, local_contact, residual, solve

__all__ = ["SolveResult", "local_contact", "residual", "solve"]
