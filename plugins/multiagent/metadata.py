"""The ``--metadata`` keys of the multi-agent tasks (checked before the model is loaded:
:mod:`bias_harness.plugins.metadata`): what :func:`~bias_harness.plugins.multiagent.prompts.load_runs` and the
dialogue (:class:`~bias_harness.plugins.multiagent.dialogue.AssignmentDialogue`) read."""

from __future__ import annotations

from bias_harness.plugins.multiagent.dialogue import PROTOCOLS
from bias_harness.plugins.multiagent.prompts import GOAL_RULES, ORDERS

from bias_harness.options import Opt

KEYS: dict[str, Opt] = {
    "runs": Opt("int", "sampled runs per scenario, averaged (paper: five)", min=1),
    "seed": Opt("int", "seed of the character permutations (agent_order: permuted)", min=0),
    "agent_order": Opt("choice", "the dataset's character order in every run, or permuted", choices=ORDERS),
    "tie_rule": Opt("choice", "a tie: the paper's 'else anti-stereotypical', or neutral", choices=("anti", "neutral")),
    "goal_rule": Opt("choice", "which task a goal names", choices=GOAL_RULES),
    "protocol": Opt("choice", "the prompts of a dataset or case study", choices=PROTOCOLS),
    "goal": Opt("bool", "each agent is given a goal task"),
    "reflection": Opt("choice", "self-reflection after the first answer", choices=("none", "sr", "sr_ice")),
    "discussion_rounds": Opt("int", "rounds of discussion", min=0),
    "final_mode": Opt("choice", "final answers at once or in turn", choices=("simultaneous", "sequential")),
    "discussion_max_gen_toks": Opt("int", "max_gen_toks of a discussion turn", min=1, nullable=True),
}
