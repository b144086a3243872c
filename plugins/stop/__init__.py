"""STOP (Morabito et al., EMNLP 2024): sensitivity testing on offensive progressions.

The lm-eval side of the work: metrics and aggregations (``metrics``), answer parsing and prompts, the
multi-turn dialogue where it has one, the paired comparison adapter (``paired``) and the report section
(``report``). Its task YAMLs are in ``tasks/stop/``, its dataset builder in ``datasets_src/stop/``.
"""
