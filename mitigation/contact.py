"""Recipe of the Contact Hypothesis work (Raj et al. 2024): Social Contact Debiasing (``scd``), its held-out
evaluation task's documents (``scd_heldout``, ``mitigation/tasks/``) and the paper's before/after breakdown tables
by scale, scenario, principle and axis (Tables 11-14)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
from bias_harness.mitigation import overlap
from bias_harness.mitigation.local_tasks import write_transfer_tasks
from bias_harness.mitigation.recipe import DataOptions, HeldOut, Recipe, fixed
from bias_harness.mitigation.training_data import chat, columns, load, sft_dict, spread_order

# The paper's breakdowns (Tables 11-14): the strata a small training budget spreads over, and the doc fields the
# before/after breakdown tables group by.
SCD_STRATA = ("scale", "scenario", "principle", "axis")


def spread_contact_rows(ds: datasets.Dataset, n: int | None, seed: int = 0) -> datasets.Dataset:
    """Contact grid rows spread over scales, scenarios, principles and axes (:func:`spread_order`), whole prompt
    sets kept together (a set's none / positive / negative prompts stay adjacent, so contact effects can be
    computed on a prefix); the first ``n`` rows, or all of them reordered when ``n`` is None."""
    cols = columns(ds, ("prompt_set_id", *SCD_STRATA))
    sets: dict[str, list[int]] = {}
    for i, set_id in enumerate(cols["prompt_set_id"]):
        sets.setdefault(set_id, []).append(i)
    ids = list(sets)
    keys = [tuple(cols[k][sets[s][0]] for k in SCD_STRATA) for s in ids]
    rows = [i for u in spread_order(keys, seed) for i in sets[ids[u]]]
    return ds.select(rows[:n] if n is not None else rows)


def scd_train_rows(opts: DataOptions) -> datasets.Dataset:
    """The grid rows setting N trains on (Table 9); ``--max-train-rows N``: N rows spread over scales, scenarios,
    principles and axes (seeded), not a prefix of the grid (which is ordered scale first)."""
    train = load("contact_scd", f"setting{opts.setting}", opts)["train"]
    if opts.max_train_rows is not None:  # the grid is large: cut before converting
        train = spread_contact_rows(train, min(opts.max_train_rows, len(train)), opts.seed)
    return train


def scd_data(opts: DataOptions) -> datasets.DatasetDict:
    """Contact prompts with their unbiased answers, the training split of setting N (Table 9)."""
    train = scd_train_rows(opts)
    return sft_dict({"train": [chat(None, p, c) for p, c in zip(train["prompt"], train["completion"], strict=True)]})


def scd_split(opts: DataOptions, data: datasets.DatasetDict) -> HeldOut:
    """Setting N's split counted: prompt sets on each side, held-out prompt sets and prompts that training holds,
    descriptors on both sides (shared by design in every setting but 2, which holds descriptors out)."""
    from bias_harness.datasets_src.contact.builder import SCD_SETTINGS

    keys = ("prompt_set_id", "prompt", "descriptor")
    train = columns(scd_train_rows(opts), keys)
    test = columns(load("contact_scd", f"setting{opts.setting}", opts)["test"], keys)
    return HeldOut(
        unit="prompt sets",
        how=f"The paper's setting {opts.setting} (Table 9): {SCD_SETTINGS[opts.setting]}; `scd_heldout` evaluates the "
        "held-out split, prompted as trained (a prompt set: one template, descriptor and scale with its none / "
        "positive / negative contact prompts).",
        train_rows=len(data["train"]),
        train_units=len(set(train["prompt_set_id"])),
        eval_units={"scd_heldout": len(set(test["prompt_set_id"]))},
        eval_docs={"scd_heldout": len(test["prompt"])},
        overlap=(
            ("held-out prompt sets in training", overlap.shared(test["prompt_set_id"], train["prompt_set_id"])),
            ("held-out prompts that training holds verbatim", overlap.verbatim(test["prompt"], train["prompt"])),
            ("descriptors on both sides", overlap.shared(test["descriptor"], train["descriptor"])),
        ),
    )


RECIPES = (
    Recipe(
        name="scd",
        trainer="sft",
        summary="Social Contact Debiasing: one epoch of instruction tuning on contact prompts paired with unbiased "
        "answers.",
        source="Raj et al. 2024, Breaking Bias, Building Bridges: Evaluation and Mitigation of Social Biases in LLMs "
        "via Contact Hypothesis (AIES), Sec. 4 + Table 9",
        build=scd_data,
        eval_tasks=fixed("scd_heldout"),
        eval_metadata=lambda opts: {"scd_setting": opts.setting},
        include_tasks=True,
        local_tasks=write_transfer_tasks,
        datasets=("contact_scd",),
        settings=tuple(range(1, 9)),
        heldout=scd_split,
        limitations=(
            "The paper's ideal unbiased responses and fine-tuning splits were never published; the responses and "
            "the held-out splits here follow the paper's description (Table 9). BBQ / CrowS-Pairs transfer (paper "
            "Table 15) runs offline with `--eval-tasks scd_heldout,bbq_local,crows_pairs_local` (6 of BBQ's 11 "
            "categories; the original 2020 CrowS-Pairs, not the revised release lm-eval reads from the Hub)."
        ),
    ),
)


def scd_heldout_docs(
    scd_setting: int | str | None = None, instruction_suffix: bool = True, **kwargs: Any
) -> datasets.DatasetDict:
    """``custom_dataset`` of the ``scd_heldout`` task (mitigation/tasks): the test split of SCD setting N.

    Rows are the contact grid rows of ``contact_scd/settingN`` (split ``test``) with the bare prompt restored,
    plus ``query`` = the training prompt (prompt + answer instruction, as ``scd_example`` builds it), so the
    contact metrics apply unchanged. The rows are spread over scales, scenarios, principles and axes (seeded,
    prompt sets kept together), so ``--limit N`` evaluates a spread, not the first scale of the grid.
    """
    from bias_harness.plugins import data
    from bias_harness.plugins.contact.metrics import instruction

    if scd_setting in (None, ""):
        raise ValueError("scd_heldout needs --metadata '{\"scd_setting\": N}' (N = 1..8)")
    sources = {k: v for k, v in kwargs.items() if k in ("data_source", "data_dir", "hub_repo")}
    ds = data.load("contact_scd", f"setting{int(scd_setting)}", **sources)["test"]
    ds = spread_contact_rows(ds, None, int(kwargs.get("scd_seed", 0)))

    def _prepare(batch: dict[str, list]) -> dict[str, list]:
        prompts = list(batch["question"])
        queries = [
            f"{p} {instruction(o)}" if instruction_suffix else p for p, o in zip(prompts, batch["options"], strict=True)
        ]
        return {"prompt": prompts, "query": queries}

    return datasets.DatasetDict({"test": ds.map(_prepare, batched=True, batch_size=10_000)})


# ----------------------------------------------------------------------------- before/after breakdown tables


def breakdowns(run_dir: Path) -> dict[str, dict[str, dict[str, dict[str, Any]]]]:
    """{task: {field: {value: {bias_pct_<contact>, n, invalid}}}} from the logged samples of the contact tasks
    (``scd_heldout``, ``contact_*``) in lm-eval's output folder ``run_dir``; {} when there are none."""
    from bias_harness.plugins.contact.metrics import breakdown
    from bias_harness.plugins.contact.report import sample_records

    from bias_harness.runs import load_run

    try:
        run = load_run(run_dir)
    except FileNotFoundError:
        return {}
    tables: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}
    for task in run.sample_files:
        recs = sample_records(run, task)
        if recs and all(r.get(f) is not None for r in recs for f in SCD_STRATA):
            tables[task] = {f: {str(k[0]): dict(row) for k, row in breakdown(recs, [f]).items()} for f in SCD_STRATA}
    return tables


