"""The lockstep multi-turn engine (shared by every multi-turn or multi-agent task).

``engine``: the ``MultiTurnTask`` class and ``LM.multiturn_generate`` (every dialogue of a run advances one step at
a time, one batched generate call per step); ``dialogues``: the dialogue classes and their registry;
``vllm_steps``: the vLLM step backend (one ``generate`` per step, prefix-cache statistics). Importing the package
installs the engine into lm-eval (see ``plugins/__init__._REGISTERING``).
"""

from bias_harness.plugins.multiturn import engine  # noqa: F401  (installs LM.multiturn_generate)
from bias_harness.plugins.multiturn.engine import MultiTurnTask  # noqa: F401  (YAML: class: !function ...MultiTurnTask)
