"""The model card of a mitigated model: base model, recipe and its full config, training data with links,
before/after metrics with confidence intervals and paired significance tests, limitations, and the command that
produced it.

Built with ``huggingface_hub``'s :class:`~huggingface_hub.ModelCard` / :class:`~huggingface_hub.ModelCardData`:
every before/after number is also an :class:`~huggingface_hub.EvalResult`, so the card's YAML carries a
``model-index`` the Hub reads. With the per-document samples of both evaluations (``CardData.eval_dir``), the
card also says for each metric whether the change is significant (``bias-harness compare``, ``plugins/paired.py``).
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from huggingface_hub import EvalResult

from bias_harness.datasets_src.base import PROJECT_URL
from bias_harness.mitigation.evaluate import EvalSettings, MetricRow, lm_eval_flags, metric_rows
from bias_harness.mitigation.recipe import DataOptions, HeldOut, Recipe

from bias_harness import __version__, settings
from bias_harness.atomic import write_text
from bias_harness.redact import redact

log = logging.getLogger(__name__)

SUMMARY_FILE = "bias_harness_mitigation.json"
STAGES = {"before": "base model, before mitigation", "after": "after mitigation"}


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
    # folder with lm-eval's output of both evaluations (before/, after/: results_*.json + samples_*.jsonl); gives
    # the datasets of the model-index and the paired comparison (written to eval_dir/compare/)
    eval_dir: Path | None = None
    comparison: Any = None  # plugins.paired.Comparison (computed by write() from eval_dir when None)
    preset: str | None = None  # the recipe preset the run used (--preset)
    heldout: HeldOut | None = None  # the recipe's split between training and evaluation, counted
    # side effects (mitigation/side_effects.yaml): task -> {"before": evaluation, "after": evaluation}, what each
    # subset is, and those left out with the reason; their comparisons (eval_dir/side_effects/TASK/compare/)
    side_effects: dict[str, dict[str, Any]] = field(default_factory=dict)
    side_effects_why: dict[str, str] = field(default_factory=dict)
    side_effects_skipped: dict[str, str] = field(default_factory=dict)
    side_comparisons: dict[str, Any] = field(default_factory=dict)
    lm_eval_command: str = ""  # plain lm-eval on the published folder (DIR): the after-numbers


def _preset(data: CardData) -> str:
    if not data.preset:
        return ""
    values = ", ".join(f"{k}={v}" for k, v in data.recipe.preset(data.preset).items())
    return f", preset `{data.preset}` ({values})"


def _lora(data: CardData) -> str:
    return ", LoRA adapter" if data.adapter else ""


def _num(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def _ci(ci: tuple[float, float] | None) -> str:
    return "" if ci is None else f" [{ci[0]:.3f}, {ci[1]:.3f}]"


# (task, metric) -> (verdict before, verdict after), each None where no verdict applies
Verdicts = dict[tuple[str, str], tuple[Any, Any]]


def stage_verdicts(data: CardData, rows: list[MetricRow]) -> Verdicts:
    """Each metric's interpretability verdict before and after (:mod:`bias_harness.plugins.validity`, default
    thresholds): the paired comparison's (made from the logged samples, breakdowns included), else from the
    evaluations' results."""
    from bias_harness.plugins.validity import verdict

    res = [(stage.get("results") or {}) for stage in (data.before, data.after)]
    out: Verdicts = {}
    for r in rows:
        m = data.comparison.find(r.task, r.metric, r.filter) if data.comparison is not None else None
        out[r.task, r.metric] = (
            (m.verdict_a, m.verdict_b)
            if m is not None
            else tuple(  # type: ignore[assignment]
                verdict(r.task, r.metric, rs[r.task]) if r.task in rs else None for rs in res
            )
        )
    return out


def _outcome(v: Any) -> str:
    """A verdict in a card cell: its outcome (not interpretable / no detectable bias with the MDE / bias with its
    direction / interpretable); the reasons of a failed one follow the table."""
    if v is None:
        return "–"
    return "**not interpretable**" if not v.interpretable else v.headline()


