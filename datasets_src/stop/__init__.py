"""Dataset builder of the stop work: raw files -> jsonschema-validated records -> DatasetDict + card.

See ``plugins/stop/`` for its metrics and ``tasks/stop/`` for its lm-eval tasks.
"""
