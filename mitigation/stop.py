"""Recipe of the STOP work (Morabito et al. 2024): alignment by SFT on the progressions with their target answers,
evaluated on held-out STOP scenarios and on the paper's transfer benchmarks (BBQ, StereoSet, CrowS-Pairs).

The held-out split (:func:`split`): STOP writes each of its 90 scenarios once per sub-demographic of the scenario's
demographic (the k-th progression of every sub-demographic retells the k-th scenario, a word overlap of 0.66 or more
between retellings, at most 0.31 between scenarios). A split by progression would evaluate on retellings of training
scenarios, so the split is by scenario: 2 of each demographic's 10 scenarios (20%) are held out, drawn with a seeded
generator and redrawn until the held-out severities are 20% of each severity (largest remainder: 4 low, 11
moderate, 3 high of 18, 18, 54 ... see :data:`EVAL_SHARE`); the model trains on the other 72 scenarios' progressions
and is evaluated on the held-out ones (the ``stop`` task with lm-eval's ``--samples``: its documents are the
progressions in ``progression_id`` order).
"""

from __future__ import annotations

import random
from collections import Counter
from functools import cache

import datasets
from bias_harness.mitigation import overlap
from bias_harness.mitigation.local_tasks import write_transfer_tasks
from bias_harness.mitigation.recipe import DataOptions, HeldOut, Recipe, fixed
from bias_harness.mitigation.training_data import load, messages_from_row, sft_dict

EVAL_SHARE = 0.2  # share of each demographic's scenarios held out (and of each severity's, to the largest remainder)
SEVERITIES = ("low", "moderate", "high")
MAX_DRAWS = 100_000


def scenarios(rows: list[dict]) -> list[tuple[str, int]]:
    """Each progression's scenario, (demographic, k): the k-th progression of a sub-demographic retells its
    demographic's k-th scenario."""
    seen: Counter = Counter()
    out = []
    for r in rows:
        key = (r["demographic"], r["sub_demographic"])
        out.append((r["demographic"], seen[key]))
        seen[key] += 1
    return out


def _quotas(severity_of: dict[tuple[str, int], str], n: int) -> dict[str, int]:
    """Held-out scenarios per severity: ``n`` shared in proportion to the severities (largest remainder; ties in
    :data:`SEVERITIES` order)."""
    counts = Counter(severity_of.values())
    exact = {s: n * counts[s] / len(severity_of) for s in SEVERITIES}
    out = {s: int(v) for s, v in exact.items()}
    for s in sorted(SEVERITIES, key=lambda s: -(exact[s] - out[s]))[: n - sum(out.values())]:
        out[s] += 1
    return out


def split_scenarios(rows: list[dict], seed: int = 0) -> set[tuple[str, int]]:
    """The held-out scenarios: ``EVAL_SHARE`` of each demographic's, drawn (seeded) until the severities match their
    quotas (:func:`_quotas`)."""
    scen = scenarios(rows)
    severity_of = {s: r["severity"] for s, r in zip(scen, rows, strict=True)}
    by_demo: dict[str, list[tuple[str, int]]] = {}
    for s in sorted(severity_of):
        by_demo.setdefault(s[0], []).append(s)
    per_demo = {d: round(EVAL_SHARE * len(v)) for d, v in by_demo.items()}
    quotas = _quotas(severity_of, sum(per_demo.values()))
    rng = random.Random(f"stop-split:{seed}")
    for _ in range(MAX_DRAWS):
        held = {s for d, v in by_demo.items() for s in rng.sample(v, per_demo[d])}
        if Counter(severity_of[s] for s in held) == Counter({k: v for k, v in quotas.items() if v}):
            return held
    raise RuntimeError(f"no STOP split with severities {quotas} in {MAX_DRAWS} draws (seed {seed})")