def _table(rows: list[MetricRow], comparison: Any = None, verdicts: Verdicts | None = None) -> str:
    if not rows:
        return "_No metrics: evaluation was skipped or produced no numeric results._"
    verdicts = verdicts or {}
    judged = any(v is not None for pair in verdicts.values() for v in pair)
    head = "| task | metric | filter | before [95% CI] | after [95% CI] | Δ |"
    if judged:
        head += " verdict (before / after) |"
    if comparison is not None:
        head += " Δ paired 95% CI | p (test) | significant | reads as |"
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        delta = "–" if r.delta is None else f"{r.delta:+.3f}"
        line = (
            f"| {r.task} | {r.metric} | {r.filter} | {_num(r.before)}{_ci(r.before_ci)} | "
            f"{_num(r.after)}{_ci(r.after_ci)} | {delta} |"
        )
        if judged:
            vb, va = verdicts.get((r.task, r.metric), (None, None))
            line += f" {_outcome(vb)} / {_outcome(va)} |"
        if comparison is not None:
            line += _significance(comparison.find(r.task, r.metric, r.filter))
        lines.append(line)
    failed = [
        f"`{task}` {metric} {stage} ({'; '.join(v.reasons)})"
        for (task, metric), pair in verdicts.items()
        for stage, v in zip(("before", "after"), pair)
        if v is not None and not v.interpretable
    ]
    if failed:
        lines += ["", "Not interpretable as bias (docs/validity.md): " + "; ".join(failed) + "."]
    return "\n".join(lines)


def _significance(m: Any) -> str:
    if m is None:
        return " – | – | not tested | – |"
    from bias_harness.report.compare import p_text, verdict

    test = "McNemar" if m.p_mcnemar is not None else "bootstrap"
    return f" [{_num(m.ci_lo)}, {_num(m.ci_hi)}] | {p_text(m.p)} ({test}) | {verdict(m)} | {m.reads_as} |"


def _usage(data: CardData, repo_hint: str) -> str:
    if data.recipe.model_kind == "mlm":
        return (
            "```python\nfrom bias_harness.mitigation.refine_lm import RefineLMForMaskedLM\n"
            f'model = RefineLMForMaskedLM.from_pretrained("{repo_hint}")  # base masked LM + debiasing layer\n```\n'
            f"lm-eval: `bias-harness eval --model hf-mlm --model_args pretrained={repo_hint} --tasks stereoset_de`"
        )
    if data.recipe.trainer == "refine_lm":  # a causal LM under the Refine-LM layer: model type refine_lm_causal
        tasks = ",".join(data.recipe.eval_tasks(DataOptions()))
        return (
            "```python\nimport bias_harness.plugins.refine_lm_model  # registers model_type refine_lm_causal\n"
            "from transformers import AutoModelForCausalLM\n"
            f'model = AutoModelForCausalLM.from_pretrained("{repo_hint}")  # base causal LM + debiasing layer\n```\n'
            f"lm-eval (after `pip install bias-harness`, which registers the model type in lm-eval's `hf`): "
            f"`lm_eval --model hf --model_args pretrained={repo_hint} --tasks {tasks}`"
        )
    if data.adapter:
        return (
            "```python\nfrom peft import AutoPeftModelForCausalLM\n"
            f'model = AutoPeftModelForCausalLM.from_pretrained("{repo_hint}")  '
            f"# loads {data.base_model} + this LoRA adapter\n```\n"
            "lm-eval: `bias-harness eval --model hf "
            f"--model_args pretrained={data.base_model},peft={repo_hint} --tasks ...`"
        )
    return (
        "```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
        f'model = AutoModelForCausalLM.from_pretrained("{repo_hint}")\n'
        f'tokenizer = AutoTokenizer.from_pretrained("{repo_hint}")\n```\n'
        f"lm-eval: `bias-harness eval --model hf --model_args pretrained={repo_hint} --tasks ... --apply_chat_template`"
    )


