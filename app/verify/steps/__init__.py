"""Verifying the trajectory: step rewards and the potentials of each step's state, the step
log as verify reads it, the calls the response lists."""
