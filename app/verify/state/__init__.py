"""Verifying a state: dump it, diff it against the seed and the gold, run the task's checks."""
