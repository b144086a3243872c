"""DeMET (Levy et al. 2024): gender bias in decision-making in relationship conflicts.

The lm-eval side of the work: metrics and aggregations (``metrics``), answer parsing (``parse``) and prompts, the
multi-turn dialogue where it has one, the interpretability verdicts (``validity``), the paired comparison adapter
(``paired``) and the report section (``report``). Its task YAMLs are in ``tasks/demet/``, its dataset builder in
``datasets_src/demet/``.
"""
