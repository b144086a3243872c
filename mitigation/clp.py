"""Counterfactual logit pairing (CLP; Garg et al. 2019, "Counterfactual Fairness in Text Classification through
Robustness", AIES) for multiple-choice prompts scored by log-likelihood, as a ``transformers.Trainer``.

A training row is one *group* of counterfactual variants of a prompt: the same question with the names (and so the
genders) swapped and, optionally, the options listed in the other order. For each variant ``v`` the model's
preference for one *role* of the question (e.g. the scenario's first person) is

    pref_v = sign_v * (log p(choice A | context_v) - log p(choice B | context_v))

(``sign_v`` = -1 where the options are listed the other way round, so the same role sits behind choice B). The loss
pairs the variants' preferences (their spread is what the names and the option order change) and keeps their mean
where the base model had it (what the question itself decides):

    loss = 2 * mean_v (pref_v - mean(pref))^2  +  anchor_weight * (mean(pref) - mean_base(pref))^2

A model that loses the bias answers each question the same whoever is named and wherever the option sits; the
anchor stops the easy way out (every preference to one constant, i.e. a position or tie habit). The anchors are the
base model's, computed once before the first step (``clp_anchors.json`` in the checkpoint folder, reused on resume).

The config is TRL-style: ``ScriptArguments`` (dataset), :class:`CLPConfig` (``transformers.TrainingArguments`` plus
the fields below) and ``ModelConfig``; ``python -m bias_harness.mitigation.clp --config mitigation/demet_clp.yaml``
trains from an exported dataset, as ``trl sft --config`` does. The model saved is a plain causal LM.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer, TrainingArguments

log = logging.getLogger(__name__)
ANCHORS = "clp_anchors.json"


@dataclass
class CLPConfig(TrainingArguments):
    """``TrainingArguments`` with the pairing loss's settings."""

    choices: list[str] = field(
        default_factory=lambda: [" 1", " 2"],
        metadata={"help": "the two continuations scored (the task's target_delimiter + choice): A, then B"},
    )
    anchor_weight: float = field(
        default=1.0, metadata={"help": "weight of keeping each group's mean preference at the base model's"}
    )
    trainable_top_layers: int = field(
        default=8, metadata={"help": "train the top N transformer blocks (and the final norm); -1: every weight"}
    )
    autocast_bf16: bool = field(
        default=True,
        metadata={"help": "bf16 autocast for the forward passes (weights and optimizer stay fp32; CPUs with bf16)"},
    )
    anchor_batch_size: int = field(default=32, metadata={"help": "groups per forward pass when computing anchors"})
    remove_unused_columns: bool = field(default=False, metadata={"help": "kept: the collator reads the text columns"})


@dataclass
class CLPScriptArguments:
    dataset_name: str = field(default="", metadata={"help": "the exported training data (save_to_disk folder)"})
    dataset_train_split: str = field(default="train", metadata={"help": "split to train on"})
    dataset_test_split: str = field(default="test", metadata={"help": "unused (the evaluation is lm-eval's)"})
    name_slots: int = field(default=5, metadata={"help": "DeMET: name pairs per scenario and relationship type"})
    both_orders: bool = field(
        default=False, metadata={"help": "DeMET: each twin also with its options listed the other way round"}
    )


def make_parser(prog: str | None = None):
    from trl import ModelConfig, TrlParser

    return TrlParser((CLPScriptArguments, CLPConfig, ModelConfig), prog=prog)


