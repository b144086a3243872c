"""``bias-harness compare RUN_A RUN_B [RUN_C ...]``: paired comparison of lm-eval runs on the same documents.

Each later run is compared with RUN_A, task by task (``plugins/paired.py``): the difference of every headline
metric, a 95% paired-bootstrap CI over the task's resampling unit, and a p-value (McNemar where the per-document
outcome is binary). Runs on different documents are refused.
"""

from __future__ import annotations

import argparse
import json

from bias_harness.errors import check_writable
from bias_harness.options import Opt


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare", help="paired comparison (difference, paired-bootstrap CI, p-value) of runs on the same documents"
    )
    p.add_argument(
        "runs",
        nargs="+",
        type=Opt("in_dir"),
        help="lm-eval --output_path folders run with --log_samples; the first is A, each other is compared with it",
    )
    p.add_argument(
        "--out", type=Opt("out_dir"), default=None, help="folder for README.md and plots (default: <RUN_B>/compare)"
    )
    p.add_argument("--json", action="store_true", help="print the comparison as JSON instead of writing Markdown")
    p.add_argument(
        "--tasks", default=None, help="comma-separated tasks to compare (default: all; the runs must share them)"
    )
    p.add_argument(
        "--unit",
        default=None,
        help=(
            "resampling unit for the works that offer it (StereoSet: target_term (default) or context); others keep "
            "theirs"
        ),
    )
    p.add_argument("--iters", type=Opt("int", min=1), default=1000, help="bootstrap resamples (default 1000)")
    p.add_argument("--seed", type=Opt("int", min=0), default=1234, help="bootstrap seed (default 1234)")
    p.add_argument(
        "--threshold",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="override an interpretability threshold (repeatable; docs/validity.md), as in bias-harness report",
    )
    p.add_argument(
        "--html",
        action="store_true",
        help="also write compare.html: a self-contained explorer with both runs' documents side by side "
        "(docs/explorer.md)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from bias_harness.atomic import relocate, staged_folder
    from bias_harness.errors import BadInput
    from bias_harness.report.compare import compare_runs, render_markdown
    from bias_harness.report.verdicts import parse_thresholds

    if len(args.runs) < 2:
        raise BadInput("compare: give at least two runs (RUN_A RUN_B)")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    base, others = args.runs[0], args.runs[1:]
    thresholds = parse_thresholds(args.threshold)
    out = args.out or others[0] / "compare"
    if not args.json:
        check_writable(out, "--out")
    results = [
        compare_runs(base, other, tasks=tasks, unit=args.unit, iters=args.iters, seed=args.seed, thresholds=thresholds)
        for other in others
    ]
    if args.json:
        payload = [c.to_dict() for c in results]
        print(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
        return 0
    printed = []
    with staged_folder(out) as stage:  # README, plots, compare.html: all written and checked, or none
        parts = ["# bias-harness compare", ""]
        for i, cmp in enumerate(results):
            sub = stage if len(results) == 1 else stage / f"b{i + 1}"
            sub.mkdir(parents=True, exist_ok=True)
            text = render_markdown(cmp, sub)
            if sub != stage:  # plots live in a sub-folder per compared run
                text = text.replace("](compare_", f"]({sub.name}/compare_")
            parts.append(relocate(text, stage, out))
        (stage / "README.md").write_text("\n".join(parts) + "\n", encoding="utf-8")
        printed.append(out / "README.md")
        if args.html:
            from bias_harness.report.explorer.compare import write_compare_explorer

            write_compare_explorer(results, base, others, stage / "compare.html")
            printed.append(out / "compare.html")
    for path in printed:
        print(path)
    return 0
