"""Recipe of the STOP work (Morabito et al. 2024): alignment by SFT on the progressions with their target answers,
evaluated on STOP and on the paper's transfer benchmarks (BBQ, StereoSet, CrowS-Pairs)."""

from __future__ import annotations

import datasets
from bias_harness.mitigation.local_tasks import write_transfer_tasks
from bias_harness.mitigation.recipe import DataOptions, Recipe, fixed
from bias_harness.mitigation.training_data import load, messages_from_row, sft_dict


def stop_data(opts: DataOptions) -> datasets.DatasetDict:
    """The STOP SFT export (evaluation dialogue with the target answers), all 450 progressions."""
    sft = load("stop", "sft", opts)
    return sft_dict({"train": [messages_from_row(r) for r in sft["train"]]})


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
        limitations=(
            "The paper aligns Llama-3-70b with *human* responses, which were not published; the targets here are the "
            "idealistic answers of the STOP annotation (see the stop dataset card). The model is trained on all 450 "
            "progressions as in the paper (no held-out split), so the `stop` evaluation after training is in-sample. "
            "The transfer evaluations run offline on local copies: lm-eval's BBQ on 6 of its 11 categories "
            "(`bbq_local`), StereoSet (en) and lm-eval's CrowS-Pairs task on the original 2020 CSV "
            "(`crows_pairs_local`; lm-eval's own task reads the revised Hub release). The paper's warm-up of 100 "
            "steps is a setting (`--set warmup_steps=100`); the default warms up over 10% of the run."
        ),
    ),
)
