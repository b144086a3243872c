"""Refine-LM (Qureshi et al. 2024): a trainable layer over a frozen masked LM, trained on UnQover with reward -|C(tau)|.

Model (:class:`RefineLMForMaskedLM`): at every position the frozen MLM's logits are taken, the top-k logits
``v`` go through one linear layer ``W v + b`` (k x k), and the top-k probability mass of the base model is
redistributed by ``softmax(W v + b)``; tokens outside the top-k keep their base probabilities. The returned
``logits`` are the log-probabilities of that distribution, so any masked-LM scorer (lm-eval ``hf-mlm``) reads
the debiased distribution. ``W = I, b = 0`` at initialisation, i.e. the untrained layer *is* the base model
(the reference code initialises W to ones, which makes the untrained model a fixed distribution over the top-k
ranks; we chose identity so that before/after differ only by training).

Bias (UZH project plan, Step 2): for a template ``tau^c(a)`` with subjects (x1, x2) and attribute a, let ``P(x | q)`` be
the probability of subject x at the mask of question q (whole-word: the mean over its word pieces). The
subject-attribute bias ``B(x1|x2) = 1/2 [P(x1|t12(a)) + P(x1|t21(a))] - 1/2 [P(x1|t12(~a)) + P(x1|t21(~a))]``
(likewise B(x2|x1)), ``C = 1/2 [B(x1|x2) - B(x2|x1)]`` and the reward ``r = -|C|``.

Objective (``objective``):

* ``reference`` (default): the loss of the authors' code (``redubias/calc_bias.py``): P is the layer's softmax
  over the top-k (0 outside it); per template the 4 x 2 matrix of P (:func:`reference_matrix`) is L1-normalised
  per column, D_i is its mean L1 distance to the first 4 templates of the mini-batch, and the loss is
  ``-mean_i(r_i log D_i)`` (:func:`reference_loss`).
* ``reinforce_argmax``: REINFORCE on the subject the policy prefers in each question, full-vocabulary refined
  probabilities, ``-r * sum_q log P(a_q | q)`` (no baseline).

``use_he_she`` (the reference's ``--use_he_she 1``, set by its released gender run): in gender rows (x1 female,
x2 male) ``P(x1 | q) = max(P(x1 | q), P(she | q))`` and ``P(x2 | q) = max(P(x2 | q), P(he | q))``, in the reward
and the loss alike. Only W and b are trained. Inputs are padded with an attention mask (the reference pads the
four questions of a template but passes no mask; see docs/mitigation.md).

Saved with ``save_pretrained`` (base weights + layer + tokenizer, ``model_type: refine_lm``); importing this
module registers the architecture, after which ``AutoModelForMaskedLM.from_pretrained(folder)`` or
``RefineLMForMaskedLM.from_pretrained(folder)`` loads base model and layer in one call.

The recipe YAML is parsed by :func:`make_parser` (a ``TrlParser``, TRL's config format);
``python -m bias_harness.mitigation.refine_lm --config mitigation/refine_lm.yaml`` trains from the exported data.
The recipe's preset ``released`` (``bias-harness mitigate refine_lm --preset released``) is the authors' released
gender run (``run_bert.sh``); see :mod:`bias_harness.mitigation.stereoset`.
"""

from __future__ import annotations

import json
import logging
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoModelForMaskedLM

log = logging.getLogger(__name__)

QUESTIONS = ("q12", "q21", "q12_neg", "q21_neg")
MASK_PLACEHOLDER = "[MASK]"


# The model class lives with the masked-LM model type (evaluation must not import training code); importing it
# registers ``model_type: refine_lm`` with transformers' auto classes.
from bias_harness.mitigation.refine_lm_causal import DEFAULT_PROMPT, SLOT, CausalQuestionScorer  # noqa: E402
from bias_harness.plugins.refine_lm_model import (  # noqa: E402,F401
    LAYER_INPUTS,
    RefineLMCausalConfig,
    RefineLMConfig,
    RefineLMForCausalLM,
    RefineLMForMaskedLM,
    RefineLMPreTrainedModel,
)

