"""Run manifests: what a results-page run was, enough to replay it from the response packs without the model.

One folder per run, ``docs/results/runs/<model key>/<group>/<tasks>-<model type>/``, holds ``manifest.json`` and,
where it survives, the run's own lm-eval ``results_<stamp>.json`` (secrets redacted). A manifest (JSON object):

``manifest_version``
    1.
``model_key``, ``group``
    The model (``smollm2``, ``gemma3-270m``) and the results group (``scripts/results.sh`` steps).
``lm_eval_args``
    The run's lm-eval flags other than model, device, batch size, output and cache (``--tasks``, ``--limit`` /
    ``--samples``, ``--seed``, ``--apply_chat_template``, ``--gen_kwargs``, ``--metadata``, ...): the replay passes
    them again, with ``--model replay``. An ``--include_path`` inside the installed bias-harness is written
    ``package:<package>/<path>`` (:func:`portable_includes`) and found again wherever the replay runs.
``pack``
    The response-pack folder under ``docs/results/responses/`` (lm-eval's cache name, e.g. ``smollm2-vllm_rank0``).
``run``
    What produced the numbers, shown on the page: ``model`` (lm-eval model type), ``model_args``, ``dtype``,
    ``batch_size``, ``device``, ``backend`` (the report's model-type-and-backend label), ``versions`` (lm-eval,
    bias-harness commit and version, transformers, torch, vLLM), ``date``.
``prompts``
    What the model contributed to the prompts (read by the ``replay`` model type, :mod:`bias_harness.plugins.replay`):
    ``chat_template`` (null without ``--apply_chat_template``), ``special_tokens``, ``template_kwargs`` (the
    backend's template arguments), ``tokenizer_name``.
``token_counts``
    Null, or the model's token-count table (:mod:`bias_harness.plugins.tokenizers`), relative to the manifest.
``results_file``
    The run's results file in this folder, or null where it is lost (runs made before manifests existed).
``results_header``
    Only without ``results_file``: the lm-eval header fields (``config``, ``model_name`` ...) the replayed results
    carry; ``note`` says how the manifest was made.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bias_harness.atomic import write_text
from bias_harness.errors import BadInput, MissingInput
from bias_harness.redact import redact

MANIFEST = "manifest.json"
VERSION = 1
REQUIRED = ("manifest_version", "model_key", "group", "lm_eval_args", "pack", "run", "prompts")
# lm-eval flags that describe the model run itself (the replay brings its own), and those without a value
MODEL_FLAGS = (
    "--model",
    "--model_args",
    "--device",
    "--batch_size",
    "--max_batch_size",
    "--output_path",
    "--use_cache",
    "--log_samples",
)
SWITCHES = (
    "--log_samples",
    "--apply_chat_template",
    "--fewshot_as_multiturn",
    "--predict_only",
    "--trust_remote_code",
    "--write_out",
    "--check_integrity",
    "--confirm_run_unsafe_code",
    "--cache_requests",
)
# lm-eval's short flags, written long in manifests
SHORT = {
    "-t": "--tasks",
    "-M": "--model",
    "-a": "--model_args",
    "-L": "--limit",
    "-c": "--use_cache",
    "-f": "--num_fewshot",
    "-b": "--batch_size",
    "-o": "--output_path",
    "-s": "--log_samples",
    "-E": "--samples",
    "-x": "--predict_only",
    "-w": "--write_out",
    "-C": "--config",
}
# the lm-eval results keys that describe the run (not the metrics): the replayed results take them from the run
HEADER_KEYS = (
    "config",
    "git_hash",
    "date",
    "pretty_env_info",
    "transformers_version",
    "lm_eval_version",
    "upper_git_hash",
    "tokenizer_pad_token",
    "tokenizer_eos_token",
    "tokenizer_bos_token",
    "eot_token_id",
    "max_length",
    "model_source",
    "model_name",
    "model_name_sanitized",
    "system_instruction",
    "system_instruction_sha",
    "fewshot_as_multiturn",
    "chat_template",
    "chat_template_sha",
    "start_time",
    "end_time",
    "total_evaluation_time_seconds",
)


# ---------------------------------------------------------------- reading


def read(path: str | Path) -> dict[str, Any]:
    """A manifest, checked: one error naming the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise MissingInput(f"no run manifest {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as e:
        raise BadInput(f"{path}: not JSON ({e})") from None
    if not isinstance(data, dict):
        raise BadInput(f"{path}: a manifest is a JSON object")
    for key in REQUIRED:
        if key not in data:
            raise BadInput(f"{path}: field {key!r} missing")
    if data["manifest_version"] != VERSION:
        raise BadInput(
            f"{path}: field 'manifest_version' is {data['manifest_version']!r}; this bias-harness reads {VERSION}"
        )
    args = data["lm_eval_args"]
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args) or "--tasks" not in args:
        raise BadInput(f"{path}: field 'lm_eval_args' must be a list of strings with --tasks")
    if bad := [a for a in args if a.split("=")[0] in MODEL_FLAGS]:
        raise BadInput(f"{path}: field 'lm_eval_args' holds model-run flags {bad} (the replay sets them)")
    if not data.get("results_file") and not isinstance(data.get("results_header"), dict):
        raise BadInput(f"{path}: field 'results_header' missing (needed where 'results_file' is null)")
    if data.get("results_file") and not (path.parent / data["results_file"]).is_file():
        raise MissingInput(f"{path}: field 'results_file': no {path.parent / data['results_file']}")
    return data


