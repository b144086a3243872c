"""``bias-harness report RUN_DIR [RUN_DIR ...] [--out DIR]``: Markdown + PNG report from lm-eval outputs."""

from __future__ import annotations

import argparse

from bias_harness.options import Opt


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a Markdown report with plots from lm-eval results/samples")
    p.add_argument("run_dirs", nargs="+", type=Opt("in_dir"), help="folders given to lm-eval's --output_path")
    p.add_argument("--out", type=Opt("out_dir"), default=None, help="output folder (default: <first RUN_DIR>/report)")
    p.add_argument(
        "--summary",
        type=Opt("in_file"),
        default=None,
        help="Markdown file with a hand-written summary: text before the first '## ' heading goes at the top, "
        "text under '## <work>' (section module name, e.g. demet, or its title) at the top of that section",
    )
    p.add_argument(
        "--threshold",
        action="append",
        default=None,
        metavar="NAME=VALUE",
        help="override an interpretability threshold for every task (repeatable; names and defaults: "
        "docs/validity.md), e.g. --threshold min_valid=50",
    )
    p.add_argument(
        "--multiplicity",
        choices=("holm", "bh", "none"),
        default="holm",
        help="how breakdown tables adjust their p-values for the number of tests they make: Holm (family-wise "
        "error, default), Benjamini-Hochberg (false discovery rate) or none (docs/validity.md)",
    )
    p.add_argument(
        "--html",
        action="store_true",
        help="also write report.html: a self-contained explorer with the documents behind every number "
        "(docs/explorer.md)",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from bias_harness.atomic import relocate, staged_folder
    from bias_harness.errors import check_writable
    from bias_harness.report.page import write_report
    from bias_harness.report.verdicts import parse_thresholds

    out = args.out or args.run_dirs[0] / "report"
    thresholds = parse_thresholds(args.threshold)
    check_writable(out, "--out")
    printed = [out / "README.md"]
    with staged_folder(out) as stage:  # README, plots, report.html: all written and checked, or none
        readme = write_report(
            args.run_dirs, stage, summary=args.summary, thresholds=thresholds, multiplicity=args.multiplicity
        )
        readme.write_text(relocate(readme.read_text(encoding="utf-8"), stage, out), encoding="utf-8")
        if args.html:
            from bias_harness.report.explorer.page import write_explorer

            write_explorer(args.run_dirs, stage / "report.html", thresholds)
            printed.append(out / "report.html")
    for path in printed:
        print(path)
    return 0