def task_datasets(run_dir: Path | None) -> dict[str, dict[str, str | None]]:
    """task -> {id, config, split} of the data it was evaluated on, from the task configs lm-eval wrote."""
    out: dict[str, dict[str, str | None]] = {}
    if run_dir is None or not Path(run_dir).is_dir():
        return out
    org = settings.hub_org()
    for path in sorted(Path(run_dir).rglob("results_*.json")):
        for task, cfg in json.loads(path.read_text(encoding="utf-8")).get("configs", {}).items():
            kw = cfg.get("dataset_kwargs") or {}
            if kw.get("dataset"):  # our tasks: plugins.data.load(dataset, config) -> the Hub dataset ORG/<dataset>
                ds, conf = f"{org}/{kw['dataset']}", kw.get("config")
            elif cfg.get("dataset_path"):
                ds, conf = cfg["dataset_path"], cfg.get("dataset_name")
            else:
                continue
            split = cfg.get("test_split") or cfg.get("validation_split")
            out[task] = {"id": ds, "config": conf, "split": split}
    return out


def eval_results(data: CardData, task_type: str) -> list[EvalResult]:
    """One :class:`EvalResult` per numeric before/after metric (metric type = the lm-eval metric key, config =
    filter)."""
    from huggingface_hub import EvalResult

    datasets_of = task_datasets(data.eval_dir / "after" if data.eval_dir else None)
    version = (data.after or data.before).get("versions", {})
    out = []
    for r in metric_rows(data.before, data.after):
        ds = datasets_of.get(r.task, {"id": f"{settings.hub_org()}/{r.task}", "config": None, "split": None})
        for stage, value in (("before", r.before), ("after", r.after)):
            if value is None or math.isnan(value):
                continue
            out.append(
                EvalResult(
                    task_type=task_type,
                    task_name=r.task,
                    dataset_type=ds["id"],
                    dataset_name=f"{r.task} ({ds['id']})",
                    dataset_config=ds["config"],
                    dataset_split=ds["split"],
                    metric_type=r.metric,
                    metric_value=value,
                    metric_name=f"{r.metric} ({STAGES[stage]})",
                    metric_config=r.filter,
                    metric_args={
                        "stage": stage,
                        "filter": r.filter,
                        "task_version": version.get(r.task),
                        **_verdict_args(data, r, stage),
                        **_split_args(data, r),
                    },
                    source_name=f"bias-harness {__version__} mitigate (lm-eval)",
                    source_url=PROJECT_URL,
                )
            )
    return out


def _verdict_args(data: CardData, row: MetricRow, stage: str) -> dict[str, Any]:
    """The model-index's verdict of one stage's number (outcome, MDE) and, after training, what the change reads as:
    the same words as the card's table and `bias-harness compare`."""
    m = data.comparison.find(row.task, row.metric, row.filter) if data.comparison is not None else None
    if m is None:
        return {}
    v = m.verdict_a if stage == "before" else m.verdict_b
    out: dict[str, Any] = {}
    if v is not None:
        out["verdict"] = v.outcome
        if v.mde is not None:
            out["mde"] = round(float(v.mde), 6)
    if stage == "after":
        out["reads_as"] = m.reads_as
    return out


def _split_args(data: CardData, row: MetricRow) -> dict[str, Any]:
    """The model-index's account of the split behind one number: the held-out summary and the documents evaluated."""
    out: dict[str, Any] = {}
    if data.heldout is not None and row.task in _own_tasks(data):
        out["split"] = data.heldout.summary()
    n = (data.after or data.before).get("n_samples", {}).get(row.task, {})
    if isinstance(n, dict) and n.get("effective") is not None:
        out["documents"] = n["effective"]
    return out


def _own_tasks(data: CardData) -> set[str]:
    """The leaf tasks of the recipe's own evaluation (the held-out split applies to them)."""
    return set((data.after or data.before).get("results", {}))