def find(runs_dir: str | Path) -> list[Path]:
    """Every manifest under ``runs_dir``, sorted by path."""
    return sorted(Path(runs_dir).rglob(MANIFEST))


def flag(args: list[str], name: str) -> str | None:
    """The value of ``--name VALUE`` / ``--name=VALUE`` in an argument list (None if absent)."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def long_flags(args: list[str]) -> list[str]:
    """lm-eval arguments with short flags (``-t``) written long (``--tasks``)."""
    return [SHORT.get(a, a) for a in args]


def without(args: list[str], *names: str) -> list[str]:
    """``args`` without the flags ``names`` and their values (switches such as ``--log_samples`` have none)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in names:
            skip = a not in SWITCHES
            continue
        if a.split("=", 1)[0] in names:
            continue
        out.append(a)
    return out


PACKAGE = "package:"
PACKAGES = ("bias_harness.mitigation", "bias_harness.tasks")  # where bias-harness keeps task folders


def _package_folders() -> dict[str, Path]:
    import importlib.util

    out = {}
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            out[name] = Path(next(iter(spec.submodule_search_locations))).resolve()
    return out


def portable(folder: str | Path) -> str | None:
    """``package:<package>/<path>`` for a folder inside the installed bias-harness; None for any other folder."""
    path = Path(folder).resolve()
    for name, root in _package_folders().items():
        if path.is_relative_to(root):
            return f"{PACKAGE}{name}/{path.relative_to(root).as_posix()}".rstrip("/")
    return None


def portable_includes(args: list[str]) -> list[str]:
    """``args`` with each ``--include_path`` inside the installed bias-harness written :func:`portable`."""
    out, prev = [], ""
    for a in args:
        out.append((portable(a) or a) if prev == "--include_path" else a)
        prev = a
    return out


def resolve_includes(args: list[str]) -> list[str]:
    """``args`` with each ``package:<package>/<path>`` include folder resolved in this installation."""
    folders = _package_folders()
    out, prev = [], ""
    for a in args:
        if prev == "--include_path" and a.startswith(PACKAGE):
            name, _, rest = a.removeprefix(PACKAGE).partition("/")
            if name not in folders:
                raise BadInput(f"--include_path {a}: no installed package {name}")
            a = str(folders[name] / rest)
        out.append(a)
        prev = a
    return out


