"""Shared test helpers: a tiny random causal LM and scripted fake lm-eval models."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

WORDS = (
    "1 2 yes no Yes No A B the a is who right you must select or answer and of to in that it for on with as "
    "male female man woman married wants thinks says name stereotype unrelated . , ? ! : ) ( \n"
).split(" ")


def vllm_env(serve: bool = False) -> dict[str, str]:
    """Environment for a subprocess that starts vLLM: INFO logs (the tests read the engine's log; importing TRL, as
    the mitigation tests do, sets ``VLLM_LOGGING_LEVEL=ERROR`` in this process's environment), no tokenizer threads.
    ``VLLM_CPU_NUM_OF_RESERVED_CPU`` and ``VLLM_ENABLE_V1_MULTIPROCESSING`` are left out, so that ``lm_eval`` gets
    them from our start-up hook as a user's would; ``serve=True`` (``vllm serve``, which loads no hook) sets them the
    documented way, with ``cpu_env``."""
    import os

    from bias_harness.plugins.vllm_cpu import IN_PROCESS, RESERVED, cpu_env

    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", VLLM_LOGGING_LEVEL="INFO")
    env.pop(RESERVED, None)
    env.pop(IN_PROCESS, None)
    return dict(cpu_env(env)) if serve else env


def build_tiny_causal_lm(folder: Path, seed: int = 0, arch: str = "gpt2") -> Path:
    """Random 2-layer causal LM (~100k params) with a WordLevel tokenizer (whitespace + punctuation split).
    ``arch``: ``gpt2`` (default), or ``llama`` with 2 attention and 2 KV heads of vLLM's usual head size 64 (so that
    vLLM can split it over two tensor-parallel ranks)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(seed)
    specials = ["<unk>", "<pad>", "<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    vocab = {tok: i for i, tok in enumerate(specials + sorted({w for w in WORDS if w}))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>", eos_token="<|im_end|>", bos_token="<|endoftext|>"
    )
    fast.chat_template = CHATML
    ids = {"bos_token_id": vocab["<|endoftext|>"], "eos_token_id": vocab["<|im_end|>"], "pad_token_id": vocab["<pad>"]}
    if arch == "llama":
        model = LlamaForCausalLM(
            LlamaConfig(
                vocab_size=len(vocab),
                hidden_size=128,
                intermediate_size=256,
                num_hidden_layers=2,
                num_attention_heads=2,
                num_key_value_heads=2,
                max_position_embeddings=2048,
                **ids,
            )
        )
    else:
        model = GPT2LMHeadModel(
            GPT2Config(vocab_size=len(vocab), n_positions=1024, n_embd=32, n_layer=2, n_head=2, **ids)
        )
    model.generation_config.pad_token_id = vocab["<pad>"]
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def scripted_lm(answer: Callable[[str], str] | None = None, loglik: Callable[[str, str], float] | None = None):
    """An lm-eval ``LM`` whose outputs come from Python functions of the prompt (context, continuation).

    ``calls`` records (request type, number of requests) per call, to check batching.
    """
    from lm_eval.api.model import LM

    class ScriptedLM(LM):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple[str, int]] = []
            self.prompts: list[str] = []

        def generate_until(self, requests, disable_tqdm: bool = False):
            self.calls.append(("generate_until", len(requests)))
            out = []
            for r in requests:
                ctx = r.args[0]
                self.prompts.append(ctx)
                out.append(answer(ctx) if answer else "")
            return out

        def loglikelihood(self, requests, disable_tqdm: bool = False):
            self.calls.append(("loglikelihood", len(requests)))
            return [(loglik(*r.args) if loglik else 0.0, False) for r in requests]

        def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
            self.calls.append(("loglikelihood_rolling", len(requests)))
            return [loglik(r.args[0], "") if loglik else 0.0 for r in requests]

    return ScriptedLM()


# ---------------------------------------------------------------- running the CLI as a user would

CLI = Path(sys.executable).parent / "bias-harness"
# sentinel secrets: on the command line (--model_args, --metadata, --set) and in the environment
SECRETS_ARGV = {
    "model_args": "hf_ARGVsentinelModelArgs0001",
    "metadata": "META-sentinel-api-key-0002",
    "set": "hf_ARGVsentinelHubToken0003",
}
SECRETS_ENV = {"HF_TOKEN": "hf_ENVsentinelHfToken0004", "OPENAI_API_KEY": "sk-ENVsentinelOpenAiKey0005"}


def drop_root_override() -> None:
    """``preexec_fn`` for a child run as root: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the capability
    bounding set, so that after ``exec`` file permission bits bind the child as they bind a user (a 0555 folder is
    read-only). Not needed (and not called) for other users."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def run_cli(args: list, cwd: Path, *, unprivileged: bool = False, timeout: int = 900, **env: str):
    """The installed ``bias-harness`` in a subprocess from ``cwd`` (``BIAS_HARNESS_DEBUG`` unset); ``unprivileged``:
    file permissions bind it even when the tests run as root (:func:`drop_root_override`)."""
    import os
    import subprocess

    full = {k: v for k, v in os.environ.items() if k != "BIAS_HARNESS_DEBUG"}
    full.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", **env)
    preexec = drop_root_override if unprivileged and os.geteuid() == 0 else None
    return subprocess.run(
        [str(CLI), *map(str, args)],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=preexec,
    )


def save_scripted_run(folder: Path, answer: Callable[[str], str], tasks: list[str], limit: int) -> Path:
    """An lm-eval output folder (results and logged samples) of :func:`scripted_lm` with ``answer`` on ``tasks``."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker

    import bias_harness

    tracker = EvaluationTracker(output_path=str(folder))
    res = lm_eval.simple_evaluate(
        model=scripted_lm(answer),
        tasks=tasks,
        limit=limit,
        log_samples=True,
        bootstrap_iters=0,
        task_manager=bias_harness.task_manager(include_defaults=False),
        evaluation_tracker=tracker,
    )
    tracker.save_results_aggregated(results=res, samples=res["samples"])
    for task in tasks:
        tracker.save_results_samples(task_name=task, samples=res["samples"][task])
    return folder
