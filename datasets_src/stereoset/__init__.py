"""Dataset builder of the stereoset work: raw files -> jsonschema-validated records -> DatasetDict + card.

See ``plugins/stereoset/`` for its metrics and ``tasks/stereoset/`` for its lm-eval tasks.
"""
