"""The ``--metadata`` keys of the DeMET tasks (checked before the model is loaded:
:mod:`bias_harness.plugins.metadata`): the metric settings :func:`~bias_harness.plugins.demet.metrics.settings_of`
reads, and the re-ask dialogue's."""

from __future__ import annotations

from bias_harness.plugins.demet.dialogue import MODES, WORDINGS

from bias_harness.options import Opt

KEYS: dict[str, Opt] = {
    "mcnemar": Opt(
        "choice", "McNemar test: exact binomial or chi-square with continuity correction", choices=("exact", "chi2")
    ),
    "bootstrap_iters": Opt("int", "bootstrap resamples of the matched pairs (the *_ci_lo / *_ci_hi metrics)", min=1),
    "bootstrap_seed": Opt("int", "seed of the bootstrap", min=0),
    "permutation_iters": Opt("int", "sign-flip draws of Eq. 2's null (*_floor, *_perm_p, *_excess)", min=1),
    "permutation_seed": Opt("int", "seed of the sign-flip draws", min=0),
    "wordings": Opt("list", f"demet_reask: the wordings asked in turn, of {', '.join(WORDINGS)}"),
    "mode": Opt("choice", "demet_reask: ask each wording afresh or in the same dialogue", choices=MODES),
}