# ------------------------------------------------------------------------------------------- reward / loss

OBJECTIVES = ("reference", "reinforce_argmax")
LAYER_INITS = ("identity", "reference")


def subjects(row: dict[str, Any]) -> tuple[str, ...]:
    return (row["subj1"], row["subj2"])


def question_jobs(
    scorer: Any, rows: list[dict[str, Any]], words: Callable[[dict[str, Any]], tuple[str, ...]] = subjects
) -> tuple[list[Any], list[tuple[int, ...]]]:
    """Masked copies that score every word of ``words(row)`` (default: the two subjects) in every question.

    For each row, question q (``QUESTIONS`` order) and word, the word is written into the blank and scored as
    StereoSet scores a blank word (:meth:`MaskedLMScorer.plan`, ``span_scoring=word``): piece k is masked with
    pieces < k visible and later pieces removed. Returns the jobs and, per (row, q, word), the indices of its
    jobs (row-major: ``(row * 4 + q) * n_words + w``).
    """
    jobs: list[Any] = []
    groups: list[tuple[int, ...]] = []
    for r in rows:
        for q in QUESTIONS:
            text = r[q]
            at = text.find(MASK_PLACEHOLDER)
            if at < 0:
                raise ValueError(
                    f"refine_lm: question {q} of row {r.get('id', '?')} has no {MASK_PLACEHOLDER}: {text!r}"
                )
            for word in words(r):
                filled = text[:at] + word + text[at + len(MASK_PLACEHOLDER) :]
                plan = scorer.plan(len(groups), "", filled, (at, at + len(word)), jobs)
                groups.append(plan.copies)
    return jobs, groups


