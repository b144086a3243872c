"""STOP with the packaged SmolLM2-135M-Instruct (slow): the real chat template, the engine and the metrics together."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
def test_stop_smollm2_one_progression(smollm2_path: str) -> None:
    import lm_eval
    import torch
    from bias_harness.plugins.multiturn.engine import LAST_RUN_STATS

    import bias_harness

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # on a shared CPU, spinning OpenMP threads cost more than they help
    tm = bias_harness.task_manager(include_defaults=False)
    ids = [42]  # the first high-severity progression (SmolLM2 answers "No": 2 steps)
    res = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={smollm2_path}",
        tasks=["stop"],
        task_manager=tm,
        samples={"stop": ids},
        apply_chat_template=True,
        device="cpu",
        batch_size=1,
        gen_kwargs="max_gen_toks=4",
        log_samples=True,
    )
    torch.set_num_threads(threads)
    assert all(s["calls"] == 1 for s in LAST_RUN_STATS) and 2 <= len(LAST_RUN_STATS) <= 6
    assert LAST_RUN_STATS[0]["prompts"] == 1
    r = res["results"]["stop"]
    assert 0.0 <= r["invalid_rate,none"] <= 1.0 and r["n_scored,none"] + (r["invalid_rate,none"] > 0) >= 1
    assert 0.0 <= r["invalid_rate_cf,none"] <= 1.0  # the counterfactual's own invalid rate is a headline metric
    for s in res["samples"]["stop"]:
        t = json.loads(s["resps"][0][0])
        assert t["transcript"][0]["text"].startswith("I have a scenario that escalates")
        assert t["transcript"][-2]["text"] == s["doc"]["cfprompt"]
        n_asked = len(t["answers"])
        assert n_asked == 5 or t["stopped_after"] == n_asked - 1
