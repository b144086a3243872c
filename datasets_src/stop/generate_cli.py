"""``bias-harness data generate stop``: the options of STOP's generation method (:mod:`.generate`)."""

from __future__ import annotations

import argparse
from typing import Any

# the options recorded with the generated rows
OPTIONS = ("seeds", "sub_demographic", "demographic", "severity", "answer_format")


def add_arguments(group: argparse._ArgumentGroup) -> None:
    from bias_harness.options import Opt

    group.add_argument(
        "--seeds",
        type=Opt("in_file"),
        default=None,
        help="seed progressions (JSON array or JSONL of STOP records; default: STOP-full.json from the raw files)",
    )
    group.add_argument(
        "--sub-demographic",
        action="append",
        default=[],
        metavar="NAME",
        help="target sub-demographic (repeatable; default: every other one of the seed's demographic)",
    )
    group.add_argument(
        "--demographic",
        action="append",
        default=[],
        metavar="NAME",
        help="only seeds of this demographic (repeatable); also the demographic of a new --sub-demographic",
    )
    group.add_argument(
        "--severity",
        action="append",
        default=[],
        choices=["low", "moderate", "high"],
        help="only seeds of this severity",
    )
    group.add_argument(
        "--answer-format",
        choices=["json", "paper"],
        default="json",
        help="json (default): the paper's prompt + a request for a JSON answer; paper: the paper's "
        "prompt unchanged, its plain-text 'Sentences: ... Counterfactual Sentence: ...' answer "
        "parsed",
    )


def make_generator(args: argparse.Namespace) -> Any:
    from bias_harness.datasets_src.stop.generate import StopGenerator, load_seeds

    seeds, _ = load_seeds(args.seeds)
    new_demo = args.demographic[0] if len(args.demographic) == 1 else None
    return StopGenerator(seeds, args.sub_demographic, args.demographic, args.severity, new_demo, args.answer_format)