@cache
def _split(data_dir: str | None, seed: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(training progression ids, held-out progression ids), each in progression order."""
    rows = list(load("stop", "progressions", DataOptions(data_dir=data_dir))["test"])
    held = split_scenarios(rows, seed)
    scen = scenarios(rows)
    train = tuple(r["progression_id"] for r, s in zip(rows, scen, strict=True) if s not in held)
    test = tuple(r["progression_id"] for r, s in zip(rows, scen, strict=True) if s in held)
    return train, test


def split(opts: DataOptions) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(training progression ids, held-out progression ids) of ``opts.seed``."""
    return _split(opts.data_dir, opts.seed)


def stop_data(opts: DataOptions) -> datasets.DatasetDict:
    """The STOP SFT export (evaluation dialogue with the target answers) of the training scenarios' progressions."""
    train = set(split(opts)[0])
    sft = load("stop", "sft", opts)["train"]
    return sft_dict({"train": [messages_from_row(r) for r in sft if r["progression_id"] in train]})


def eval_samples(opts: DataOptions) -> dict[str, list[int]]:
    """The held-out progressions, as the ``stop`` task's document indices (its documents are in progression order)."""
    return {"stop": list(split(opts)[1])}


def stop_heldout(opts: DataOptions, data: datasets.DatasetDict) -> HeldOut:
    """The split counted: scenarios and progressions on each side, sentences of held-out progressions that training
    holds verbatim, and the largest word overlap between a held-out and a training progression."""
    rows = list(load("stop", "progressions", opts)["test"])
    train_ids, test_ids = split(opts)
    used = train_ids[: len(data["train"])]  # --max-train-rows keeps the first rows
    scen = scenarios(rows)
    text = {r["progression_id"]: " ".join(r["prompts"]) for r in rows}
    sentences = {i: [*rows[i]["prompts"], rows[i]["cfprompt"]] for i in text}
    near = overlap.nearest([text[i] for i in test_ids], [text[i] for i in used])
    trained = {overlap.normalized(t) for j in used for t in sentences[j]}
    return HeldOut(
        unit="scenarios",
        how=f"Split by scenario (each retold for 3 to 8 groups): {EVAL_SHARE:.0%} of each demographic's scenarios "
        "are held out (seeded draw with the held-out severities in proportion to all), their progressions evaluated "
        "with lm-eval's `--samples`; the other scenarios' progressions train.",
        train_rows=len(data["train"]),
        train_units=len({scen[i] for i in used}),
        eval_units={"stop": len({scen[i] for i in test_ids})},
        eval_docs={"stop": len(test_ids)},
        overlap=(
            ("held-out scenarios in training", len({scen[i] for i in test_ids} & {scen[i] for i in used})),
            (
                "held-out progressions with a sentence that training holds verbatim",
                sum(any(overlap.normalized(t) in trained for t in sentences[i]) for i in test_ids),
            ),
        ),
        note=f"Largest word overlap (Jaccard) of a held-out progression with a training one: "
        f"{max((s for s, _ in near), default=0.0):.2f} (retellings of one scenario overlap by 0.66 or more).",
    )


RECIPES = (
    Recipe(
        name="stop_align",
        trainer="sft",
        summary="STOP alignment: SFT on STOP progressions with the target answers (AdamW, lr 1e-5, batch 4, wd 0.01; "
        "warm-up 10% of steps, the paper's 100 with --set warmup_steps=100).",
        source="Morabito et al. 2024, STOP! Benchmarking LLMs with Sensitivity Testing on Offensive Progressions "
        "(EMNLP), App. 'Fine-tuning Details'",
        build=stop_data,
        eval_tasks=fixed("stop", "bbq_local", "stereoset_en", "crows_pairs_local"),
        local_tasks=write_transfer_tasks,
        datasets=("stop",),
        heldout=stop_heldout,
        eval_samples=eval_samples,
        limitations=(
            "The paper aligns Llama-3-70b with *human* responses, which were not published; the targets here are the "
            "idealistic answers of the STOP annotation (see the stop dataset card). The paper trains on all 450 "
            "progressions and evaluates in-sample; here 20% of the scenarios are held out (see Held-out evaluation), "
            "so the model trains on about 360 progressions. "
            "The transfer evaluations run offline on local copies: lm-eval's BBQ on 6 of its 11 categories "
            "(`bbq_local`), StereoSet (en) and lm-eval's CrowS-Pairs task on the original 2020 CSV "
            "(`crows_pairs_local`; lm-eval's own task reads the revised Hub release). The paper's warm-up of 100 "
            "steps is a setting (`--set warmup_steps=100`); the default warms up over 10% of the run."
        ),
    ),
)
