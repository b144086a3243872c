"""Contact hypothesis (Raj et al. 2024, Breaking Bias, Building Bridges): HolisticBias prompts with and without contact.

The lm-eval side of the work: metrics and aggregations (``metrics``), answer parsing and prompts, the
multi-turn dialogue where it has one, the paired comparison adapter (``paired``) and the report section
(``report``). Its task YAMLs are in ``tasks/contact/``, its dataset builder in ``datasets_src/contact/``.
"""
