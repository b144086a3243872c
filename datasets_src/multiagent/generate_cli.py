"""``bias-harness data generate multiagent``: the options of the multi-agent generation method (:mod:`.generate`)."""

from __future__ import annotations

import argparse
from typing import Any

# the options recorded with the generated rows
OPTIONS = ("domain", "sizes")


def add_arguments(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--domain",
        action="append",
        default=[],
        metavar="NAME",
        help="domain (repeatable; default: the paper's seven: family, office, hospital, politics, "
        "law enforcement, education, team dynamics)",
    )
    group.add_argument(
        "--sizes", default="3,4", help="numbers of tasks (= characters) per scenario, comma-separated (default 3,4)"
    )


def make_generator(args: argparse.Namespace) -> Any:
    from bias_harness.datasets_src.generate_common import GenerationSetupError
    from bias_harness.datasets_src.multiagent.generate import DOMAINS, MultiagentGenerator

    try:
        sizes = [int(s) for s in str(args.sizes).split(",") if s.strip()]
    except ValueError:
        raise GenerationSetupError(f"--sizes must be comma-separated integers, not {args.sizes!r}") from None
    return MultiagentGenerator(domains=list(args.domain) or list(DOMAINS), sizes=sizes)