def card_data(data: CardData, repo_id: str | None = None):
    """The card's YAML metadata as :class:`huggingface_hub.ModelCardData` (with ``model-index`` results)."""
    from huggingface_hub import ModelCardData

    recipe, org = data.recipe, settings.hub_org()
    task_type = "fill-mask" if recipe.model_kind == "mlm" else "text-generation"
    results = eval_results(data, task_type)
    return ModelCardData(
        base_model=data.base_model,
        library_name="peft" if data.adapter else "transformers",
        pipeline_tag=task_type,
        tags=["bias-harness", "bias-mitigation", recipe.name]
        + (["trl", recipe.trainer] if recipe.trainer != "refine_lm" else ["refine-lm"]),
        datasets=[f"{org}/{d}" for d in recipe.datasets],
        model_name=repo_id or f"{recipe.name}-{Path(data.base_model).name}",
        eval_results=results or None,
    )


def _significance_note(comparison: Any) -> str:
    from bias_harness.plugins.paired import ALPHA

    if comparison is None:
        return (
            "Paired significance tests need the per-document samples of both evaluations (not available for this card)."
        )
    tested = [m for m in comparison.metrics if not math.isnan(m.p)]
    sig = [m for m in tested if m.significant]

    def listed(ms: list[Any]) -> str:
        return ", ".join(f"`{m.task}` {m.metric} ({m.diff:+.3f}, p = {m.p:.2g})" for m in ms) or "none"

    from bias_harness.plugins.paired import CHANGE, FAILED

    reduced = [m for m in sig if m.reads_as.startswith("reduction of bias")]
    changed = [m for m in sig if m.reads_as.startswith(CHANGE)]
    failed = [m for m in sig if m.reads_as == FAILED]
    return (
        f"Δ paired 95% CI and p: `bias-harness compare` on the same documents ({comparison.iters} paired bootstrap "
        f"resamples of each task's resampling unit; exact McNemar where the per-document outcome is binary). "
        f"**Significant changes (p < {ALPHA}): {len(sig)} of {len(tested)} tested metrics**: {listed(sig)}. "
        f"Of these, reductions of bias to below detection (a bias before, no detectable bias after): "
        f"{listed(reduced)}; changes in bias (valid before and after): {listed(changed)}; not read as a change in "
        f"bias, as a verdict failed: {listed(failed)}. Outcomes and minimum detectable effects: docs/validity.md."
    )


def lm_eval_command(settings_: EvalSettings, args: dict[str, Any], model_dir: str | Path) -> str:
    """Plain ``lm_eval`` on the published folder (``DIR``) with the evaluation's settings: the after-numbers."""
    import shlex

    model_args = ",".join(f"{k}={'DIR' if str(v) == str(model_dir) else v}" for k, v in args.items())
    flags = lm_eval_flags(settings_, drop_metadata=("tokenizer", "data_dir"))
    return shlex.join(
        ["lm_eval", "--model", settings_.model_type, "--model_args", model_args]
        + ["--batch_size", str(settings_.batch_size), *flags]
    )


def _reproduce_after(data: CardData) -> str:
    if not data.lm_eval_command or not data.after:
        return ""
    return (
        "\nThe after-numbers with plain lm-eval on this folder (`DIR`: where it is downloaded; nothing beyond "
        "`pip install bias-harness`, which registers the tasks):\n\n```bash\n" + data.lm_eval_command + "\n```\n"
    )


def _results_file(run_dir: Path) -> Path | None:
    found = sorted(Path(run_dir).glob("results_*.json"))
    return found[-1] if found else None


def _headline_of(comparison: Any, run_dir: Path | None) -> list[Any]:
    """The comparison's headline metrics (each task's ``metric_list``), from the run's results file."""
    from bias_harness.report.mitigation import headline, headline_metrics

    results = _results_file(run_dir) if run_dir is not None else None
    return headline_metrics(comparison, headline(results)) if comparison is not None and results else []


