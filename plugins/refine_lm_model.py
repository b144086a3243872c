"""Refine-LM (Qureshi et al. 2024): a trainable top-k layer over a frozen masked LM, as a transformers model type.

Shared by evaluation (``hf-mlm`` in :mod:`bias_harness.plugins.mlm` loads saved Refine-LM folders) and training
(:mod:`bias_harness.mitigation.refine_lm`). Importing this module registers ``model_type: refine_lm`` with
``AutoConfig`` / ``AutoModelForMaskedLM``, so ``AutoModelForMaskedLM.from_pretrained(folder)`` loads base model and
layer in one call. The layer: top-k logits ``v`` of the base model -> ``softmax(W v + b)`` redistributes the top-k
probability mass (``W = I, b = 0`` at initialisation: the untrained layer is the base model); the returned
``logits`` are log-probabilities. The training objective and loop are in ``mitigation/refine_lm.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForMaskedLM, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput


class RefineLMConfig(PretrainedConfig):
    model_type = "refine_lm"

    def __init__(
        self, base_config: dict[str, Any] | None = None, topk: int = 10, base_model: str = "", **kwargs: Any
    ) -> None:
        self.base_config = base_config or {}
        self.topk = topk
        self.base_model = base_model
        super().__init__(**kwargs)


class RefineLMForMaskedLM(PreTrainedModel):
    config_class = RefineLMConfig
    base_model_prefix = "refine"
    _no_split_modules: list[str] = []

    def __init__(self, config: RefineLMConfig, base: PreTrainedModel | None = None) -> None:
        super().__init__(config)
        if base is None:
            base_cfg = dict(config.base_config)
            base = AutoModelForMaskedLM.from_config(AutoConfig.for_model(base_cfg.pop("model_type"), **base_cfg))
        self.base = base
        if getattr(config, "language", None) and hasattr(base, "set_default_language"):
            base.set_default_language(config.language)
        self.debias = nn.Linear(config.topk, config.topk)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if module is getattr(self, "debias", None):
            with torch.no_grad():
                module.weight.copy_(torch.eye(module.weight.shape[0]))
                module.bias.zero_()

    @classmethod
    def from_base(cls, base: PreTrainedModel, topk: int = 10, base_model: str = "") -> RefineLMForMaskedLM:
        cfg = RefineLMConfig(
            base_config=base.config.to_dict(), topk=min(topk, base.config.vocab_size), base_model=base_model
        )
        model = cls(cfg, base=base)
        model._init_weights(model.debias)
        return model

    def set_default_language(self, language: str) -> None:
        """X-MOD / SwissBERT language adapter of the base model (lm-eval ``hf-mlm`` ``language=``)."""
        self.base.set_default_language(language)
        self.config.language = language

    def get_input_embeddings(self) -> nn.Module:
        return self.base.get_input_embeddings()

    def refine(self, logits: torch.Tensor) -> torch.Tensor:
        """Base logits (..., V) -> log-probabilities with the top-k mass redistributed by the debiasing layer."""
        logits = logits.float()
        probs = logits.softmax(-1)
        values, idx = logits.topk(self.config.topk, dim=-1)
        mass = probs.gather(-1, idx).sum(-1, keepdim=True)
        new_top = self.debias(values).softmax(-1) * mass
        return probs.scatter(-1, idx, new_top).clamp_min(1e-30).log()

    def forward(
        self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs: Any
    ) -> MaskedLMOutput:
        extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        out = self.base(input_ids=input_ids, attention_mask=attention_mask, **extra)
        logits = self.refine(out.logits)
        loss = None
        if labels is not None:
            loss = nn.functional.nll_loss(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits)


AutoConfig.register("refine_lm", RefineLMConfig, exist_ok=True)
AutoModelForMaskedLM.register(RefineLMConfig, RefineLMForMaskedLM, exist_ok=True)
