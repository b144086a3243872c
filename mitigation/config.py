"""A recipe's configuration, parsed exactly as ``trl sft|grpo --config`` parses it, and the checkpoint a run
resumes from.

The YAML is read by the TRL script's own parser (``trl.scripts.<trainer>.make_parser``), with the same
dataclasses (ScriptArguments, SFTConfig/GRPOConfig, ModelConfig, DatasetMixtureConfig), so a key TRL does
not know is an error here as well as under ``trl``. Overrides are plain TRL command-line flags.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bias_harness.mitigation.recipe import Recipe, RecipeError

from bias_harness.redact import redact

PARSERS = {"sft": "trl.scripts.sft", "grpo": "trl.scripts.grpo", "refine_lm": "bias_harness.mitigation.refine_lm",
           "clp": "bias_harness.mitigation.clp"}  # fmt: skip


@dataclass
class ParsedConfig:
    script: Any  # ScriptArguments (dataset_name, splits, reward_funcs for GRPO)
    training: Any  # SFTConfig / GRPOConfig / RefineLMConfig
    model: Any  # ModelConfig (model_name_or_path, LoRA)
    mixture: Any | None  # DatasetMixtureConfig (unused by our recipes)

    def as_dict(self) -> dict[str, Any]:
        """The full resolved configuration (for the model card and ``recipe.yaml``), secrets masked."""
        out: dict[str, Any] = {}
        for part in (self.script, self.model, self.training):
            if part is None:
                continue
            out.update(part.to_dict() if hasattr(part, "to_dict") else dict(vars(part)))
        return redact(out)


def _flags(overrides: dict[str, Any]) -> list[str]:
    argv: list[str] = []
    for key, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            argv += [f"--{key}", *map(str, value)]
        else:
            argv += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return argv


def device_overrides() -> dict[str, Any]:
    """On a machine without a GPU: train on CPU in fp32 (TRL defaults to bf16 mixed precision, which needs a GPU)."""
    import torch

    if torch.cuda.is_available() or (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        return {}
    return {"use_cpu": True, "bf16": False}


def parse_config(
    recipe: Recipe, overrides: dict[str, Any] | None = None, extra_args: list[str] | None = None
) -> ParsedConfig:
    """Recipe YAML + overrides -> TRL dataclasses. Unknown keys (in the YAML or the overrides) raise RecipeError.

    On a CPU-only machine ``use_cpu``/``bf16`` are set unless the overrides set them.
    """
    module = importlib.import_module(PARSERS[recipe.trainer])
    parser = module.make_parser()
    merged = {**(device_overrides() if recipe.trainer != "refine_lm" else {}), **(overrides or {})}
    argv = ["--config", str(recipe.config_path), *_flags(merged), *(extra_args or [])]
    parsed = parser.parse_args_and_config(argv, return_remaining_strings=True, separate_remaining_strings=True)
    *parts, from_config, from_cli = parsed
    if from_config or from_cli:
        raise RecipeError(f"recipe '{recipe.name}': keys unknown to `trl {recipe.trainer}`: {from_config + from_cli}")
    parts += [None] * (4 - len(parts))
    return ParsedConfig(*parts[:4])


def last_checkpoint(checkpoint_dir: Path) -> str | None:
    from transformers.trainer_utils import get_last_checkpoint

    if not Path(checkpoint_dir).is_dir():
        return None
    return get_last_checkpoint(str(checkpoint_dir))
