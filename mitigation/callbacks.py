"""Trainer callbacks shared by every trainer (TRL's and ours): secrets masked in what checkpoints save."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bias_harness.redact import redact_object_attributes


def redacting_callback() -> Any:
    """A trainer callback that masks the secrets of the ``training_args.bin`` saved with each checkpoint."""
    from transformers import TrainerCallback

    class RedactSavedArgs(TrainerCallback):
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                redact_training_args(Path(args.output_dir) / f"checkpoint-{state.global_step}")

    return RedactSavedArgs()


def redact_training_args(folder: Path) -> None:
    """Rewrite ``folder/training_args.bin`` (transformers pickles the whole ``TrainingArguments`` there, a
    ``hub_token`` given with ``--set`` included) with its secret-named fields masked. Resuming does not read it."""
    import torch
    from transformers.trainer import TRAINING_ARGS_NAME

    path = Path(folder) / TRAINING_ARGS_NAME
    if path.is_file():
        torch.save(redact_object_attributes(torch.load(path, weights_only=False)), path)
