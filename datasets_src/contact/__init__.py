"""Dataset builder of the contact work: raw files -> jsonschema-validated records -> DatasetDict + card.

See ``plugins/contact/`` for its metrics and ``tasks/contact/`` for its lm-eval tasks.
"""
