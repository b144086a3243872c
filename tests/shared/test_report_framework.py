"""The report framework: merges lm-eval outputs, one sub-section per model, subset runs flagged."""

from __future__ import annotations

import json
from pathlib import Path

from bias_harness.report import load_runs, write_report


def _write(d: Path, model_args: str, limit, results: dict) -> None:
    d.mkdir(parents=True)
    cfg = {"model": "hf", "model_args": model_args, "limit": limit}
    (d / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"results": results, "config": cfg, "configs": {}}))


def test_two_models_and_unknown_task(tmp_path: Path) -> None:
    _write(tmp_path / "a", "pretrained=A", 10, {"toy_task": {"alias": "toy_task", "acc,none": 0.25}})
    _write(tmp_path / "b", "pretrained=B", None, {"toy_task": {"alias": "toy_task", "acc,none": 0.75}})
    runs = load_runs(tmp_path)
    assert list(runs) == ["hf (pretrained=A)", "hf (pretrained=B)"]
    assert runs["hf (pretrained=B)"].metric("toy_task", "acc") == 0.75
    text = write_report([tmp_path], tmp_path / "out").read_text()
    assert "| hf (pretrained=A) | toy_task | acc,none | 0.250 |" in text
    assert "| hf (pretrained=B) | toy_task | acc,none | 0.750 |" in text
    assert "toy_task: 10 (hf (pretrained=A))" in text  # the subset run is flagged, the full one is not
    assert "toy_task: None" not in text


def test_run_files_relative_to_the_run_folder_with_backend(tmp_path: Path) -> None:
    from bias_harness.report import backend_label, source_label

    sanitized = "__root__.cache__bias-harness__models__smollm2"
    d = tmp_path / "demo" / "chat" / sanitized
    d.mkdir(parents=True)
    data = {
        "results": {"toy_task": {"acc,none": 0.5}},
        "configs": {},
        "model_name_sanitized": sanitized,
        "config": {
            "model": "hf",
            "model_args": {"pretrained": "/root/.cache/bias-harness/models/smollm2"},
            "device": "cpu",
            "batch_size": "32",
        },
        "transformers_version": "5.19.0",
        "pretty_env_info": "PyTorch version: 2.13.0+cpu\nIs debug build: False",
        "chat_template": "{{x}}",
    }
    path = d / "results_2026-01-01T00-00-00.json"
    path.write_text(json.dumps(data))
    run_dir = tmp_path / "demo"
    assert source_label(run_dir, path, data) == "chat/smollm2/results_2026-01-01T00-00-00.json"
    assert source_label(run_dir, path, data, prefix=True) == "demo/chat/smollm2/results_2026-01-01T00-00-00.json"
    assert backend_label(data) == "hf (transformers 5.19.0, torch 2.13.0+cpu, cpu, batch size 32, chat template)"
    assert backend_label({"config": {"model": "vllm", "batch_size": "auto"}}) == "vllm (vLLM, batch size auto)"
    vllm_cpu = {
        "config": {"model": "vllm", "device": "cuda:0", "batch_size": "auto"},
        "pretty_env_info": "Is CUDA available: False\n",
    }
    assert backend_label(vllm_cpu) == "vllm (vLLM, CPU, batch size auto)"  # not lm-eval's unused default device
    text = write_report([run_dir], tmp_path / "out").read_text()
    row = (
        "| `chat/smollm2/results_2026-01-01T00-00-00.json` | `hf (pretrained=smollm2)` | hf (transformers 5.19.0, "
        "torch 2.13.0+cpu, cpu, batch size 32, chat template) |"
    )
    assert row in text and "/root/" not in text


def test_comparison_figure_from_a_sections_points(tmp_path: Path) -> None:
    import types

    from bias_harness.report.plots import comparison_plot, section_figure
    from bias_harness.runs import Point, Run

    values = {
        "hf (pretrained=A)": {"bias": Point(0.2, 0.1, 0.3), "rate": Point(0.5)},
        "hf (pretrained=B)": {"bias": Point(-0.1, -0.3, 0.05)},
    }
    assert comparison_plot(values, tmp_path / "x.png", "toy", refs={"bias": 0.0}) == "x.png"
    assert (tmp_path / "x.png").stat().st_size > 1000
    section = types.ModuleType("bias_harness.report.toy")
    section.TITLE = "Toy"
    section.points = lambda run: {"bias": Point(run.results["t"]["b,none"])} if "t" in run.results else {}
    runs = {"m1": Run(results={"t": {"b,none": 0.4}}), "m2": Run()}
    assert (
        section_figure(section, runs, ["m1", "m2"], tmp_path)
        == "![toy: models side by side, 95% CIs](toy_comparison.png)\n"
    )
    assert (tmp_path / "toy_comparison.png").is_file()
    assert section_figure(section, runs, ["m2"], tmp_path) == ""  # no model with points: no figure
    assert section_figure(types.ModuleType("bias_harness.report.none"), runs, ["m1"], tmp_path) == ""


def test_summary_fields_are_filled_from_the_runs(tmp_path: Path, caplog) -> None:
    """Summaries type no numbers: ``{{ model | task | metric [| format] }}`` is replaced by the run's value."""
    _write(
        tmp_path / "a", "pretrained=smol", None, {"toy_task": {"alias": "toy_task", "acc,none": 0.25, "n,none": 41.6}}
    )
    _write(tmp_path / "b", "pretrained=gem", None, {"toy_task": {"alias": "toy_task", "acc,none": 0.125}})
    summary = tmp_path / "summary.md"
    summary.write_text(
        "Intro {{ gem | toy_task | acc | pct }}.\n\n## toy\n"
        "acc {{ smol | toy_task | acc }}, {{smol|toy_task|acc|.1f}}, n {{ smol | toy_task | n | int }}, "
        "missing {{ smol | toy_task | nope }} and {{ other | toy_task | acc }}.\n"
    )
    text = write_report([tmp_path / "a", tmp_path / "b"], tmp_path / "out", summary=summary).read_text()
    assert "Intro 12.5%." in text
    assert "{{" not in text
    with caplog.at_level("WARNING"):
        from bias_harness.report import fill_summary, load_runs

        out = fill_summary(
            "acc {{ smol | toy_task | acc }}, {{smol|toy_task|acc|.1f}}, n {{ smol | toy_task | n | int }}, "
            "missing {{ smol | toy_task | nope }} and {{ other | toy_task | acc }}.",
            load_runs(tmp_path / "a", tmp_path / "b"),
            "summary.md",
        )
    assert out == "acc 0.250, 0.2, n 42, missing n/a and n/a."
    assert "summary.md: {{ smol | toy_task | nope }}" in caplog.text and "'other'" in caplog.text


def test_summary_field_rounding_to_zero_has_no_minus_sign() -> None:
    from bias_harness.report.summary import format_field

    assert [format_field(v, "+.1f") for v in (-0.04, 0.04, -0.06)] == ["+0.0", "+0.0", "-0.1"]
    assert [format_field(v, ".2f") for v in (-0.001, -0.01)] == ["0.00", "-0.01"]
