"""Dataset builders: the authors' raw files -> JSON-Schema-validated records -> ``DatasetDict`` + card.

Each module here defines one or more :class:`~bias_harness.datasets_src.base.DatasetBuilder`
subclasses; :mod:`bias_harness.datasets_src.registry` finds them by scanning this package.
"""