def _job_probs(
    model: RefineLMForMaskedLM, jobs: list[Any], pad_id: int, renormalise_topk: bool, batch_size: int = 64
) -> torch.Tensor:
    """P(target at the mask) of every job under the refined model (gradients reach only the debiasing layer).

    ``renormalise_topk``: the reference's probabilities, the layer's softmax over the top-k (0 outside the top-k);
    otherwise the refined full-vocabulary distribution (:meth:`RefineLMForMaskedLM.refine`). Jobs with the same
    input share one forward pass (the first piece of every word of a question reads the same masked question).
    Inputs are right-padded with an attention mask.
    """
    inputs: dict[tuple[tuple[int, ...], int], list[int]] = {}
    for n, j in enumerate(jobs):
        inputs.setdefault((tuple(j.ids), j.pos), []).append(n)
    keys = list(inputs)
    dev = model.device
    parts, order = [], []
    for b in range(0, len(keys), batch_size):
        chunk = keys[b : b + batch_size]
        width = max(len(ids) for ids, _ in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        att = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, (seq, _) in enumerate(chunk):
            ids[i, : len(seq)] = torch.tensor(seq)
            att[i, : len(seq)] = 1
        pos = torch.tensor([p for _, p in chunk])
        with torch.no_grad():  # the masked LM is frozen
            out = model.base(input_ids=ids.to(dev), attention_mask=att.to(dev))
        logits = out.logits[torch.arange(len(chunk)), pos].float()
        members = [n for key in chunk for n in inputs[key]]
        owner = torch.tensor([i for i, key in enumerate(chunk) for _ in inputs[key]], device=dev)
        tgt = torch.tensor([jobs[n].target for n in members], device=dev)
        if renormalise_topk:
            values, idx = logits.topk(model.config.topk, dim=-1)
            top = model.top_probs(values)
            parts.append((top[owner] * (idx[owner] == tgt[:, None])).sum(-1))
        else:
            parts.append(model.refine(logits).exp()[owner, tgt])
        order += members
    if not parts:
        return torch.zeros(0)
    return torch.cat(parts)[torch.argsort(torch.tensor(order, device=dev))]


HE_SHE = ("she", "he")  # the pronouns of x1 (female) and x2 (male) in UnQover's gender rows


def _gender_row(row: dict[str, Any]) -> dict[str, Any]:
    if row.get("category") != "gender":
        raise ValueError(
            f"refine_lm: use_he_she applies to UnQover's gender rows (x1 female, x2 male); row "
            f"{row.get('id', '?')} has category {row.get('category')!r}"
        )
    return row


def _with_pronouns(row: dict[str, Any]) -> tuple[str, ...]:
    """The subjects, then each pronoun in lower case and capitalised (the reference matches top-k tokens
    case-insensitively, i.e. takes the likelier spelling)."""
    return (*subjects(_gender_row(row)), *(w for p in HE_SHE for w in (p, p.capitalize())))


def subject_probs(
    model: RefineLMPreTrainedModel,
    scorer: Any,
    rows: list[dict[str, Any]],
    renormalise_topk: bool,
    use_he_she: bool = False,
) -> dict[str, torch.Tensor]:
    """``{q: (n, 2)}``: P(x1 | q), P(x2 | q) per row.

    Masked LM (``scorer`` a :class:`MaskedLMScorer`): a word's probability is the mean over its word pieces, each
    scored at the mask. Causal LM (``scorer`` a :class:`CausalQuestionScorer`): the first top-k next token after the
    prompt that names the subject (:mod:`bias_harness.mitigation.refine_lm_causal`, the reference's
    ``training_llm.py`` path). ``use_he_she``: P(x1 | q) = max(P(x1 | q), P(she | q)), P(x2 | q) = max(P(x2 | q),
    P(he | q)) (the reference's ``use_he_she``, ``redubias/predict_topk.predict``); gender rows only.
    """
    if isinstance(scorer, CausalQuestionScorer):
        return _causal_subject_probs(model, scorer, rows, renormalise_topk, use_he_she)
    jobs, groups = question_jobs(scorer, rows, _with_pronouns if use_he_she else subjects)
    p = _job_probs(model, jobs, scorer.pad_id, renormalise_topk)
    n_words = 2 + 2 * len(HE_SHE) if use_he_she else 2  # subjects (+ each pronoun in two spellings)
    word = torch.stack([p[list(g)].mean() for g in groups]).view(len(rows), len(QUESTIONS), n_words)
    if use_he_she:
        pronoun = word[..., 2:].view(len(rows), len(QUESTIONS), 2, 2).amax(-1)  # she, he: the likelier spelling
        word = torch.maximum(word[..., :2], pronoun)
    return {q: word[:, i] for i, q in enumerate(QUESTIONS)}


def _causal_subject_probs(
    model: RefineLMPreTrainedModel,
    scorer: CausalQuestionScorer,
    rows: list[dict[str, Any]],
    renormalise_topk: bool,
    use_he_she: bool,
) -> dict[str, torch.Tensor]:
    """The causal path of :func:`subject_probs`. A question's choices are its subjects in order of mention (x2 first
    in the t21 questions): the reference names a top-k slot after the first choice whose tokens it matches."""
    pronouns = HE_SHE if use_he_she else ()
    questions = []
    for r in rows:
        x1, x2 = subjects(_gender_row(r) if use_he_she else r)
        for q in QUESTIONS:
            questions.append((r[q], (x1, x2) if q.startswith("q12") else (x2, x1), (x1, x2, *pronouns)))
    p = scorer.word_probs(model, questions, renormalise_topk).view(len(rows), len(QUESTIONS), -1)
    word = p[..., :2]
    if use_he_she:  # predict(): max(p_she, p_c) keeps p_she unless the subject's is larger
        pronoun = p[..., 2:]
        word = torch.where(word > pronoun, word, pronoun)
    return {q: word[:, i] for i, q in enumerate(QUESTIONS)}


def bias_c(p: dict[str, torch.Tensor]) -> torch.Tensor:
    """C(tau) from P(x_i | q) for the four questions. ``p[q]`` is (B, 2): column 0 = x1, column 1 = x2."""
    b1 = 0.5 * (p["q12"][:, 0] + p["q21"][:, 0]) - 0.5 * (p["q12_neg"][:, 0] + p["q21_neg"][:, 0])
    b2 = 0.5 * (p["q12"][:, 1] + p["q21"][:, 1]) - 0.5 * (p["q12_neg"][:, 1] + p["q21_neg"][:, 1])
    return 0.5 * (b1 - b2)


def reference_matrix(p: dict[str, torch.Tensor]) -> torch.Tensor:
    """(n, 4, 2) in the reference's layout (``preprocess_data.py``): rows t12(a), t12(not a), t21(a), t21(not a);
    columns the subjects in order of mention (so x2, x1 for the t21 rows)."""
    return torch.stack([p["q12"], p["q12_neg"], p["q21"].flip(-1), p["q21_neg"].flip(-1)], dim=1)


def reference_loss(matrix: torch.Tensor, reward: torch.Tensor) -> torch.Tensor:
    """The reference's loss (``redubias/calc_bias.py``: ``calculate_reward`` + ``calculate_batch_manhattan``).

    Each entry's (4, 2) matrix is L1-normalised per column over its 4 questions; D_i = mean over the first
    chunk of 4 entries j and the 4 questions of the L1 distance (``F.pairwise_distance``, eps 1e-6) between the
    normalised rows of entries i and j; loss = -mean_i(r_i * log D_i).
    """
    norm = matrix / matrix.abs().sum(dim=1, keepdim=True).clamp_min(1e-12)
    first = norm[: matrix.shape[1]]  # calculate_manhattan keeps only values[0], the first chunk
    dist = (norm[:, None] - first[None] + 1e-6).abs().sum(-1)  # (n, chunk, 4)
    return -(dist.mean(dim=(1, 2)).log() * reward).mean()


def policy_step(
    model: RefineLMPreTrainedModel,
    scorer: Any,
    rows: list[dict[str, Any]],
    objective: str = "reference",
    use_he_she: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss, rewards) for a mini-batch of UnQover rows; reward r = -|C(tau)| for both objectives.

    ``reference``: probabilities renormalised over the top-k, :func:`reference_loss`.
    ``reinforce_argmax``: full-vocabulary refined probabilities, REINFORCE on the preferred subject of each
    question, ``-r * sum_q log P(a_q | q)`` (no baseline). ``use_he_she``: see :func:`subject_probs`.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"refine_lm: objective must be one of {OBJECTIVES}, not {objective!r}")
    p = subject_probs(model, scorer, rows, renormalise_topk=objective == "reference", use_he_she=use_he_she)
    reward = -bias_c(p).abs().detach()
    if objective == "reference":
        return reference_loss(reference_matrix(p), reward), reward
    logp_actions = sum(p[q].max(-1).values.clamp_min(1e-30).log() for q in QUESTIONS)
    return -(reward * logp_actions).mean(), reward


