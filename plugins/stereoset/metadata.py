"""The ``--metadata`` keys of the StereoSet tasks (checked before the model is loaded:
:mod:`bias_harness.plugins.metadata`): what :class:`~bias_harness.plugins.stereoset.task.StereoSetTask` reads."""

from __future__ import annotations

from bias_harness.plugins.stereoset.metrics import AVERAGING, TIES
from bias_harness.plugins.stereoset.task import HEADLINES, NORMALIZATIONS

from bias_harness.options import Opt

KEYS: dict[str, Opt] = {
    "normalization": Opt("choice", "log-likelihood normalisation of both parts", choices=NORMALIZATIONS),
    "normalization_intra": Opt("choice", "log-likelihood normalisation, intrasentence", choices=NORMALIZATIONS),
    "normalization_inter": Opt("choice", "log-likelihood normalisation, intersentence", choices=NORMALIZATIONS),
    "ties": Opt("choice", "how a tie between two candidates counts", choices=TIES),
    "averaging": Opt("choice", "scores per target term, then averaged, or over all examples", choices=AVERAGING),
    "headline": Opt("choice", "which scores lm-eval's table shows first", choices=HEADLINES),
    "target_field": Opt("choice", "German tasks: the target term field", choices=("target_en", "target")),
}