class ChoiceScorer:
    """Tokenizes contexts as lm-eval scores a continuation (context and context + continuation encoded whole, the
    continuation the tokens past the context's) and gives ``log p(A) - log p(B)`` from one forward pass: the two
    continuations must differ in their last token only (true of " 1" / " 2" for the usual BPE tokenizers)."""

    def __init__(self, tokenizer: Any, choices: list[str]) -> None:
        if len(choices) != 2:
            raise ValueError(f"clp: choices must be two continuations, not {choices!r}")
        self.tok, self.choices = tokenizer, choices
        self.tok.padding_side = "left"
        if self.tok.pad_token is None:
            self.tok.pad_token = self.tok.eos_token

    def encode(self, context: str) -> tuple[list[int], int, int]:
        """(input ids: context + the continuations' shared tokens, token of A, token of B)."""
        ctx = self.tok(context, add_special_tokens=False).input_ids
        a, b = (self.tok(context + c, add_special_tokens=False).input_ids[len(ctx) :] for c in self.choices)
        if not a or not b or a[:-1] != b[:-1] or a[-1] == b[-1]:
            raise ValueError(
                f"clp: with this tokenizer the continuations {self.choices!r} do not differ in one last token "
                f"after {context[-40:]!r} (got {a} and {b}): one forward pass cannot score both"
            )
        return ctx + a[:-1], a[-1], b[-1]

    def batch(self, contexts: list[str]) -> dict[str, torch.Tensor]:
        enc = [self.encode(c) for c in contexts]
        width = max(len(ids) for ids, _, _ in enc)
        pad = self.tok.pad_token_id
        ids = torch.tensor([[pad] * (width - len(i)) + i for i, _, _ in enc])
        mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i, _, _ in enc])
        return {"input_ids": ids, "attention_mask": mask, "token_a": torch.tensor([a for _, a, _ in enc]),
                "token_b": torch.tensor([b for _, _, b in enc])}  # fmt: skip


def margins(model: Any, batch: dict[str, torch.Tensor], bf16: bool) -> torch.Tensor:
    """``log p(A) - log p(B)`` per row (the logits' difference at the last position: one softmax)."""
    with torch.autocast(model.device.type, dtype=torch.bfloat16, enabled=bf16):
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, -1]
    logits = logits.float()
    rows = torch.arange(logits.shape[0], device=logits.device)
    return logits[rows, batch["token_a"]] - logits[rows, batch["token_b"]]


class GroupCollator:
    """Rows (``contexts``: the variants, ``signs``: +1 / -1 each, ``group``: the row's index) -> one flat batch of
    every variant, with the group layout and anchors."""

    def __init__(self, scorer: ChoiceScorer, anchors: list[float] | None = None) -> None:
        self.scorer, self.anchors = scorer, anchors

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        sizes = {len(r["contexts"]) for r in rows}
        if len(sizes) != 1:
            raise ValueError(f"clp: every group needs the same number of variants (got {sorted(sizes)})")
        out = self.scorer.batch([c for r in rows for c in r["contexts"]])
        out["signs"] = torch.tensor([s for r in rows for s in r["signs"]], dtype=torch.float32).view(len(rows), -1)
        if self.anchors is not None:
            out["anchors"] = torch.tensor([self.anchors[r["group"]] for r in rows], dtype=torch.float32)
        return out


def preferences(model: Any, batch: dict[str, torch.Tensor], bf16: bool) -> torch.Tensor:
    """Each variant's preference for the role (sign * margin), shaped (groups, variants)."""
    return margins(model, batch, bf16).view_as(batch["signs"]) * batch["signs"].to(model.device)


class CLPTrainer(Trainer):
    """``Trainer`` whose loss is the counterfactual pairing loss (module docstring)."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        args: CLPConfig = self.args
        pref = preferences(model, inputs, args.autocast_bf16)
        mean = pref.mean(1)
        pair = 2 * ((pref - mean[:, None]) ** 2).mean()
        keep = ((mean - inputs["anchors"].to(mean.device)) ** 2).mean()
        loss = pair + args.anchor_weight * keep
        if self.state.global_step % max(args.logging_steps, 1) == 0 and model.training:
            self._clp_parts = {"pair": pair.item(), "anchor": keep.item()}
        return (loss, {"pref": pref}) if return_outputs else loss

    def log(self, logs: dict[str, float], *a: Any, **kw: Any) -> None:
        logs.update({f"clp_{k}": round(v, 5) for k, v in getattr(self, "_clp_parts", {}).items()})
        super().log(logs, *a, **kw)


@torch.no_grad()
def compute_anchors(model: Any, data: Any, scorer: ChoiceScorer, args: CLPConfig) -> list[float]:
    """The base model's mean preference of every group (by row index)."""
    from tqdm.auto import tqdm

    model.eval()
    collate = GroupCollator(scorer)
    out: list[float] = []
    step = max(args.anchor_batch_size, 1)
    for i in tqdm(range(0, len(data), step), desc="clp anchors", unit="batch"):
        batch = {k: v.to(model.device) for k, v in collate(data.select(range(i, min(i + step, len(data))))).items()}
        out += preferences(model, batch, args.autocast_bf16).mean(1).tolist()
    return out


