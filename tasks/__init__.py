"""lm-eval task folders (YAML + small per-task shims), shipped as package data."""