@torch.no_grad()
def mean_reward(
    model: RefineLMPreTrainedModel,
    scorer: Any,
    rows: list[dict[str, Any]],
    objective: str = "reference",
    use_he_she: bool = False,
    batch_size: int = 32,
) -> float:
    rewards = [
        policy_step(model, scorer, rows[i : i + batch_size], objective, use_he_she)[1]
        for i in range(0, len(rows), batch_size)
    ]
    return float(torch.cat(rewards).mean()) if rewards else math.nan


# ------------------------------------------------------------------------------------------- config + training


@dataclass
class RefineLMScriptArguments:
    dataset_name: str | None = field(default=None, metadata={"help": "training data folder (parquet) or Hub id"})
    dataset_config: str | None = field(default=None, metadata={"help": "dataset config name"})
    dataset_train_split: str = field(default="train", metadata={"help": "training split"})
    dataset_test_split: str = field(default="test", metadata={"help": "held-out split (reward before/after)"})
    categories: list[str] = field(
        default_factory=lambda: ["gender"],
        metadata={"help": "UnQover categories to train on (gender, country, ethnicity, religion; the seed: gender)"},
    )
    pairs_per_item: int = field(
        default=0,
        metadata={
            "help": "subject pairs per (template, attribute), sampled; 0: all "
            "(the reference: 30 x 30 name pairs x 2 templates x 70 occupations for gender)"
        },
    )