def _cell(row: dict[str, Any], key: str) -> str:
    v = row.get(key)
    return "n/a" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))


def breakdown_markdown(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Before/after bias % per contact type by scale / scenario / principle / axis, for every task with these
    breakdowns (:func:`breakdowns`)."""
    lines: list[str] = []
    b_all, a_all = before.get("breakdowns") or {}, after.get("breakdowns") or {}
    for task in sorted(t for t in set(b_all) | set(a_all) if set(b_all.get(t) or a_all[t]) == set(SCD_STRATA)):
        for name in SCD_STRATA:
            b, a = b_all.get(task, {}).get(name, {}), a_all.get(task, {}).get(name, {})
            lines += [
                f"### {task}: by {name}",
                "",
                f"| {name} | n | bias % none (before / after) | bias % positive "
                "(before / after) | bias % negative (before / after) | invalid (before / after) |",
                "|---|---|---|---|---|---|",
            ]
            for value in sorted(set(b) | set(a)):
                rb, ra = b.get(value, {}), a.get(value, {})
                keys = ("bias_pct_none", "bias_pct_positive", "bias_pct_negative", "invalid")
                cells = [f"{_cell(rb, k)} / {_cell(ra, k)}" for k in keys]
                lines.append(f"| {value} | {_cell(rb or ra, 'n')} | " + " | ".join(cells) + " |")
            lines.append("")
    return "\n".join(lines)
