"""Mitigation recipes: declarative TRL configs (``mitigation/<recipe>.yaml``) plus their Python.

``bias-harness mitigate RECIPE --model M`` builds the recipe's training data from our datasets, trains with
TRL (or the Refine-LM policy-gradient loop), evaluates the base and the trained model with lm-eval under the
same settings, writes a model card with the before/after numbers and pushes only when asked.

Modules: ``recipes`` (registry + data builders), ``train``, ``evaluate``, ``model_card``, ``publish``,
``rewards`` (GRPO reward functions), ``refine_lm`` (Refine-LM layer), ``openai_ft`` (OpenAI fine-tuning).
"""

from __future__ import annotations

from pathlib import Path


def recipes_dir() -> Path:
    """Folder holding the recipe YAMLs (``mitigation/`` in a checkout, ``bias_harness/mitigation`` in a wheel)."""
    return Path(__file__).resolve().parent