@dataclass
class RefineLMTrainingConfig:
    output_dir: str = field(default="runs/refine_lm/checkpoints", metadata={"help": "checkpoint folder"})
    topk: int = field(default=10, metadata={"help": "k: the debiasing layer acts on the top-k logits at each position"})
    train_language: str = field(
        default="auto",
        metadata={
            "help": "X-MOD adapter while training on (English) UnQover: "
            "auto = en_XX where the checkpoint has it, else eval_language; ignored without adapters"
        },
    )
    eval_language: str = field(
        default="de_CH",
        metadata={"help": "X-MOD adapter of both evaluations (German StereoSet); ignored for models without adapters"},
    )
    objective: str = field(default="reference", metadata={"help": "reference (Refine-LM's loss) | reinforce_argmax"})
    layer_input: str = field(
        default="logits",
        metadata={
            "help": "what the k x k layer reads: logits (the top-k logits; the reference's masked-LM model) | probs "
            "(their softmax; the reference's causal-LM model, model_LLM.py, which no layer can make the identity)"
        },
    )
    layer_init: str = field(
        default="identity",
        metadata={
            "help": "identity (W = I, b = 0: with layer_input logits the untrained model is the base model) | "
            "reference (the reference's: W = ones, b = torch's default Linear init, seeded)"
        },
    )
    prompt: str = field(
        default=DEFAULT_PROMPT,
        metadata={
            "help": "causal LMs: the prompt each question goes into at [context] [question] (default: the "
            "reference's few-shot 'Fill in the blank' prompt of its run_llm_*.sh); ignored for masked LMs"
        },
    )
    mask_word: str = field(
        default="blank",
        metadata={"help": "causal LMs: the word written for the blank (the reference's --lm_mask blank)"},
    )
    use_he_she: bool = field(
        default=False,
        metadata={
            "help": "the reference's --use_he_she: a female (male) "
            "subject's probability is max(P(subject), P(she)) (P(he)); gender rows only; its "
            "released gender run sets it"
        },
    )
    learning_rate: float = field(default=5e-5, metadata={"help": "AdamW learning rate"})
    batch_size: int = field(
        default=70, metadata={"help": "templates per update (the reference's DataLoader batch_size)"}
    )
    per_device_train_batch_size: int = field(
        default=20,
        metadata={"help": "mini-batch drawn with replacement from each batch (the reference's mini_batch_size)"},
    )
    num_train_epochs: float = field(default=1.0, metadata={"help": "passes over the training templates"})
    max_steps: int = field(default=-1, metadata={"help": "stop after this many steps (-1: epochs decide)"})
    save_steps: int = field(default=50, metadata={"help": "checkpoint every N steps"})
    save_total_limit: int = field(default=2, metadata={"help": "keep the last N checkpoints"})
    logging_steps: int = field(default=10, metadata={"help": "log the mean reward every N steps"})
    seed: int = field(default=42, metadata={"help": "shuffling / mini-batch sampling seed"})
    reward_eval_rows: int = field(
        default=512,
        metadata={
            "help": "held-out templates (spread over categories, templates, "
            "attributes) for the UnQover reward before/after; 0: all"
        },
    )
    eval_strategy: str = field(default="no", metadata={"help": "unused (kept for the shared pipeline)"})
    report_to: str = field(default="none", metadata={"help": "unused (kept for TRL-style configs)"})

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def model_languages(name: str) -> list[str]:
    """The X-MOD language adapters of a checkpoint (also of a saved Refine-LM model's base); [] for other models."""
    cfg = AutoConfig.from_pretrained(name)
    if cfg.model_type == "refine_lm":
        return list(cfg.base_config.get("languages") or [])
    return list(getattr(cfg, "languages", None) or [])


