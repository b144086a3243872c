"""Refine-LM (Qureshi et al. 2024): a trainable top-k layer over a frozen masked or causal LM, as transformers model
types.

Shared by evaluation (``hf-mlm`` in :mod:`bias_harness.plugins.mlm` loads saved masked Refine-LM folders; lm-eval's
own ``hf`` loads causal ones) and training (:mod:`bias_harness.mitigation.refine_lm`). Importing this module
registers ``model_type: refine_lm`` with ``AutoConfig`` / ``AutoModelForMaskedLM`` and ``model_type:
refine_lm_causal`` with ``AutoConfig`` / ``AutoModelForCausalLM``, so ``AutoModelFor...LM.from_pretrained(folder)``
loads base model and layer in one call, without ``trust_remote_code``. lm-eval processes import it by themselves
when lm-eval's ``hf`` backend loads (:mod:`bias_harness.plugins.hf_model_types`), so a plain ``lm_eval --model hf
--model_args pretrained=FOLDER`` evaluates a causal Refine-LM folder once bias-harness is installed.

The layer, at every position: the top-k logits ``v`` of the base model -> ``softmax(W g(v) + b)`` redistributes the
top-k probability mass (tokens outside the top-k keep their base probabilities); the returned ``logits`` are
log-probabilities. ``g`` is the config's ``layer_input``: ``logits`` (``g(v) = v``; the reference's masked-LM model,
``model_BERT.py``) or ``probs`` (``g(v) = softmax(v)`` over the top-k, the reference's causal-LM model,
``model_LLM.py``). With ``logits``, ``W = I, b = 0`` makes the layer the identity on the base model's distribution;
no ``W, b`` does so with ``probs``. The layer stays in float32 whatever dtype the base model is loaded in. The training
objective and loop are in ``mitigation/refine_lm.py``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    GenerationMixin,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers.modeling_outputs import CausalLMOutputWithPast, MaskedLMOutput

LAYER_INPUTS = ("logits", "probs")
NEG_INF_AS = -1e10  # model_LLM.py: top-k scores of -inf (a sampling config's top-p) become -1e10 before the softmax


class RefineLMConfig(PretrainedConfig):
    model_type = "refine_lm"

    def __init__(
        self,
        base_config: dict[str, Any] | None = None,
        topk: int = 10,
        base_model: str = "",
        layer_input: str = "logits",
        **kwargs: Any,
    ) -> None:
        if layer_input not in LAYER_INPUTS:
            raise ValueError(f"refine_lm: layer_input must be one of {LAYER_INPUTS}, not {layer_input!r}")
        self.base_config = base_config or {}
        self.topk = topk
        self.base_model = base_model
        self.layer_input = layer_input
        super().__init__(**kwargs)


class RefineLMCausalConfig(RefineLMConfig):
    """A causal base model's Refine-LM config. Attributes it does not set itself are read from the base model's
    config (``max_position_embeddings``, ``num_hidden_layers``, token ids, ...), so code that sizes caches or
    contexts from ``model.config`` (generation, lm-eval's ``hf``) sees the base model."""

    model_type = "refine_lm_causal"

    def __getattr__(self, name: str) -> Any:
        base = self.__dict__.get("base_config") or {}
        if not name.startswith("_") and "model_type" in base:
            from transformers.models.auto.configuration_auto import CONFIG_MAPPING

            name = CONFIG_MAPPING[base["model_type"]].attribute_map.get(name, name)  # GPT-2: n_layer, n_positions
            if name in base:
                return base[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def get_text_config(self, *args: Any, **kwargs: Any) -> PretrainedConfig:
        base = dict(self.base_config)
        return AutoConfig.for_model(base.pop("model_type"), **base)


class RefineLMPreTrainedModel(PreTrainedModel):
    """The base model (``self.base``) and the k x k layer (``self.debias``) that both kinds share."""

    config_class = RefineLMConfig
    base_model_prefix = "refine"
    _no_split_modules: list[str] = []
    _keep_in_fp32_modules_strict = ["debias"]
    base_auto_class: Any = None  # the transformers auto class of the base model

    def __init__(self, config: RefineLMConfig, base: PreTrainedModel | None = None) -> None:
        super().__init__(config)
        if base is None:
            base_cfg = dict(config.base_config)
            base_cfg.pop("dtype", None)  # the dtype the folder is loaded in (``from_pretrained`` sets the default)
            base = self.base_auto_class.from_config(
                AutoConfig.for_model(base_cfg.pop("model_type"), **base_cfg), dtype=torch.get_default_dtype()
            )
        self.base = base
        self.debias = nn.Linear(config.topk, config.topk, dtype=torch.float32)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if module is getattr(self, "debias", None):
            with torch.no_grad():
                module.weight.copy_(torch.eye(module.weight.shape[0]))
                module.bias.zero_()

    @classmethod
    def from_base(
        cls, base: PreTrainedModel, topk: int = 10, base_model: str = "", layer_input: str = "logits"
    ) -> RefineLMPreTrainedModel:
        cfg = cls.config_class(
            base_config=base.config.to_dict(),
            topk=min(topk, base.config.vocab_size),
            base_model=base_model,
            layer_input=layer_input,
        )
        model = cls(cfg, base=base)
        model._init_weights(model.debias)
        return model

    def get_input_embeddings(self) -> nn.Module:
        return self.base.get_input_embeddings()

    def top_probs(self, values: torch.Tensor) -> torch.Tensor:
        """The layer's distribution over the top-k from the base model's top-k logits ``values`` (..., k)."""
        values = values.float()
        if self.config.layer_input == "probs":
            values = values.masked_fill(values == float("-inf"), NEG_INF_AS).softmax(-1)
        return self.debias(values).softmax(-1)

    def refine(self, logits: torch.Tensor) -> torch.Tensor:
        """Base logits (..., V) -> log-probabilities with the top-k mass redistributed by the debiasing layer."""
        logits = logits.float()
        probs = logits.softmax(-1)
        values, idx = logits.topk(self.config.topk, dim=-1)
        mass = probs.gather(-1, idx).sum(-1, keepdim=True)
        return probs.scatter(-1, idx, self.top_probs(values) * mass).clamp_min(1e-30).log()


class RefineLMForMaskedLM(RefineLMPreTrainedModel):
    base_auto_class = AutoModelForMaskedLM

    def __init__(self, config: RefineLMConfig, base: PreTrainedModel | None = None) -> None:
        super().__init__(config, base)
        if getattr(config, "language", None) and hasattr(self.base, "set_default_language"):
            self.base.set_default_language(config.language)

    def set_default_language(self, language: str) -> None:
        """X-MOD / SwissBERT language adapter of the base model (lm-eval ``hf-mlm`` ``language=``)."""
        self.base.set_default_language(language)
        self.config.language = language

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


class RefineLMForCausalLM(RefineLMPreTrainedModel, GenerationMixin):
    """A causal LM whose next-token distribution at every position goes through the layer: lm-eval's ``hf``
    (log-likelihoods and generation) reads the refined distribution. Generation passes the base model's cache."""

    config_class = RefineLMCausalConfig
    base_auto_class = AutoModelForCausalLM

    def get_output_embeddings(self) -> nn.Module | None:
        return self.base.get_output_embeddings()

    def forward(self, input_ids=None, attention_mask=None, labels=None, **kwargs: Any) -> CausalLMOutputWithPast:
        out = self.base(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        logits = self.refine(out.logits)
        loss = None
        if labels is not None:  # next-token loss, as the base model computes it
            shifted = logits[..., :-1, :].reshape(-1, logits.shape[-1])
            loss = nn.functional.nll_loss(shifted, labels[..., 1:].reshape(-1), ignore_index=-100)
        return CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            past_key_values=getattr(out, "past_key_values", None),
            hidden_states=getattr(out, "hidden_states", None),
            attentions=getattr(out, "attentions", None),
        )


AutoConfig.register("refine_lm", RefineLMConfig, exist_ok=True)
AutoModelForMaskedLM.register(RefineLMConfig, RefineLMForMaskedLM, exist_ok=True)
AutoConfig.register("refine_lm_causal", RefineLMCausalConfig, exist_ok=True)
AutoModelForCausalLM.register(RefineLMCausalConfig, RefineLMForCausalLM, exist_ok=True)
