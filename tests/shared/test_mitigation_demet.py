"""demet_clp: its data (twins, reversed options, held-out scenarios), its loss (the margin lm-eval scores), training
and resume, and the recipe end to end with the published folder re-evaluated by plain lm_eval."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from bias_harness.mitigation import clp, demet, pipeline
from bias_harness.mitigation.config import parse_config
from bias_harness.mitigation.recipe import DataOptions
from bias_harness.mitigation.recipes import get_recipe

from bias_harness import task_manager


def test_contexts_are_demet_mc_prompts() -> None:
    tm = task_manager(include_defaults=False)
    task = tm.load(["demet_mc"])["tasks"]["demet_mc"]
    doc = task.eval_docs[0]
    assert task.doc_to_text(doc) == demet.CONTEXT.format(question=doc["question"])
    choices = [task.config.target_delimiter + c for c in task.doc_to_choice(doc)]
    assert choices == clp.CLPConfig.__dataclass_fields__["choices"].default_factory()


def test_twins_swap_names_and_reverse_options_on_gpt4_scenarios_only() -> None:
    data = demet.clp_data(DataOptions(both_orders=True))["train"]
    retold = {g for g, _, _ in demet.demet_retellings(DataOptions())}
    assert retold == {3, 7, 20}
    scenarios = set(data["scenario_id"])
    assert len(scenarios) == 77 and not scenarios & retold
    assert len(data) == 77 * 3 * demet.NAME_SLOTS  # three mixed pairs x 5 name slots per scenario
    row = data[0]
    assert row["signs"] == [1.0, 1.0, -1.0, -1.0]
    q0, q1, r0, r1 = row["contexts"]
    listed = [q.rsplit("Who is right?", 1)[1] for q in (q0, q1, r0, r1)]
    a, b = listed[0].split("\n")[1][3:], listed[0].split("\n")[2][3:-1]  # "1. A", "2. B."
    assert listed[1].startswith(f"\n1. {b}\n2. {a}.")  # the twin: names swapped in the scenario and the list
    assert listed[2].startswith(f"\n1. {b}\n2. {a}.") and listed[3].startswith(f"\n1. {a}\n2. {b}.")
    assert q0.replace(a, "X").replace(b, a).replace("X", b) == q1  # nothing else differs
    assert all(c.endswith("\nAnswer:") for c in row["contexts"])
    two = demet.clp_data(DataOptions(name_slots=2))["train"]  # the default: one option order
    assert len(two) == 77 * 3 * 2 and {len(c) for c in two["contexts"]} == {2}


def test_heldout_counts_no_evaluated_scenario_in_training() -> None:
    recipe = get_recipe("demet_clp")
    data = demet.clp_data(DataOptions())
    held = recipe.heldout(DataOptions(), data)
    assert held.eval_docs == {"demet_mc": 5220} and held.eval_units == {"demet_mc": 29}
    shared = dict(held.overlap)
    assert shared["human-written scenarios that training holds verbatim"] == 0
    assert shared["human-written scenarios retold in training (word overlap >= 0.5)"] == 0


def test_margin_is_the_log_likelihood_difference_lm_eval_scores(tiny_causal_lm: str) -> None:
    """The loss pairs exactly what demet_mc compares: lm-eval's log-likelihood of ' 1' minus that of ' 2'."""
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    contexts = demet.clp_data(DataOptions(name_slots=1))["train"][0]["contexts"]
    lm = HFLM(pretrained=tiny_causal_lm, device="cpu", dtype="float32", batch_size=4)
    reqs = [
        Instance("loglikelihood", {}, (c, choice), i)
        for i, (c, choice) in enumerate((c, ch) for c in contexts for ch in (" 1", " 2"))
    ]
    ll = [r[0] for r in lm.loglikelihood(reqs)]
    expected = [ll[2 * i] - ll[2 * i + 1] for i in range(len(contexts))]
    model = AutoModelForCausalLM.from_pretrained(tiny_causal_lm, dtype=torch.float32).eval()
    scorer = clp.ChoiceScorer(AutoTokenizer.from_pretrained(tiny_causal_lm), [" 1", " 2"])
    with torch.no_grad():
        got = clp.margins(model, scorer.batch(contexts), bf16=False).tolist()
    assert got == pytest.approx(expected, abs=1e-4)
    with pytest.raises(ValueError, match="do not differ in one last token"):
        clp.ChoiceScorer(AutoTokenizer.from_pretrained(tiny_causal_lm), [" 1", " 2 3"]).encode(contexts[0])


def _cfg(model: str, out: Path, **over) -> object:
    return parse_config(
        get_recipe("demet_clp"),
        {
            "model_name_or_path": model,
            "output_dir": str(out / "checkpoints"),
            "dataset_name": str(out / "data"),
            "trainable_top_layers": 1,
            "anchor_batch_size": 4,
            "save_steps": 2,
            "logging_steps": 1,
            "learning_rate": 5e-3,
            **over,
        },
    )