def _heldout(data: CardData) -> str:
    """The split with its sizes and counted overlap, and the minimum detectable effect of each headline bias
    metric in this run's evaluation."""
    from bias_harness.report.mitigation import mde_table

    text = data.heldout.text() if data.heldout else "The recipe declares no held-out split."
    metrics = _headline_of(data.comparison, data.eval_dir / "after" if data.eval_dir else None)
    if not metrics:
        return text
    return (
        f"{text}\n\nMinimum detectable effect of this evaluation for each headline bias metric (the smallest "
        f"bias its size and spread could detect at alpha 0.05 and power 0.8; docs/validity.md):\n\n"
        f"{mde_table(metrics)}"
    )


def _side_effects(data: CardData) -> str:
    """Each side effect's headline numbers before and after, verdicts whose outcome changed flagged; those left out
    with the reason."""
    from bias_harness.report.mitigation import changes_table, outcome_changed

    parts = []
    for task, stages in data.side_effects.items():
        run_dir = data.eval_dir / "side_effects" / task / "after" if data.eval_dir else None
        metrics = _headline_of(data.side_comparisons.get(task), run_dir)
        n = (stages.get("after") or {}).get("n_samples", {})
        docs = ", ".join(f"{t} {v.get('effective')}" for t, v in n.items() if isinstance(v, dict)) or "–"
        changed = [f"{m.task} {m.metric}" for m in metrics if outcome_changed(m)]
        table = (
            changes_table(metrics, flag=True)
            if metrics
            else _table(metric_rows(stages.get("before") or {}, stages.get("after") or {}))
        )
        parts.append(
            f"### `{task}`\n\n{data.side_effects_why.get(task, '')} (documents: {docs}). **Verdicts whose outcome "
            f"changed: {', '.join(changed) or 'none'}.**\n\n{table}"
        )
    parts += [f"- `{task}` not evaluated: {why}" for task, why in data.side_effects_skipped.items()]
    if not parts:
        return "_No side effects were evaluated._"
    return (
        "The other works' headline numbers on small fixed subsets (`mitigation/side_effects.yaml`), before and after, "
        "each its own lm-eval run with the same settings:\n\n" + "\n\n".join(parts)
    )


