"""Refine-LM (seed 001): a small trainable layer over a frozen masked LM, trained by policy gradient on UnQover.

Model (:class:`RefineLMForMaskedLM`): at every position the frozen MLM's logits are taken, the top-k logits
``v`` go through one linear layer ``W v + b`` (k x k), and the top-k probability mass of the base model is
redistributed by ``softmax(W v + b)``; tokens outside the top-k keep their base probabilities. The returned
``logits`` are the log-probabilities of that distribution, so any masked-LM scorer (lm-eval ``hf-mlm``) reads
the debiased distribution. ``W = I, b = 0`` at initialisation, i.e. the untrained layer *is* the base model
(the reference code initialises W to ones, which makes the untrained model uniform over the top-k; we chose
identity so that before/after differ only by training).

Training (seed 001, Step 2): for a template ``tau^c(a)`` with subjects (x1, x2) and attribute a, let
``P(x | q)`` be the refined probability of subject x at the mask of question q. The subject-attribute bias
``B(x1|x2) = 1/2 [P(x1|t12(a)) + P(x1|t21(a))] - 1/2 [P(x1|t12(~a)) + P(x1|t21(~a))]`` (likewise B(x2|x1)),
``C = 1/2 [B(x1|x2) - B(x2|x1)]`` and the reward ``r = -|C|``. The action in each of the four questions is the
subject the policy prefers (argmax of P over {x1, x2}); the REINFORCE loss is ``-r * sum_q log P(a_q | q)``
averaged over the batch (no baseline: every reward is <= 0, so the preferred answers of biased templates are
pushed down in proportion to |C|). Only W and b are trained. A subject is scored by its first word piece.

Saved with ``save_pretrained`` (base weights + layer + tokenizer, ``model_type: refine_lm``); importing this
module registers the architecture, after which ``AutoModelForMaskedLM.from_pretrained(folder)`` or
``RefineLMForMaskedLM.from_pretrained(folder)`` loads base model and layer in one call.

The recipe YAML is parsed by :func:`make_parser` (a ``TrlParser``, TRL's config format);
``python -m bias_harness.mitigation.refine_lm --config mitigation/refine_lm.yaml`` trains from the exported data.
"""

from __future__ import annotations

import json
import logging
import math
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoConfig, AutoModelForMaskedLM, PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import MaskedLMOutput

log = logging.getLogger(__name__)

QUESTIONS = ("q12", "q21", "q12_neg", "q21_neg")
MASK_PLACEHOLDER = "[MASK]"


class RefineLMConfig(PretrainedConfig):
    model_type = "refine_lm"

    def __init__(self, base_config: dict[str, Any] | None = None, topk: int = 10, base_model: str = "", **kwargs: Any) -> None:
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
        cfg = RefineLMConfig(base_config=base.config.to_dict(), topk=min(topk, base.config.vocab_size), base_model=base_model)
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

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, labels=None, **kwargs: Any) -> MaskedLMOutput:
        extra = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        out = self.base(input_ids=input_ids, attention_mask=attention_mask, **extra)
        logits = self.refine(out.logits)
        loss = None
        if labels is not None:
            loss = nn.functional.nll_loss(logits.view(-1, logits.shape[-1]), labels.view(-1), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits)


AutoConfig.register("refine_lm", RefineLMConfig, exist_ok=True)
AutoModelForMaskedLM.register(RefineLMConfig, RefineLMForMaskedLM, exist_ok=True)


# ------------------------------------------------------------------------------------------- reward / loss


def subject_token(tokenizer: Any, subject: str) -> int:
    ids = tokenizer(subject, add_special_tokens=False)["input_ids"]
    if not ids:
        raise ValueError(f"subject {subject!r} tokenizes to nothing")
    return ids[0]


def mask_probs(model: RefineLMForMaskedLM, tokenizer: Any, texts: list[str]) -> torch.Tensor:
    """Refined probabilities at the (first) mask of each text: (len(texts), V)."""
    texts = [t.replace(MASK_PLACEHOLDER, tokenizer.mask_token) for t in texts]
    enc = tokenizer(texts, return_tensors="pt", padding=True, truncation=True)
    enc = {k: v.to(model.device) for k, v in enc.items()}
    logp = model(**enc).logits
    is_mask = enc["input_ids"] == tokenizer.mask_token_id
    if not bool(is_mask.any(-1).all()):
        raise ValueError("a question lost its mask token (truncated?)")
    pos = is_mask.float().argmax(-1)
    return logp[torch.arange(len(texts), device=logp.device), pos].exp()


