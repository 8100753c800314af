"""`stategym eval`: run an OpenAI-compatible model through a task file and score every rollout.

model.py speaks to the model (Chat Completions with tools, or the Responses API), episode.py
plays one rollout against a StateGym server (served, or in process), runner.py schedules k
samples per task with bounded concurrency and writes NeMo Gym rollout rows (resumable), and
scores.py turns rows into pass@k, pass^k, means by environment, family and difficulty, and the
calibration file a curriculum reads. docs/eval.md shows a vLLM run.
"""