def header(manifest: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The lm-eval header fields of the run (from its results file, else from ``results_header``)."""
    if manifest.get("results_file"):
        data = json.loads((folder / manifest["results_file"]).read_text(encoding="utf-8"))
        return {k: data[k] for k in HEADER_KEYS if k in data}
    return dict(manifest["results_header"])


def run_folder(runs_dir: str | Path, model_key: str, group: str, tasks: str, model_type: str) -> Path:
    """``<runs_dir>/<model key>/<group>/<tasks>-<model type>``: one folder per run; a re-run replaces it."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "+", tasks).strip("+")
    return Path(runs_dir) / model_key / group / f"{slug}-{model_type}"


# ---------------------------------------------------------------- writing (right after a real run)


def _versions(data: dict[str, Any]) -> dict[str, str | None]:
    from importlib import metadata

    def installed(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    torch = re.search(r"PyTorch version: (\S+)", data.get("pretty_env_info") or "")
    return {
        "lm_eval": data.get("lm_eval_version"),
        "bias_harness": installed("bias-harness"),
        "bias_harness_commit": data.get("git_hash"),
        "transformers": data.get("transformers_version"),
        "torch": torch.group(1) if torch else None,
        "vllm": installed("vllm") if data.get("config", {}).get("model") == "vllm" else None,
    }


def template_kwargs(model: str, model_args: dict[str, Any]) -> dict[str, Any]:
    """The extra arguments lm-eval's ``hf`` / ``vllm`` pass to ``apply_chat_template`` (lm-eval 0.4.13)."""
    kwargs = dict(model_args.get("chat_template_args") or {})
    thinking = kwargs.pop("enable_thinking", model_args.get("enable_thinking"))
    if model == "vllm":
        return {"enable_thinking": thinking, **kwargs}  # vLLM always passes it, None included
    return {**kwargs, **({"enable_thinking": thinking} if thinking is not None else {})}


def prompts_block(tokenizer_dir: str | Path | None, data: dict[str, Any]) -> dict[str, Any]:
    """The ``prompts`` block from the run's tokenizer (what lm-eval's ``hf`` / ``vllm`` render chat prompts with)."""
    cfg = data.get("config", {})
    args = cfg.get("model_args") or {}
    args = args if isinstance(args, dict) else dict(kv.split("=", 1) for kv in str(args).split(",") if "=" in kv)
    block: dict[str, Any] = {
        "chat_template": data.get("chat_template"),
        "special_tokens": {},
        "template_kwargs": template_kwargs(cfg.get("model", ""), args),
        "tokenizer_name": None,
    }
    if tokenizer_dir:
        from lm_eval.models.utils import configure_pad_token
        from transformers import AutoTokenizer

        tok = configure_pad_token(AutoTokenizer.from_pretrained(str(tokenizer_dir)))
        block["special_tokens"] = dict(tok.special_tokens_map)
        block["tokenizer_name"] = tok.name_or_path.replace("/", "__")
        if block["chat_template"] is not None and tok.chat_template != block["chat_template"]:
            raise BadInput(f"{tokenizer_dir}: its chat template is not the one the run recorded")
    return block


def backend_of(data: dict[str, Any]) -> str:
    from bias_harness.runs import backend_label

    return backend_label(data)


def write(
    results_file: str | Path,
    runs_dir: str | Path,
    model_key: str,
    group: str,
    pack: str,
    lm_eval_args: list[str],
    tokenizer_dir: str | Path | None = None,
    token_counts: str | Path | None = None,
) -> Path:
    """Write the manifest of a finished run (and a redacted copy of its results file); returns the manifest path.

    ``lm_eval_args``: the run's lm-eval flags (model-run flags are dropped); ``tokenizer_dir``: the model folder
    (chat template and special tokens); ``token_counts``: the model's token-count table, if its metrics need one.
    """
    results_file = Path(results_file)
    data = json.loads(results_file.read_text(encoding="utf-8"))
    cfg = data.get("config", {})
    if "--config" in (args := long_flags(list(lm_eval_args))):
        raise BadInput("a run made with lm-eval's --config file cannot be replayed: pass its flags instead")
    args = without(args, *MODEL_FLAGS)
    folder = run_folder(runs_dir, model_key, group, flag(args, "--tasks") or "tasks", cfg.get("model", "model"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("results_*.json"):  # a re-run replaces the run
        old.unlink()
    redacted = json.dumps(redact(data), indent=2, ensure_ascii=False) + "\n"
    write_text(folder / results_file.name, redacted)
    model_args = cfg.get("model_args") or {}
    dtype = cfg.get("model_dtype") or (model_args.get("dtype") if isinstance(model_args, dict) else None) or "auto"
    manifest = {
        "manifest_version": VERSION,
        "model_key": model_key,
        "group": group,
        "lm_eval_args": args,
        "pack": pack,
        "run": redact(
            {
                "model": cfg.get("model"),
                "model_args": model_args,
                "dtype": str(dtype),
                "batch_size": cfg.get("batch_size"),
                "device": _device(data),
                "backend": backend_of(data),
                "versions": _versions(data),
                "date": data.get("date"),
            }
        ),
        "prompts": prompts_block(tokenizer_dir, data),
        "token_counts": _relative(token_counts, folder) if token_counts else None,
        "results_file": results_file.name,
    }
    path = folder / MANIFEST
    write_text(path, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return path


def _device(data: dict[str, Any]) -> str | None:
    """The device the numbers were computed on: lm-eval's ``--device`` for ``hf`` models; other model types ignore it
    (lm-eval records its default, ``cuda:0``, for a vLLM run on a CPU), so the machine's CUDA availability instead."""
    cfg = data.get("config", {})
    if cfg.get("model") in ("hf", "hf-mlm"):
        return cfg.get("device")
    cuda = re.search(r"Is CUDA available: (\w+)", data.get("pretty_env_info") or "")
    return {"True": "cuda", "False": "cpu"}.get(cuda.group(1)) if cuda else None


def _relative(target: str | Path, folder: Path) -> str:
    import os

    return os.path.relpath(Path(target).resolve(), folder.resolve())


def tasks_on(runs_dir: str | Path) -> list[str]:
    """``<model key>/<group>/<task>`` for every task (as named in ``--tasks``) of every manifest under ``runs_dir``."""
    out = []
    for path in find(runs_dir):
        m = read(path)
        tasks = (flag(m["lm_eval_args"], "--tasks") or "").split(",")
        out += [f"{m['model_key']}/{m['group']}/{t}" for t in tasks if t]
    return sorted(set(out))


if __name__ == "__main__":  # `python -m bias_harness.report.manifest RUNS_DIR`: the tasks that have a manifest
    import sys

    print("\n".join(tasks_on(sys.argv[1] if len(sys.argv) > 1 else "docs/results/runs")))
