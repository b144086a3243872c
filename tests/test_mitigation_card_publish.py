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

BEFORE = {"settings": {"tasks": ["t"], "limit": None}, "results": {"t": {
    "bias,none": 0.4, "bias_ci_lo,none": 0.3, "bias_ci_hi,none": 0.5,
    "acc,none": 0.8, "acc_stderr,none": 0.05, "invalid_rate,none": 0.1, "note,none": "text"}}}
AFTER = {"settings": {"tasks": ["t"], "limit": None}, "results": {"t": {
    "bias,none": 0.1, "bias_ci_lo,none": 0.05, "bias_ci_hi,none": 0.2,
    "acc,none": 0.7, "acc_stderr,none": "N/A", "invalid_rate,none": 0.0}}}


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
    data = model_card.CardData(recipe=get_recipe("stop_align"), base_model="base/model", config={"learning_rate": 1e-5},
                               data_splits={"train": 450}, data_options={"setting": None}, before=BEFORE, after=AFTER,
                               command="bias-harness mitigate stop_align --model base/model")  # fmt: skip
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


def test_push_calls_the_hub_client_and_never_leaks_the_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
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
