"""Dataset builder of the multiagent work: raw files -> jsonschema-validated records -> DatasetDict + card.

See ``plugins/multiagent/`` for its metrics and ``tasks/multiagent/`` for its lm-eval tasks.
"""
