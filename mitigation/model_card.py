"""The model card of a mitigated model: base model, recipe and its full config, training data with links,
before/after metrics with confidence intervals, limitations, and the command that produced it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bias_harness import __version__, settings
from bias_harness.mitigation.evaluate import MetricRow, metric_rows
from bias_harness.mitigation.recipes import Recipe

SUMMARY_FILE = "bias_harness_mitigation.json"


@dataclass
class CardData:
    recipe: Recipe
    base_model: str
    config: dict[str, Any]  # the full resolved training configuration
    data_splits: dict[str, int]
    data_options: dict[str, Any]
    before: dict[str, Any]
    after: dict[str, Any]
    command: str
    adapter: bool = False
    train_metrics: dict[str, Any] = field(default_factory=dict)


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]"


def _table(rows: list[MetricRow]) -> str:
    if not rows:
        return "_No metrics: evaluation was skipped or produced no numeric results._"
    lines = ["| task | metric | filter | before [95% CI] | after [95% CI] | Δ |", "|---|---|---|---|---|---|"]
    for r in rows:
        delta = "–" if r.delta is None else f"{r.delta:+.3f}"
        lines.append(f"| {r.task} | {r.metric} | {r.filter} | {_num(r.before)}{_ci(r.before_ci)} | {_num(r.after)}{_ci(r.after_ci)} | {delta} |")
    return "\n".join(lines)


def _usage(data: CardData, repo_hint: str) -> str:
    if data.recipe.model_kind == "mlm":
        return (
            "```python\nfrom bias_harness.mitigation.refine_lm import RefineLMForMaskedLM\n"
            f"model = RefineLMForMaskedLM.from_pretrained(\"{repo_hint}\")  # base masked LM + debiasing layer\n```\n"
            f"lm-eval: `bias-harness eval --model hf-mlm --model_args pretrained={repo_hint} --tasks stereoset_de`"
        )
    if data.adapter:
        return (
            "```python\nfrom peft import AutoPeftModelForCausalLM\n"
            f"model = AutoPeftModelForCausalLM.from_pretrained(\"{repo_hint}\")  # loads {data.base_model} + this LoRA adapter\n```\n"
            f"lm-eval: `bias-harness eval --model hf --model_args pretrained={data.base_model},peft={repo_hint} --tasks ...`"
        )
    return (
        "```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
        f"model = AutoModelForCausalLM.from_pretrained(\"{repo_hint}\")\ntokenizer = AutoTokenizer.from_pretrained(\"{repo_hint}\")\n```\n"
        f"lm-eval: `bias-harness eval --model hf --model_args pretrained={repo_hint} --tasks ... --apply_chat_template`"
    )


def render(data: CardData, repo_id: str | None = None) -> str:
    recipe = data.recipe
    org = settings.hub_org()
    links = "\n".join(f"- [`{org}/{d}`](https://huggingface.co/datasets/{org}/{d}) (built by `bias-harness data build {d}`)" for d in recipe.datasets)
    splits = ", ".join(f"{s}: {n:,} rows" for s, n in data.data_splits.items())
    opts = ", ".join(f"{k}={v}" for k, v in data.data_options.items() if v is not None) or "defaults"
    eval_settings = data.after.get("settings") or data.before.get("settings") or {}
    meta: dict[str, Any] = {
        "base_model": data.base_model,
        "library_name": "peft" if data.adapter else "transformers",
        "pipeline_tag": "fill-mask" if recipe.model_kind == "mlm" else "text-generation",
        "tags": ["bias-harness", "bias-mitigation", recipe.name] + (["trl", recipe.trainer] if recipe.trainer != "refine_lm" else ["refine-lm"]),
        "datasets": [f"{org}/{d}" for d in recipe.datasets],
    }
    train_metrics = "\n".join(f"- `{k}`: {v}" for k, v in data.train_metrics.items()) or "- (not recorded)"
    eval_yaml = yaml.safe_dump(eval_settings, sort_keys=True).strip()
    config_yaml = yaml.safe_dump(data.config, sort_keys=True, default_flow_style=False).strip()
    recipe_yaml = "\n".join(line for line in recipe.config_path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")).strip()
    rows = metric_rows(data.before, data.after)
    return f"""---
{yaml.safe_dump(meta, sort_keys=False).strip()}
---

# {recipe.name}: {data.base_model} after bias mitigation

{recipe.summary}

- **Base model:** `{data.base_model}`
- **Recipe:** `{recipe.name}` (bias-harness {__version__}, trainer: `{recipe.trainer}`{", LoRA adapter" if data.adapter else ""})
- **Follows:** {recipe.source}

## Use

{_usage(data, repo_id or "PATH_OR_REPO")}

## Training data

{links}

Rows: {splits}. Data options: {opts}.

## Evaluation: before and after

Both models were evaluated with lm-eval under the same settings:

```yaml
{eval_yaml}
```

{_table(rows)}

Confidence intervals are bootstrap percentiles where the task reports them (`*_ci_lo`/`*_ci_hi`), else mean ± 1.96 × lm-eval's stderr; "–" means the metric was not available.
{"**These numbers come from a subset run (`limit` above); they are not comparable to full-dataset results.**" if eval_settings.get("limit") else ""}

## Training

{train_metrics}

Recipe file `mitigation/{recipe.name}.yaml` (TRL config format; `--set` overrides of this run are in the command below):

```yaml
{recipe_yaml}
```

<details><summary>Full resolved configuration (every field of the TRL dataclasses)</summary>

```yaml
{config_yaml}
```
</details>

## Limitations

{recipe.limitations}

A few gradient steps on a small model prove the pipeline, not the method: read the table above, not the recipe name.

## Reproduce

```bash
{data.command}
```
"""


def write(folder: Path, data: CardData, repo_id: str | None = None) -> Path:
    """Write README.md (the card) and a machine-readable summary next to the model."""
    folder = Path(folder)
    (folder / "README.md").write_text(render(data, repo_id), encoding="utf-8")
    summary = {
        "recipe": data.recipe.name,
        "base_model": data.base_model,
        "adapter": data.adapter,
        "data_splits": data.data_splits,
        "data_options": data.data_options,
        "before": data.before,
        "after": data.after,
        "command": data.command,
    }
    (folder / SUMMARY_FILE).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return folder / "README.md"
