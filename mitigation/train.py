"""Training: run the recipe's trainer in-process on its parsed config (:mod:`bias_harness.mitigation.config`).

Interrupted runs resume: checkpoints go to ``<output_dir>/checkpoints`` and the last one is picked up
automatically (transformers' ``get_last_checkpoint``).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

from bias_harness.mitigation.callbacks import redact_training_args, redacting_callback
from bias_harness.mitigation.config import ParsedConfig, last_checkpoint
from bias_harness.mitigation.recipe import Recipe, RecipeError

log = logging.getLogger(__name__)


def check_model(recipe: Recipe, model: str, chat_template_path: str | None = None) -> None:
    """Fail early on a model that cannot run the recipe (missing folder, no chat template for a chat recipe)."""
    from transformers import AutoConfig, AutoTokenizer

    try:
        AutoConfig.from_pretrained(model)
    except (OSError, ValueError) as err:
        raise RecipeError(f"cannot load model '{model}': {err}") from err
    if recipe.chat and not chat_template_path:
        tok = AutoTokenizer.from_pretrained(model)
        if not getattr(tok, "chat_template", None):
            raise RecipeError(
                f"recipe '{recipe.name}' trains on chat messages but model '{model}' has no chat template; "
                "use an instruct/chat model or give one with --set chat_template_path=FILE"
            )


def _reward_funcs(names: list[str] | None) -> list[Any]:
    """Resolve ``reward_funcs`` like ``trl grpo`` does (TRL's built-in names or dotted import paths)."""
    from trl import rewards as trl_rewards

    funcs = []
    for name in names or []:
        if hasattr(trl_rewards, name) and "." not in name:
            funcs.append(getattr(trl_rewards, name))
            continue
        if "." not in name:
            raise RecipeError(f"unknown reward function '{name}': use a TRL reward name or a dotted import path")
        mod, fn = name.rsplit(".", 1)
        try:
            funcs.append(getattr(importlib.import_module(mod), fn))
        except (ImportError, AttributeError) as err:
            raise RecipeError(f"cannot import reward function '{name}': {err}") from err
    if not funcs:
        raise RecipeError("GRPO recipe has no reward_funcs")
    return funcs


def train(recipe: Recipe, cfg: ParsedConfig, train_data, eval_data=None, resume: bool = True) -> Path:
    """Train and save the final model (or LoRA adapter) to ``cfg.training.output_dir``/../model; return that folder."""
    if recipe.trainer == "refine_lm":
        from bias_harness.mitigation.refine_lm import train_refine_lm

        return train_refine_lm(cfg, train_data, eval_data, resume=resume)
    if recipe.trainer == "clp":
        from bias_harness.mitigation.clp import train_clp

        return train_clp(cfg, train_data, eval_data, resume=resume)
    from trl import get_peft_config

    args = cfg.training
    model_init_kwargs = dict(
        revision=cfg.model.model_revision,
        trust_remote_code=args.trust_remote_code,
        attn_implementation=cfg.model.attn_implementation,
        dtype=cfg.model.dtype,
    )
    if args.model_init_kwargs:
        model_init_kwargs.update(args.model_init_kwargs)
    args.model_init_kwargs = {k: v for k, v in model_init_kwargs.items() if v is not None}
    common = dict(
        model=cfg.model.model_name_or_path,
        args=args,
        callbacks=[redacting_callback()],
        train_dataset=train_data,
        eval_dataset=eval_data if args.eval_strategy != "no" else None,
        peft_config=get_peft_config(cfg.model),
    )
    if recipe.trainer == "sft":
        from trl import SFTTrainer

        trainer = SFTTrainer(**common)
    else:
        from trl import GRPOTrainer

        trainer = GRPOTrainer(reward_funcs=_reward_funcs(cfg.script.reward_funcs), **common)
    checkpoint = last_checkpoint(Path(args.output_dir)) if resume else None
    if checkpoint:
        log.info("resuming %s from %s", recipe.name, checkpoint)
    trainer.train(resume_from_checkpoint=checkpoint)
    final = Path(args.output_dir).parent / "model"
    trainer.save_model(str(final))
    if trainer.processing_class is not None:
        trainer.processing_class.save_pretrained(str(final))
    trainer.state.save_to_json(str(final / "trainer_state.json"))
    redact_training_args(final)
    return final


def is_adapter(folder: str | Path) -> bool:
    return (Path(folder) / "adapter_config.json").is_file()


def run_trl_cli(argv: list[str]) -> int:  # pragma: no cover - thin passthrough used in docs
    """``python -m bias_harness.mitigation.train sft --config ...`` == ``trl sft --config ...``."""
    from trl.cli.main import main

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return main(argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run_trl_cli(sys.argv[1:]))
