"""`stategym new-env NAME`: a small, working environment package to start from."""
