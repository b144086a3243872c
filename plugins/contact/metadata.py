"""The ``--metadata`` keys of the Contact tasks (checked before the model is loaded:
:mod:`bias_harness.plugins.metadata`): what :func:`~bias_harness.plugins.contact.metrics.load_docs` reads."""

from __future__ import annotations

from bias_harness.plugins.contact.metrics import NORMALIZE

from bias_harness.options import Opt

KEYS: dict[str, Opt] = {
    "instruction_suffix": Opt("bool", 'append the answer instruction ("Answer with Yes or No.") to the prompt'),
    "normalize": Opt("choice", "option length: summed log-likelihood, per token or per character", choices=NORMALIZE),
}