def bias_c(p: dict[str, torch.Tensor]) -> torch.Tensor:
    """C(tau) from P(x_i | q) for the four questions. ``p[q]`` is (B, 2): column 0 = x1, column 1 = x2."""
    b1 = 0.5 * (p["q12"][:, 0] + p["q21"][:, 0]) - 0.5 * (p["q12_neg"][:, 0] + p["q21_neg"][:, 0])
    b2 = 0.5 * (p["q12"][:, 1] + p["q21"][:, 1]) - 0.5 * (p["q12_neg"][:, 1] + p["q21_neg"][:, 1])
    return 0.5 * (b1 - b2)


def policy_step(model: RefineLMForMaskedLM, tokenizer: Any, rows: list[dict[str, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, rewards) for a batch of UnQover rows (REINFORCE with r = -|C|)."""
    n = len(rows)
    texts = [r[q] for q in QUESTIONS for r in rows]
    probs = mask_probs(model, tokenizer, texts)  # (4n, V)
    subj = torch.tensor([[subject_token(tokenizer, r["subj1"]), subject_token(tokenizer, r["subj2"])] for r in rows], device=probs.device)
    p = {q: probs[i * n:(i + 1) * n].gather(-1, subj) for i, q in enumerate(QUESTIONS)}  # each (n, 2)
    reward = -bias_c(p).abs().detach()
    logp_actions = sum(p[q].max(-1).values.clamp_min(1e-30).log() for q in QUESTIONS)
    return -(reward * logp_actions).mean(), reward


@torch.no_grad()
def mean_reward(model: RefineLMForMaskedLM, tokenizer: Any, rows: list[dict[str, Any]], batch_size: int = 32) -> float:
    rewards = [policy_step(model, tokenizer, rows[i:i + batch_size])[1] for i in range(0, len(rows), batch_size)]
    return float(torch.cat(rewards).mean()) if rewards else math.nan


# ------------------------------------------------------------------------------------------- config + training


@dataclass
class RefineLMScriptArguments:
    dataset_name: str | None = field(default=None, metadata={"help": "training data folder (parquet) or Hub id"})
    dataset_config: str | None = field(default=None, metadata={"help": "dataset config name"})
    dataset_train_split: str = field(default="train", metadata={"help": "training split"})
    dataset_test_split: str = field(default="test", metadata={"help": "held-out split (reward before/after)"})


@dataclass
class RefineLMTrainingConfig:
    output_dir: str = field(default="runs/refine_lm/checkpoints", metadata={"help": "checkpoint folder"})
    topk: int = field(default=10, metadata={"help": "k: the debiasing layer acts on the top-k logits at each position"})
    language: str | None = field(default=None, metadata={"help": "X-MOD/SwissBERT language adapter (e.g. de_CH)"})
    learning_rate: float = field(default=5e-5, metadata={"help": "AdamW learning rate"})
    per_device_train_batch_size: int = field(default=20, metadata={"help": "templates per policy-gradient step"})
    num_train_epochs: float = field(default=1.0, metadata={"help": "passes over the training templates"})
    max_steps: int = field(default=-1, metadata={"help": "stop after this many steps (-1: epochs decide)"})
    save_steps: int = field(default=50, metadata={"help": "checkpoint every N steps"})
    save_total_limit: int = field(default=2, metadata={"help": "keep the last N checkpoints"})
    logging_steps: int = field(default=10, metadata={"help": "log the mean reward every N steps"})
    seed: int = field(default=42, metadata={"help": "shuffling seed"})
    eval_strategy: str = field(default="no", metadata={"help": "unused (kept for the shared pipeline)"})
    report_to: str = field(default="none", metadata={"help": "unused (kept for TRL-style configs)"})

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def make_parser(prog: str | None = None):
    from trl import ModelConfig, TrlParser

    return TrlParser((RefineLMScriptArguments, RefineLMTrainingConfig, ModelConfig), prog=prog)


def _save_checkpoint(model: RefineLMForMaskedLM, opt: torch.optim.Optimizer, step: int, history: list[dict], out: Path, keep: int) -> None:
    ck = out / f"checkpoint-{step}"
    ck.mkdir(parents=True, exist_ok=True)
    torch.save({"debias": model.debias.state_dict(), "optimizer": opt.state_dict(), "step": step, "history": history}, ck / "refine_lm_state.pt")
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": step, "log_history": history}, indent=2), encoding="utf-8")
    old = sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    for stale in old[:-keep] if keep > 0 else []:
        for f in stale.iterdir():
            f.unlink()
        stale.rmdir()


def train_refine_lm(cfg: Any, train_data: Any, eval_data: Any = None, resume: bool = True) -> Path:
    """Train the debiasing layer; save base + layer + tokenizer to ``<output_dir>/../model`` and return it."""
    from transformers import AutoTokenizer

    from bias_harness.mitigation.train import last_checkpoint

    args = cfg.training
    name = cfg.model.model_name_or_path
    tok = AutoTokenizer.from_pretrained(name)
    if tok.mask_token is None:
        raise ValueError(f"{name} has no mask token: refine_lm needs a masked LM")
    base = AutoModelForMaskedLM.from_pretrained(name)
    if args.language and hasattr(base, "set_default_language"):
        base.set_default_language(args.language)
    elif args.language:
        log.warning("refine_lm: %s has no language adapters; ignoring language=%s", name, args.language)
        args.language = None
    model = RefineLMForMaskedLM.from_base(base, args.topk, base_model=name)
    model.config.language = args.language
    for p in model.base.parameters():
        p.requires_grad_(False)
    model.base.eval()
    opt = torch.optim.AdamW(model.debias.parameters(), lr=args.learning_rate)
    rows = list(train_data)
    test_rows = list(eval_data) if eval_data is not None else []
    bs = args.per_device_train_batch_size
    steps_per_epoch = math.ceil(len(rows) / bs)
    total = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * steps_per_epoch)
    out = Path(args.output_dir)
    step, history = 0, []
    checkpoint = last_checkpoint(out) if resume else None
    if checkpoint:
        state = torch.load(Path(checkpoint) / "refine_lm_state.pt", weights_only=False)
        model.debias.load_state_dict(state["debias"])
        opt.load_state_dict(state["optimizer"])
        step, history = state["step"], state["history"]
        log.info("refine_lm: resuming from %s (step %d)", checkpoint, step)
    test_before = mean_reward(model, tok, test_rows) if test_rows and step == 0 else None
    order: list[int] = []
    while step < total:
        epoch = step // steps_per_epoch
        order = list(range(len(rows)))
        random.Random(args.seed + epoch).shuffle(order)
        i = (step % steps_per_epoch) * bs
        batch = [rows[j] for j in order[i:i + bs]]
        loss, reward = policy_step(model, tok, batch)
        opt.zero_grad()
        if torch.isfinite(loss):
            loss.backward()
            opt.step()
        step += 1
        if step % args.logging_steps == 0 or step == total:
            history.append({"step": step, "loss": float(loss.detach()), "reward": float(reward.mean())})
            log.info("refine_lm step %d/%d loss %.4g reward %.4g", step, total, float(loss.detach()), float(reward.mean()))
        if args.save_steps > 0 and (step % args.save_steps == 0 or step == total):
            _save_checkpoint(model, opt, step, history, out, args.save_total_limit)
    final = out.parent / "model"
    final.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(final)
    tok.save_pretrained(final)
    state = {"global_step": step, "epoch": step / max(steps_per_epoch, 1), "log_history": history}
    if test_rows:
        state["unqover_test_reward_after"] = mean_reward(model, tok, test_rows)
        if test_before is not None:
            state["unqover_test_reward_before"] = test_before
    (final / "trainer_state.json").write_text(json.dumps(state, indent=2), encoding="utf-8")
    return final


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - CLI wrapper
    from datasets import load_dataset

    from bias_harness.mitigation.train import ParsedConfig

    script, training, model = make_parser().parse_args_and_config(argv)
    data = load_dataset(script.dataset_name, script.dataset_config)
    cfg = ParsedConfig(script, training, model, None)
    test = data[script.dataset_test_split] if script.dataset_test_split in data else None
    print(train_refine_lm(cfg, data[script.dataset_train_split], test))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