def resolve_languages(
    name: str, train_language: str | None, eval_language: str | None
) -> tuple[str | None, str | None]:
    """(train adapter, eval adapter) for checkpoint ``name``; (None, None) for a model without adapters.

    The seed switches adapters by the language of the data: English UnQover with the English adapter, German
    StereoSet with de_CH. ``train_language=auto`` takes en_XX where the checkpoint has it; SwissBERT alone has
    no English adapter (de_CH, fr_CH, it_CH, rm_CH), so it then trains with ``eval_language`` (logged).
    """
    langs = model_languages(name)
    if not langs:
        return None, None
    ev_lang = eval_language or langs[0]
    if ev_lang not in langs:
        raise ValueError(f"refine_lm: eval_language={ev_lang!r} is not an adapter of {name} (has {', '.join(langs)})")
    tr_lang = train_language or "auto"
    if tr_lang == "auto":
        tr_lang = "en_XX" if "en_XX" in langs else ev_lang
        if tr_lang != "en_XX":
            log.warning(
                "refine_lm: %s has no English adapter (%s): training on English UnQover with the %s adapter",
                name,
                ", ".join(langs),
                tr_lang,
            )
    elif tr_lang not in langs:
        raise ValueError(f"refine_lm: train_language={tr_lang!r} is not an adapter of {name} (has {', '.join(langs)})")
    return tr_lang, ev_lang


def eval_model_args(cfg: Any, model: str) -> dict[str, Any]:
    """lm-eval model_args the before- and after-evaluation share: the evaluation adapter (``hf-mlm``, X-MOD); the
    dtype of a causal LM (``hf``: the base model's and the trained model's, the recipe's ``dtype``)."""
    if model_kind(model) == "causal":
        dtype = getattr(cfg.model, "dtype", None)
        return {"dtype": dtype} if dtype and dtype != "auto" else {}
    _, ev_lang = resolve_languages(model, cfg.training.train_language, cfg.training.eval_language)
    return {"language": ev_lang} if ev_lang else {}


def check_config(cfg: Any) -> None:
    """Raise ValueError on settings that cannot train (the recipe runs this before any evaluation)."""
    from bias_harness.mitigation.recipe import data_options

    args = cfg.training
    if args.objective not in OBJECTIVES:
        raise ValueError(f"refine_lm: objective must be one of {OBJECTIVES}, not {args.objective!r}")
    if args.layer_input not in LAYER_INPUTS:
        raise ValueError(f"refine_lm: layer_input must be one of {LAYER_INPUTS}, not {args.layer_input!r}")
    if args.layer_init not in LAYER_INITS:
        raise ValueError(f"refine_lm: layer_init must be one of {LAYER_INITS}, not {args.layer_init!r}")
    if SLOT not in args.prompt:
        raise ValueError(f"refine_lm: the prompt must contain {SLOT!r} (where the question goes)")
    categories = data_options(cfg).get("categories") or ("gender",)
    if args.use_he_she and set(categories) != {"gender"}:
        raise ValueError(
            f"refine_lm: use_he_she applies to the gender category only (female and male subjects), "
            f"not to categories {', '.join(categories)}"
        )


def make_parser(prog: str | None = None):
    from trl import ModelConfig, TrlParser

    return TrlParser((RefineLMScriptArguments, RefineLMTrainingConfig, ModelConfig), prog=prog)


