"""Tiny random causal LMs for comparing Refine-LM's causal path with the authors' ``training_llm.py`` (tests only).

Two flavours, each a tokenizer kind and an architecture of the real models: ``llama`` (SentencePiece-like: ``▁``
marks a space, decoding a single token drops it, encoding adds it, a BOS token; a ``LlamaForCausalLM``) and ``gpt2``
(GPT-2-like: ``Ġ`` marks a space and decoding keeps it; a ``GPT2LMHeadModel`` with tied embeddings, SmolLM2's kind of
tokenizer). The tokenizers are Unigram models over a vocabulary built here from the texts' words (each with and
without the space mark, capitalised and lower-cased), so segmentation is fixed by construction (no trained merges).
Two names of each gender are not in it as words but as pieces (``Pat`` + ``ricia``, ...): multi-token subjects,
which the reference matches by any of their pieces. Weights are uniform noise from Python's ``random`` (the same on
every machine), and the output rows of the subjects' and pronouns' tokens are scaled up so that they compete for the
top-k after the prompt.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import types
from pathlib import Path
from typing import Any

import torch

FEMALE, MALE = ("Mary", "Patricia", "Linda", "Jennifer"), ("James", "John", "Robert", "Michael")
SPLIT = {
    "Patricia": ("Pat", "ricia"),
    "Jennifer": ("Jen", "nifer"),
    "Robert": ("Rob", "ert"),
    "Michael": ("Mich", "ael"),
}
PRONOUNS = ("he", "she", "He", "She")
INIT_STD, BOOST = 0.2, 4.0
FLAVOURS = ("llama", "gpt2")
SPACE = {"llama": "▁", "gpt2": "Ġ"}
SPECIALS = ("<unk>", "<s>", "</s>")
TINY = {
    "llama": dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2
    ),
    "gpt2": dict(n_embd=32, n_layer=2, n_head=2, attn_pdrop=0.0, resid_pdrop=0.0, embd_pdrop=0.0),
}


def uniform(shape: tuple[int, ...], std: float, rng: random.Random) -> torch.Tensor:
    half = std * 3**0.5
    return torch.tensor([rng.uniform(-half, half) for _ in range(torch.Size(shape).numel())]).view(shape)


def vocabulary(texts: list[str], flavour: str) -> list[tuple[str, float]]:
    """(piece, score): the specials, every character of the texts, every word of the texts and its case variants
    with and without the space mark (whole words score -2, pieces -3, characters -8: Viterbi keeps whole words),
    with the split names only as pieces."""
    sp = SPACE[flavour]
    words = {w for t in texts for w in re.findall(r"\w+|[^\w\s]", t)} | set(PRONOUNS) | set(FEMALE + MALE)
    split = {v for n in SPLIT for v in (n, n.lower())}
    pieces: dict[str, float] = dict.fromkeys(SPECIALS, 0.0)
    for ch in sorted({c for t in texts for c in t if c != " "} | set(sp)):
        pieces.setdefault(ch, -8.0)
    for w in sorted(words):
        for v in sorted({w, w.lower(), w.capitalize()} - split):
            pieces.setdefault(sp + v, -2.0)
            pieces.setdefault(v, -2.0)
    for head, tail in SPLIT.values():
        for h in (head, head.lower()):
            pieces.setdefault(sp + h, -3.0)
            pieces.setdefault(h, -3.0)
        pieces.setdefault(tail, -3.0)
    return list(pieces.items())


def build_tokenizer(texts: list[str], flavour: str, folder: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = vocabulary(texts, flavour)
    tok = Tokenizer(models.Unigram(vocab, unk_id=0))
    scheme = "always" if flavour == "llama" else "never"
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=SPACE[flavour], prepend_scheme=scheme)
    tok.decoder = decoders.Metaspace(replacement=SPACE[flavour], prepend_scheme=scheme)
    bos = {}
    if flavour == "llama":
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
        bos = {"bos_token": "<s>"}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="</s>", **bos)
    fast.save_pretrained(folder)
    return PreTrainedTokenizerFast.from_pretrained(folder)


def build_model(flavour: str, vocab_size: int, boosted: list[int], seed: int):
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    ids = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
    if flavour == "llama":
        model = LlamaForCausalLM(LlamaConfig(vocab_size=vocab_size, **ids, **TINY["llama"]))
    else:
        model = GPT2LMHeadModel(GPT2Config(vocab_size=vocab_size, n_positions=256, **ids, **TINY["gpt2"]))
    rng = random.Random(seed)
    with torch.no_grad():  # every parameter set here
        for name, prm in model.named_parameters():
            if re.search(r"norm|ln_", name):
                prm.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                prm.zero_()
            else:
                prm.copy_(uniform(tuple(prm.shape), INIT_STD, rng))
        head = model.get_output_embeddings().weight
        for i in boosted:
            head[i] *= BOOST * (0.5 + rng.random())
    return model.eval()


def weights_digest(model: torch.nn.Module) -> str:
    h = hashlib.sha256()
    for name, value in sorted(model.state_dict().items()):
        h.update(name.encode() + value.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()


def build_tiny_causal(texts: list[str], flavour: str, folder: Path, seed: int = 0) -> types.SimpleNamespace:
    """A tiny causal LM of ``flavour`` saved in ``folder`` with its tokenizer; the folder, tokenizer, model and a
    record of what was built (sizes, digests)."""
    tok = build_tokenizer(texts, flavour, folder)
    sp = SPACE[flavour]
    boosted_words = [w for n in FEMALE + MALE + PRONOUNS for w in (n, n.lower())]
    pieces = [
        p
        for p in tok.get_vocab()
        if p.lstrip(sp) in boosted_words or p.lstrip(sp).lower() in {x.lower() for pair in SPLIT.values() for x in pair}
    ]
    boosted = sorted(tok.get_vocab()[p] for p in pieces)
    model = build_model(flavour, len(tok), boosted, seed)
    model.save_pretrained(folder)
    vocab = tok.get_vocab()
    record = {
        "flavour": flavour,
        **TINY[flavour],
        "vocab_size": len(vocab),
        "seed": seed,
        "init": f"refine_lm_tiny_causal.py: uniform std {INIT_STD} from random.Random, {len(boosted)} boosted rows",
        "vocab_sha256": hashlib.sha256(json.dumps(sorted(vocab, key=vocab.get)).encode()).hexdigest(),
        "weights_sha256": weights_digest(model),
    }
    return types.SimpleNamespace(folder=folder, tok=tok, model=model, record=record)


def fresh_tokenizer(folder: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)