def _find(model: Any, paths: tuple[str, ...]) -> Any:
    for path in paths:
        obj = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if obj is not None:
            return obj
    return None


BLOCKS = ("model.layers", "transformer.h", "gpt_neox.layers")  # Llama/Qwen/Gemma, GPT-2, GPT-NeoX
FINAL_NORM = ("model.norm", "transformer.ln_f", "gpt_neox.final_layer_norm")


def freeze(model: Any, top: int) -> int:
    """Train only the top ``top`` decoder blocks and the final norm (all weights where ``top`` < 0); returns the
    number of trainable parameters."""
    if top >= 0:
        blocks = _find(model, BLOCKS)
        if blocks is None:
            raise ValueError(f"clp: trainable_top_layers needs a decoder with one of {BLOCKS}; use -1 to train all")
        model.requires_grad_(False)
        for block in list(blocks)[len(blocks) - top :] if top else []:
            block.requires_grad_(True)
        norm = _find(model, FINAL_NORM)
        if norm is not None:
            norm.requires_grad_(True)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _steps_done(model_dir: Path) -> int:
    """The optimizer steps of the model saved in ``model_dir`` (its ``trainer_state.json``), 0 where there is none."""
    state = model_dir / "trainer_state.json"
    return int(json.loads(state.read_text(encoding="utf-8")).get("global_step", 0)) if state.is_file() else 0


def train_clp(cfg: Any, train_data: Any, eval_data: Any = None, resume: bool = True) -> Path:
    """Train with :class:`CLPTrainer` and save the model and tokenizer to ``output_dir/../model``."""
    from bias_harness.mitigation.config import last_checkpoint
    from transformers import AutoModelForCausalLM, AutoTokenizer

    args: CLPConfig = cfg.training
    out = Path(args.output_dir)
    final = out.parent / "model"
    checkpoint = last_checkpoint(out) if resume else None
    # a finished run started again: nothing to train, so no model to load (HF's Trainer would rebuild it, recompute
    # nothing and skip through every batch to its last step, leaving the weights and global_step as they are)
    if checkpoint and _steps_done(final) >= args.max_steps > 0:
        log.info("clp: %s already trained to step %d; not training again", final, args.max_steps)
        return final
    name = cfg.model.model_name_or_path
    tok = AutoTokenizer.from_pretrained(name)
    model = AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32)
    trainable = freeze(model, args.trainable_top_layers)
    log.info("clp: %s trainable parameters of %s", f"{trainable:,}", f"{model.num_parameters():,}")
    scorer = ChoiceScorer(tok, list(args.choices))
    data = (
        train_data.add_column("group", list(range(len(train_data))))
        if "group" not in train_data.column_names
        else train_data
    )
    out.mkdir(parents=True, exist_ok=True)
    path = out / ANCHORS
    if path.is_file() and resume:
        anchors = json.loads(path.read_text(encoding="utf-8"))
    else:
        anchors = compute_anchors(model.to(args.device), data, scorer, args)
        from bias_harness.atomic import write_text

        write_text(path, json.dumps(anchors))
    if len(anchors) != len(data):
        raise ValueError(f"clp: {path} holds {len(anchors)} anchors for {len(data)} training groups; delete it")
    from bias_harness.mitigation.callbacks import redacting_callback

    trainer = CLPTrainer(
        model=model,
        args=args,
        train_dataset=data,
        data_collator=GroupCollator(scorer, anchors),
        processing_class=tok,
        callbacks=[redacting_callback()],
    )
    if checkpoint:
        log.info("clp: resuming from %s", checkpoint)
    trainer.train(resume_from_checkpoint=checkpoint)
    model.requires_grad_(True)
    trainer.save_model(str(final))
    tok.save_pretrained(str(final))
    trainer.state.save_to_json(str(final / "trainer_state.json"))
    return final


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - the trl-style entry point
    import datasets

    parser = make_parser(prog="python -m bias_harness.mitigation.clp")
    script, training, model_cfg = parser.parse_args_and_config(argv)
    from bias_harness.mitigation.config import ParsedConfig

    data = datasets.load_from_disk(script.dataset_name)[script.dataset_train_split]
    print(train_clp(ParsedConfig(script, training, model_cfg, None), data))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
