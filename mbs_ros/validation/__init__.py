"""Reproductions of the seed papers' studies and the independent references they are checked against."""