def render(data: CardData, repo_id: str | None = None) -> str:
    from huggingface_hub import ModelCard

    recipe = data.recipe
    org = settings.hub_org()
    links = "\n".join(
        f"- [`{org}/{d}`](https://huggingface.co/datasets/{org}/{d}) (built by `bias-harness data build {d}`)"
        for d in recipe.datasets
    )
    splits = ", ".join(f"{s}: {n:,} rows" for s, n in data.data_splits.items())
    opts = ", ".join(f"{k}={v}" for k, v in data.data_options.items() if v is not None) or "defaults"
    eval_settings = data.after.get("settings") or data.before.get("settings") or {}
    train_metrics = "\n".join(f"- `{k}`: {v}" for k, v in data.train_metrics.items()) or "- (not recorded)"
    eval_yaml = yaml.safe_dump(eval_settings, sort_keys=True).strip()
    config_yaml = yaml.safe_dump(data.config, sort_keys=True, default_flow_style=False).strip()
    recipe_yaml = "\n".join(
        line for line in recipe.config_path.read_text(encoding="utf-8").splitlines() if not line.startswith("#")
    ).strip()
    rows = metric_rows(data.before, data.after)
    body = f"""
# {recipe.name}: {data.base_model} after bias mitigation

{recipe.summary}

- **Base model:** `{data.base_model}`
- **Recipe:** `{recipe.name}`{_preset(data)} (bias-harness {__version__}, trainer: `{recipe.trainer}`{_lora(data)})
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

{_table(rows, data.comparison, stage_verdicts(data, rows))}

Confidence intervals are bootstrap percentiles where the task reports them (`*_ci_lo`/`*_ci_hi`), else mean ± 1.96 × \
lm-eval's stderr; "–" means the metric was not available.
{_significance_note(data.comparison) if rows else ""}
{
        "**These numbers come from a subset run (`limit` above); they are not comparable to full-dataset results.**"
        if eval_settings.get("limit")
        else ""
    }
The same numbers are in this card's `model-index` metadata (one result per metric and model: `metric_args.stage` is \
`before` for the base model, `after` for this one; `metric_args.split` the held-out split below).
{_reproduce_after(data)}
## Held-out evaluation

{_heldout(data)}

## Side effects

{_side_effects(data)}

## Training

{train_metrics}

Recipe file `mitigation/{recipe.name}.yaml` (TRL config format; `--preset` / `--set` overrides of this run are in the
command below):

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
    card = ModelCard(f"---\n{card_data(data, repo_id).to_yaml()}\n---\n{body}")  # parsed back: validates the metadata
    return str(card)


def compare_before_after(eval_dir: Path, iters: int | None = None, seed: int | None = None) -> Any:
    """Paired comparison of ``eval_dir/before`` and ``eval_dir/after`` (``plugins/paired.py``), also written to
    ``eval_dir/compare/`` (README.md with plots, compare.json); None (logged) when the samples are missing or
    unpaired."""
    from bias_harness.plugins import stats
    from bias_harness.plugins.paired import RunMismatch

    from bias_harness.report.compare import compare_runs, render_markdown

    eval_dir = Path(eval_dir)
    try:
        cmp = compare_runs(
            eval_dir / "before",
            eval_dir / "after",
            iters=iters or stats.BOOTSTRAP_ITERS,
            seed=seed or stats.BOOTSTRAP_SEED,
        )
    except (RunMismatch, FileNotFoundError) as err:
        log.warning("no paired comparison in the model card: %s", err)
        return None
    out = eval_dir / "compare"
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "README.md", "# bias-harness compare: before vs after mitigation\n\n" + render_markdown(cmp, out))
    write_text(out / "compare.json", json.dumps(cmp.to_dict(), indent=2) + "\n")
    return cmp


def write(folder: Path, data: CardData, repo_id: str | None = None) -> Path:
    """Write README.md (the card) and a machine-readable summary next to the model."""
    folder = Path(folder)
    if data.comparison is None and data.eval_dir is not None and data.before and data.after:
        settings_ = data.after.get("settings", {})
        data.comparison = compare_before_after(data.eval_dir, settings_.get("bootstrap_iters"), settings_.get("seed"))
    for task, stages in data.side_effects.items():
        if task not in data.side_comparisons and data.eval_dir is not None and len(stages) == 2:
            settings_ = stages["after"].get("settings", {})
            data.side_comparisons[task] = compare_before_after(
                data.eval_dir / "side_effects" / task, settings_.get("bootstrap_iters"), settings_.get("seed")
            )
    write_text(folder / "README.md", redact(render(data, repo_id)))
    summary = {
        "recipe": data.recipe.name,
        "recipe_summary": data.recipe.summary,
        "train_metrics": data.train_metrics,
        "base_model": data.base_model,
        "adapter": data.adapter,
        "data_splits": data.data_splits,
        "data_options": data.data_options,
        "before": data.before,
        "after": data.after,
        "command": data.command,
    }
    if data.comparison is not None:
        summary["comparison"] = data.comparison.to_dict()
    if data.heldout is not None:
        summary["heldout"] = {**data.heldout.to_dict(), "text": data.heldout.text(), "summary": data.heldout.summary()}
    if data.side_effects or data.side_effects_skipped:
        summary["side_effects"] = {
            task: {
                **stages,
                "why": data.side_effects_why.get(task, ""),
                "comparison": c.to_dict() if (c := data.side_comparisons.get(task)) is not None else None,
            }
            for task, stages in data.side_effects.items()
        }
        summary["side_effects_skipped"] = data.side_effects_skipped
    if data.lm_eval_command:
        summary["lm_eval_command"] = data.lm_eval_command
    write_text(folder / SUMMARY_FILE, json.dumps(redact(summary), indent=2, sort_keys=True) + "\n")
    return folder / "README.md"