def _save_checkpoint(
    model: RefineLMPreTrainedModel,
    opt: torch.optim.Optimizer,
    step: int,
    history: list[dict],
    out: Path,
    keep: int,
    reward_before: float | None = None,
) -> None:
    ck = out / f"checkpoint-{step}"
    ck.mkdir(parents=True, exist_ok=True)
    state = {"debias": model.debias.state_dict(), "optimizer": opt.state_dict(), "step": step, "history": history}
    torch.save({**state, "unqover_test_reward_before": reward_before}, ck / "refine_lm_state.pt")
    (ck / "trainer_state.json").write_text(
        json.dumps({"global_step": step, "log_history": history}, indent=2), encoding="utf-8"
    )
    old = sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[-1]))
    for stale in old[:-keep] if keep > 0 else []:
        for f in stale.iterdir():
            f.unlink()
        stale.rmdir()


def _reward_rows(data: Any, n: int, seed: int) -> list[dict[str, Any]]:
    """Held-out rows for the UnQover reward: all, or ``n`` spread over categories, templates and attributes."""
    if data is None:
        return []
    if n <= 0 or len(data) <= n:
        return list(data)
    from bias_harness.mitigation.training_data import columns, spread_order

    cols = columns(data, ("category", "template_id", "activity_id"))
    keys = list(zip(cols["category"], cols["template_id"], cols["activity_id"], strict=True))
    return list(data.select(spread_order(keys, seed)[:n]))


def model_kind(name: str) -> str:
    """``mlm`` for a masked LM (its tokenizer has a mask token), ``causal`` for a causal LM; ValueError otherwise."""
    from transformers import AutoTokenizer
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    cfg = AutoConfig.from_pretrained(name)
    if cfg.model_type in (RefineLMConfig.model_type, RefineLMCausalConfig.model_type):
        raise ValueError(f"{name} is a Refine-LM model already: give refine_lm its base model")
    if AutoTokenizer.from_pretrained(name).mask_token is not None:
        return "mlm"
    if cfg.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "causal"
    raise ValueError(f"{name} is neither a masked LM (its tokenizer has no mask token) nor a causal LM")


def init_layer(layer: torch.nn.Linear, how: str, seed: int) -> None:
    """``identity``: W = I, b = 0. ``reference``: ``model_LLM.py`` / ``model_BERT.py``, W = ones and b as
    ``nn.Linear`` draws it (uniform in +-1/sqrt(k)), from torch's generator seeded with ``seed``."""
    if how not in LAYER_INITS:
        raise ValueError(f"refine_lm: layer_init must be one of {LAYER_INITS}, not {how!r}")
    with torch.no_grad():
        if how == "identity":
            layer.weight.copy_(torch.eye(layer.weight.shape[0]))
            layer.bias.zero_()
        else:
            gen = torch.Generator().manual_seed(seed)
            bound = 1 / math.sqrt(layer.weight.shape[1])
            layer.bias.copy_(torch.empty(layer.bias.shape).uniform_(-bound, bound, generator=gen))
            layer.weight.fill_(1.0)


def _refine_model(
    name: str, tok: Any, args: Any, dtype: str | None = None
) -> tuple[RefineLMPreTrainedModel, Any, str | None]:
    """The base model (frozen) under a fresh layer, its question scorer and the training language adapter (masked
    X-MOD models; else None). A causal base is loaded in ``dtype`` (the recipe's ``dtype``, also that of both
    evaluations and of the saved model, so that a plain ``lm_eval`` of the saved folder computes as the card did)."""
    if model_kind(name) == "causal":
        from transformers import AutoModelForCausalLM

        base = AutoModelForCausalLM.from_pretrained(name, dtype=dtype or "auto")
        model = RefineLMForCausalLM.from_base(base, args.topk, base_model=name, layer_input=args.layer_input)
        scorer: Any = CausalQuestionScorer(
            model.base, tok, model.config.topk, prompt=args.prompt, mask_word=args.mask_word
        )
        train_lang = None
    else:
        from bias_harness.plugins.mlm import MaskedLMScorer

        train_lang, _ = resolve_languages(name, args.train_language, args.eval_language)
        base = AutoModelForMaskedLM.from_pretrained(name)
        if train_lang:
            base.set_default_language(train_lang)
        model = RefineLMForMaskedLM.from_base(base, args.topk, base_model=name, layer_input=args.layer_input)
        model.config.language = train_lang
        scorer = MaskedLMScorer(model.base, tok)
    init_layer(model.debias, args.layer_init, args.seed)
    for p in model.base.parameters():
        p.requires_grad_(False)
    model.base.eval()
    return model, scorer, train_lang


