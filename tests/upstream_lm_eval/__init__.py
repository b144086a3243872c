"""lm-evaluation-harness 0.4.13's own new-task checks, vendored (see tests/test_upstream_lm_eval.py)."""
