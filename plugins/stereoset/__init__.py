"""StereoSet DE/EN (UZH course project on SwissBERT; Nadeem et al. 2021) and Refine-LM's UnQover questions.

The lm-eval side of the work: metrics and aggregations (``metrics``), answer parsing and prompts, the
multi-turn dialogue where it has one, the paired comparison adapter (``paired``) and the report section
(``report``). Its task YAMLs are in ``tasks/stereoset/``, its dataset builder in ``datasets_src/stereoset/``.
"""
