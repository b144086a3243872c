"""Dataset builder of the demet work: raw files -> jsonschema-validated records -> DatasetDict + card.

See ``plugins/demet/`` for its metrics and ``tasks/demet/`` for its lm-eval tasks.
"""
