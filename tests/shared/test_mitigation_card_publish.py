"""Before/after tables with CIs, the model card, and publishing (dry run, Hub client, no token anywhere)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from bias_harness.mitigation import model_card
from bias_harness.mitigation.evaluate import Z95, metric_rows
from bias_harness.mitigation.publish import check_no_token, push_model
from bias_harness.mitigation.recipes import get_recipe

TOKEN = "hf_secret_test_token"

BEFORE = {
    "settings": {"tasks": ["t"], "limit": None},
    "results": {
        "t": {
            "bias,none": 0.4,
            "bias_ci_lo,none": 0.3,
            "bias_ci_hi,none": 0.5,
            "acc,none": 0.8,
            "acc_stderr,none": 0.05,
            "invalid_rate,none": 0.1,
            "note,none": "text",
        }
    },
}
AFTER = {
    "settings": {"tasks": ["t"], "limit": None},
    "results": {
        "t": {
            "bias,none": 0.1,
            "bias_ci_lo,none": 0.05,
            "bias_ci_hi,none": 0.2,
            "acc,none": 0.7,
            "acc_stderr,none": "N/A",
            "invalid_rate,none": 0.0,
        }
    },
}


def test_metric_rows_pair_values_and_cis() -> None:
    rows = {r.metric: r for r in metric_rows(BEFORE, AFTER)}
    assert set(rows) == {"bias", "acc", "invalid_rate"}  # CI/stderr keys and non-numbers are not rows
    assert rows["bias"].before_ci == (0.3, 0.5) and rows["bias"].after_ci == (0.05, 0.2)
    assert rows["bias"].delta == pytest.approx(-0.3)
    lo, hi = rows["acc"].before_ci
    assert lo == pytest.approx(0.8 - Z95 * 0.05) and hi == pytest.approx(0.8 + Z95 * 0.05)
    assert rows["acc"].after_ci is None  # stderr "N/A": no interval


def _card(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    data = model_card.CardData(
        recipe=get_recipe("stop_align"),
        base_model="base/model",
        config={"learning_rate": 1e-5},
        data_splits={"train": 450},
        data_options={"setting": None},
        before=BEFORE,
        after=AFTER,
        command="bias-harness mitigate stop_align --model base/model",
    )
    model_card.write(folder, data, repo_id="org/name")
    return folder


def test_card_holds_the_numbers_config_and_links(tmp_path: Path) -> None:
    text = (_card(tmp_path) / "README.md").read_text()
    assert "base_model: base/model" in text
    assert "| t | bias | none | 0.400 [0.300, 0.500] | 0.100 [0.050, 0.200] | -0.300 |" in text
    assert "| t | acc | none | 0.800 [0.702, 0.898] | 0.700 | -0.100 |" in text
    assert "learning_rate: 1.0e-05" in text
    assert "https://huggingface.co/datasets/" in text and "/stop" in text
    assert "## Limitations" in text and "human" in text
    assert "bias-harness mitigate stop_align --model base/model" in text


def test_dry_run_writes_the_exact_upload_folder(tmp_path: Path) -> None:
    folder = _card(tmp_path)
    out = push_model(folder, "org/name", dry_run_dir=tmp_path / "upload")
    files = sorted(p.relative_to(out).as_posix() for p in Path(out).rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert (Path(out) / "README.md").read_bytes() == (folder / "README.md").read_bytes()


def test_push_calls_the_hub_client_and_never_leaks_the_token(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import huggingface_hub

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    calls: list[tuple[str, dict]] = []

    class FakeApi:
        def __init__(self, *a, **k) -> None:
            calls.append(("init", k))

        def create_repo(self, repo_id, **k):
            calls.append(("create_repo", {"repo_id": repo_id, **k}))

        def upload_folder(self, **k):
            calls.append(("upload_folder", {**k, "files": sorted(p.name for p in Path(k["folder_path"]).iterdir())}))
            return type("Commit", (), {"commit_url": f"https://huggingface.co/{k['repo_id']}/commit/abc"})()

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    folder = _card(tmp_path)
    with caplog.at_level(logging.DEBUG):
        url = push_model(folder, "org/debiased", private=True)
    assert url == "https://huggingface.co/org/debiased/commit/abc"
    create = next(c for n, c in calls if n == "create_repo")
    assert create == {"repo_id": "org/debiased", "repo_type": "model", "private": True, "exist_ok": True}
    upload = next(c for n, c in calls if n == "upload_folder")
    assert upload["repo_id"] == "org/debiased" and upload["repo_type"] == "model"
    assert upload["files"] == ["README.md", "bias_harness_mitigation.json", "config.json"]
    out = capsys.readouterr()
    assert TOKEN not in caplog.text and TOKEN not in out.out and TOKEN not in out.err
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or TOKEN.encode() not in path.read_bytes()


def test_folder_containing_the_token_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    folder = _card(tmp_path)
    (folder / "leak.txt").write_text(f"token={TOKEN}")
    with pytest.raises(RuntimeError, match="contains the Hugging Face token") as err:
        check_no_token(folder)
    assert TOKEN not in str(err.value)
    with pytest.raises(ValueError, match="ORG/NAME"):
        push_model(folder, "no-slash")


# ---------------------------------------------------------------- Hub card API: model-index and paired significance


def _names(ctx: str) -> list[str]:
    return [line[3:].rstrip(".") for line in ctx.splitlines() if line[:3] in ("1. ", "2. ")]


def _demet_eval(run_dir: Path, answer) -> dict:
    """A real lm-eval run of `demet` (261 docs, scripted answers) through the mitigation evaluator, samples kept."""
    from bias_harness.mitigation import evaluate as ev

    from tests.helpers import scripted_lm

    settings = ev.EvalSettings(
        tasks=["demet"], limit=261, bootstrap_iters=200, apply_chat_template=False, metadata={"breakdown": True}
    )
    result = ev.evaluate(None, settings, lm=scripted_lm(answer), run_dir=run_dir)
    ev.save(result, run_dir.with_suffix(".json"))
    return result


def test_card_model_index_and_significance_match_lm_eval_results(tmp_path: Path) -> None:
    import json

    from bias_harness.datasets_src.demet.builder import NAMES
    from huggingface_hub import ModelCard

    gender = {n: g for g, names in NAMES.items() for n in names}
    rank = {"woman": 0, "neutral": 1, "man": 2}

    def oracle(ctx: str) -> str:  # woman > neutral > man: every pair bias 2 (the base model below: always NAME1, 0)
        a, b = _names(ctx)
        return "1" if rank[gender[a]] <= rank[gender[b]] else "2"

    eval_dir = tmp_path / "eval"
    before = _demet_eval(eval_dir / "before", lambda ctx: "1")
    after = _demet_eval(eval_dir / "after", oracle)
    folder = tmp_path / "model"
    folder.mkdir()
    data = model_card.CardData(
        recipe=get_recipe("counterfactual_grpo"),
        base_model="base/model",
        config={},
        data_splits={"train": 4},
        data_options={},
        before=before,
        after=after,
        command="bias-harness mitigate ...",
        eval_dir=eval_dir,
    )
    card = ModelCard.load(model_card.write(folder, data, repo_id="org/debiased"))

    # every metric of the card's model-index is the number lm-eval wrote in results_*.json of that evaluation
    recorded = {
        stage: json.loads(next((eval_dir / stage).glob("results_*.json")).read_text())["results"]["demet"]
        for stage in ("before", "after")
    }
    results = card.data.eval_results
    assert card.data.model_name == "org/debiased" and card.data.base_model == "base/model"
    n_numeric = sum(
        isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
        for stage in recorded.values()
        for k, v in stage.items()
        if "," in k and not k.split(",")[0].endswith(("_stderr", "_ci_lo", "_ci_hi"))
    )
    assert len(results) == n_numeric > 50
    for r in results:
        stage = r.metric_args["stage"]
        assert r.metric_value == recorded[stage][f"{r.metric_type},{r.metric_config}"]
        assert (r.task_type, r.task_name, r.dataset_type, r.dataset_config, r.dataset_split) == (
            "text-generation",
            "demet",
            "bias-harness/demet",
            "prompts",
            "test",
        )
        assert r.source_url and r.source_name.startswith("bias-harness")
    mixed = {r.metric_args["stage"]: r.metric_value for r in results if r.metric_type == "mixed_gender_bias"}
    assert mixed == {"before": 0.0, "after": 2.0}

    # significance: pair biases 0 -> 2 on every resample of matched pairs; no invalid answers in either run (p = 1)
    text = card.text
    # verdicts: the always-"1" model's Eq. 2 measures position (not interpretable), the oracle's passes
    assert (
        "| demet | mixed_gender_bias | choice | 0.000 [0.000, 0.000] | 2.000 [2.000, 2.000] | +2.000 | "
        "**not interpretable** / bias | [2.000, 2.000] |"
    ) in text
    row = next(line for line in text.splitlines() if line.startswith("| demet | mixed_gender_bias | choice |"))
    assert row.endswith("(bootstrap) | **yes** | not a change in bias (a verdict failed) |")
    assert (
        "| demet | invalid_rate | choice | 0.000 [0.000, 0.000] | 0.000 [0.000, 0.000] | +0.000 | – / – | [0.000, "
        "0.000] | 1.0000 (McNemar) | no | – |"
    ) in text
    assert (
        "| demet | score_woman_woman | choice | -1.000 | -1.000 | +0.000 | **not interpretable** / interpretable "
        "| – | – | not tested | – |" in text
    )
    assert "**Significant changes (p < 0.05): 4 of 5 tested metrics**" in text
    # the always-"1" baseline measures position: no significant difference reads as a change in bias
    assert (
        "Of these, reductions of bias to below detection (a bias before, no detectable bias after): none; changes "
        "in bias (valid before and after): none; not read as a change in bias, as a verdict failed:" in text
    )
    assert (eval_dir / "compare" / "README.md").is_file() and (
        eval_dir / "compare" / "compare_demet_choice.png"
    ).stat().st_size > 1000
    summary = json.loads((folder / model_card.SUMMARY_FILE).read_text())
    assert {m["metric"] for m in summary["comparison"]["metrics"]} >= {"mixed_gender_bias", "invalid_rate"}


def test_model_card_the_hub_cannot_parse_is_refused(tmp_path: Path) -> None:
    folder = _card(tmp_path)
    (folder / "README.md").write_text("---\nbase_model: [unclosed\n---\n# card\n")
    with pytest.raises(ValueError, match="cannot be read by huggingface_hub"):
        push_model(folder, "org/name", dry_run_dir=tmp_path / "upload")
    assert not (tmp_path / "upload").exists()
