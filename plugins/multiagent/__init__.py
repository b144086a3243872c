"""Multi-agent implicit bias (Borah & Mihalcea 2024): task assignment in multi-agent interactions.

The lm-eval side of the work: metrics and aggregations (``metrics``), answer parsing and prompts, the
multi-turn dialogue where it has one, the paired comparison adapter (``paired``) and the report section
(``report``). Its task YAMLs are in ``tasks/multiagent/``, its dataset builder in ``datasets_src/multiagent/``.
"""
