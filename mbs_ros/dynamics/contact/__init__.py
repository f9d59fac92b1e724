"""Contact and joint limits: the exact Coulomb contact problem (:mod:`.solver`)."""
from .solver import SolveResult, local_contact, residual, solve

__all__ = ["SolveResult", "local_contact", "residual", "solve"]