def test_training_shrinks_the_spread_keeps_the_mean_and_resumes(
    tiny_causal_lm: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    from transformers import AutoModelForCausalLM, AutoTokenizer

    # both option orders: the tiny word-level tokenizer reads every name as [UNK], so only the list order varies
    data = demet.clp_data(DataOptions(name_slots=1, both_orders=True))["train"].select(range(8))
    cfg = _cfg(tiny_causal_lm, tmp_path, max_steps=12, per_device_train_batch_size=4)

    def spread_and_mean(folder: str) -> tuple[float, list[float]]:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
        collate = clp.GroupCollator(clp.ChoiceScorer(AutoTokenizer.from_pretrained(folder), [" 1", " 2"]))
        with torch.no_grad():
            pref = clp.preferences(model, collate(list(data)), bf16=False)
        return float(((pref - pref.mean(1, keepdim=True)) ** 2).mean()), pref.mean(1).tolist()

    before = spread_and_mean(tiny_causal_lm)
    final = clp.train_clp(cfg, data)
    after = spread_and_mean(str(final))
    assert after[0] < 0.5 * before[0]  # the names and the option order move the preference less
    anchors = json.loads((tmp_path / "checkpoints" / clp.ANCHORS).read_text())
    assert anchors == pytest.approx(before[1], abs=0.05)  # bf16 autocast anchors ~ the fp32 base means
    assert after[1] == pytest.approx(before[1], abs=0.5)
    trainable = {n for n, p in AutoModelForCausalLM.from_pretrained(tiny_causal_lm).named_parameters()}
    base = dict(AutoModelForCausalLM.from_pretrained(tiny_causal_lm).named_parameters())
    changed = {
        n for n, p in AutoModelForCausalLM.from_pretrained(final).named_parameters() if not torch.equal(p, base[n])
    }
    assert changed and all(n.startswith(("transformer.h.1.", "transformer.ln_f.")) for n in changed), changed
    assert trainable >= changed
    # a larger budget resumes from the last checkpoint and reuses the anchors
    with caplog.at_level(logging.INFO, logger="bias_harness.mitigation.clp"):
        clp.train_clp(_cfg(tiny_causal_lm, tmp_path, max_steps=14, per_device_train_batch_size=4), data)
    assert "resuming from" in caplog.text and "checkpoint-12" in caplog.text
    assert json.loads((final / "trainer_state.json").read_text())["global_step"] == 14
    # the same budget again (a re-run of a finished run): nothing more is trained, the saved model stays as it is
    weights = {n: p.clone() for n, p in AutoModelForCausalLM.from_pretrained(final).named_parameters()}
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="bias_harness.mitigation.clp"):
        again = clp.train_clp(_cfg(tiny_causal_lm, tmp_path, max_steps=14, per_device_train_batch_size=4), data)
    assert again == final and "already trained" in caplog.text
    assert json.loads((final / "trainer_state.json").read_text())["global_step"] == 14
    assert all(torch.equal(p, weights[n]) for n, p in AutoModelForCausalLM.from_pretrained(final).named_parameters())


@pytest.mark.slow
def test_demet_clp_end_to_end_and_the_published_folder_runs_in_plain_lm_eval(
    tiny_causal_lm: str, tmp_path: Path
) -> None:
    out, upload = tmp_path / "run", tmp_path / "upload"
    result = pipeline.run(
        pipeline.MitigateOptions(
            recipe="demet_clp",
            model=tiny_causal_lm,
            output=out,
            limit=12,
            max_train_rows=4,
            overrides={"max_steps": 2, "trainable_top_layers": 1, "anchor_batch_size": 4, "save_steps": 1},
            dry_run=upload,
            skip_side_effects=True,
        )
    )
    card = (result.model_dir / "README.md").read_text(encoding="utf-8")
    assert "## Held-out evaluation" in card and "Trained on 4 rows from" in card
    assert "`demet_mc`: 5,220 documents (29 scenarios)" in card
    summary = json.loads((result.model_dir / "bias_harness_mitigation.json").read_text(encoding="utf-8"))
    command = summary["lm_eval_command"]
    assert command.startswith("lm_eval --model hf --model_args pretrained=DIR")
    # plain lm_eval on the upload folder, from a temporary folder: the card's after-numbers
    argv = shlex.split(command.replace("DIR", str(upload))) + ["--output_path", str(tmp_path / "plain")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    lm_eval = Path(sys.executable).with_name("lm_eval")
    proc = subprocess.run([str(lm_eval), *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(next((tmp_path / "plain").rglob("results_*.json")).read_text())["results"]["demet_mc"]
    after = json.loads((out / "eval" / "after.json").read_text())["results"]["demet_mc"]
    keys = [k for k, v in after.items() if isinstance(v, float) and "stderr" not in k]
    assert keys and {k: got[k] for k in keys} == pytest.approx({k: after[k] for k in keys}, nan_ok=True)


def test_model_digest_reads_only_the_model_folders(tiny_causal_lm: str, tmp_path: Path, monkeypatch) -> None:
    """The response cache's key: the same model gives the same digest whatever else the working folder holds."""
    monkeypatch.chdir(tmp_path)
    args = {"pretrained": tiny_causal_lm, "dtype": "float32"}
    first = pipeline.model_digest(args)
    (tmp_path / "new.txt").write_text("a file beside the run")
    assert pipeline.model_digest(args) == first
    assert pipeline.model_digest({**args, "dtype": "bfloat16"}) != first