def train_refine_lm(cfg: Any, train_data: Any, eval_data: Any = None, resume: bool = True) -> Path:
    """Train the debiasing layer; save base + layer + tokenizer to ``<output_dir>/../model`` and return it.

    The reference loop (``training_bert.py``): batches of ``batch_size`` templates in order (here: a seeded
    shuffle), one update per batch on a mini-batch of ``per_device_train_batch_size`` templates drawn from it
    with replacement (``random.choices``). The UnQover reward before/after on held-out rows is scored as in
    training (``use_he_she`` included).
    """
    from bias_harness.mitigation.config import last_checkpoint
    from transformers import AutoTokenizer

    args = cfg.training
    name = cfg.model.model_name_or_path
    check_config(cfg)
    tok = AutoTokenizer.from_pretrained(name)
    model, scorer, train_lang = _refine_model(name, tok, args, getattr(cfg.model, "dtype", None))
    opt = torch.optim.AdamW(model.debias.parameters(), lr=args.learning_rate)
    rows = list(train_data)
    test_rows = _reward_rows(eval_data, args.reward_eval_rows, args.seed)
    bs = max(1, args.batch_size)
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
    if checkpoint:
        test_before = state.get("unqover_test_reward_before")
    elif test_rows:
        test_before = mean_reward(model, scorer, test_rows, args.objective, args.use_he_she)
    else:
        test_before = None
    while step < total:
        epoch = step // steps_per_epoch
        order = list(range(len(rows)))
        random.Random(args.seed + epoch).shuffle(order)
        i = (step % steps_per_epoch) * bs
        batch = [rows[j] for j in order[i : i + bs]]
        mini = random.Random(f"{args.seed}:{step}").choices(batch, k=args.per_device_train_batch_size)
        loss, reward = policy_step(model, scorer, mini, args.objective, args.use_he_she)
        opt.zero_grad()
        if torch.isfinite(loss) and loss.requires_grad:
            loss.backward()
            opt.step()
        step += 1
        if step % args.logging_steps == 0 or step == total:
            history.append({"step": step, "loss": float(loss.detach()), "reward": float(reward.mean())})
            log.info(
                "refine_lm step %d/%d loss %.4g reward %.4g", step, total, float(loss.detach()), float(reward.mean())
            )
        if args.save_steps > 0 and (step % args.save_steps == 0 or step == total):
            _save_checkpoint(model, opt, step, history, out, args.save_total_limit, test_before)
    final = out.parent / "model"
    final.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(final)
    tok.save_pretrained(final)
    state = {
        "global_step": step,
        "epoch": step / max(steps_per_epoch, 1),
        "log_history": history,
        "train_language": train_lang,
    }
    if test_rows:
        state["unqover_test_reward_after"] = mean_reward(model, scorer, test_rows, args.objective, args.use_he_she)
        if test_before is not None:
            state["unqover_test_reward_before"] = test_before
    (final / "trainer_state.json").write_text(json.dumps(state, indent=2), encoding="utf-8")
    return final


def main(argv: list[str] | None = None) -> int:  # pragma: no cover - CLI wrapper
    from bias_harness.mitigation.config import ParsedConfig
    from datasets import load_dataset

    script, training, model = make_parser().parse_args_and_config(argv)
    data = load_dataset(script.dataset_name, script.dataset_config)
    cfg = ParsedConfig(script, training, model, None)
    test = data[script.dataset_test_split] if script.dataset_test_split in data else None
    print(train_refine_lm(cfg, data[script.dataset_train_split], test))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
