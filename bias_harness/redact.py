"""Secrets out of everything bias-harness writes: results, samples, reports, cards, upload folders, run configs, logs.

A secret is masked by its shape, wherever it is (a whole value, inside a longer string, in any argument):

* the value of a field or argument whose name ends in a word that says it holds a secret: token, key (after
  another word: ``api_key``, not a bare ``key``, which names a dictionary key, a raw file or ``--set KEY=VALUE``,
  nor ``model_key`` / ``pair_key`` / ... after a word that names data: :data:`DATA_KEY_WORDS`),
  secret, password, signature, auth (``token``, ``hub_token``, ``api_key``, ``OPENAI_API_KEY``,
  ``client_secret``, ``db_password``, ``sig`` in a query string; not a tokenizer's ``pad_token`` / ``eos_token``,
  nor ``max_new_tokens`` or ``api_key_env``): :func:`is_secret_name`, in ``name=value``, ``"name": "value"``,
  ``--name value`` and in the query string of a URL;
* the userinfo of a URL, ``scheme://user:password@host`` -> ``scheme://***@host``;
* a key-shaped value (:data:`TOKEN_PATTERNS`): ``hf_`` + 16 or more letters and digits (Hugging Face), ``sk-`` +
  a body with a run of 16 or more letters and digits (OpenAI, Anthropic), ``ghp_`` & co. (GitHub), ``AKIA...``
  (AWS), ``xox?-`` (Slack). The whole value must have the shape: it starts and ends at a boundary (not inside a
  longer word, a path component or a ``-``/``_`` compound), so a model folder ``sk-slovak-gpt2-base-cased-v2`` or
  ``hf_cache_for_models`` is not masked;
* the exact value of such an argument on the command line (:func:`remember`, done by the CLI at start-up) or of
  such an environment variable (``HF_TOKEN``, ``OPENAI_API_KEY``, ...), wherever it shows up.

:func:`redact` returns a copy of a string or a JSON-like structure (dicts, lists, tuples) with every secret
replaced by ``***``; :func:`redact_argv` does the same for a command line given as a list. Every writer of
shareable files calls one of them (lm-eval's results and samples under ``bias-harness eval``, the report, the
dataset and model cards, the mitigation summary and ``training_args.bin``, generation summaries); the CLI passes
its stdout and stderr through :class:`RedactingStream`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

MASK = "***"
SECRET_WORDS = frozenset(
    {
        "token",
        "key",
        "apikey",
        "secret",
        "password",
        "passwd",
        "passphrase",
        "credential",
        "credentials",
        "signature",
        "sig",
        "auth",
        "authorization",
    }
)
# a bare "key" names a dictionary key, a raw file (RawFile.key) or a metavar (--set KEY=VALUE): secret only after
# another word (api_key, hub_key, access_key)
NEEDS_QUALIFIER = frozenset({"key"})
# "<word>_key" where the word names data, not a credential: a model's key on the results page (model_key), a matched
# pair's (pair_key), a sort, cache or group key
DATA_KEY_WORDS = frozenset(
    {"model", "pair", "sort", "cache", "group", "task", "doc", "unit", "row", "column", "index", "lookup", "hash"}
)
# "<word>_token" names a tokenizer's special token, not a credential
SPECIAL_TOKEN_WORDS = frozenset(
    {
        "pad",
        "bos",
        "eos",
        "unk",
        "sep",
        "cls",
        "mask",
        "eot",
        "eod",
        "bod",
        "special",
        "additional",
        "start",
        "end",
        "image",
        "audio",
        "video",
        "boi",
        "eoi",
    }
)
# values that are never secrets (flags, placeholders)
TRIVIAL = frozenset({"", "true", "false", "none", "null", "0", "1", MASK})
MIN_SECRET_LEN = 6  # remembered values shorter than this would mask ordinary words

_START, _END = r"(?<![\w\-.])", r"(?![\w\-])"  # a whole value: not inside a word, a compound or a file name
TOKEN_PATTERNS = (
    re.compile(rf"{_START}hf_[A-Za-z0-9]{{16,}}{_END}"),  # Hugging Face user / org tokens
    # OpenAI (sk-..., sk-proj-...), Anthropic (sk-ant-...): a body with a long random run, not a hyphenated name
    re.compile(rf"{_START}sk-(?=[A-Za-z0-9_\-]*[A-Za-z0-9]{{16}})[A-Za-z0-9_\-]{{16,}}{_END}"),
    re.compile(rf"{_START}gh[pousr]_[A-Za-z0-9]{{20,}}{_END}"),  # GitHub
    re.compile(rf"{_START}(?:AKIA|ASIA)[0-9A-Z]{{16}}{_END}"),  # AWS access key ids
    re.compile(rf"{_START}xox[abposr]-[A-Za-z0-9\-]{{10,}}{_END}"),  # Slack
)
# scheme://userinfo@host: the userinfo (user:password, or a token as the user) is masked whole
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^\s/?#@\"'<>]+)@(?=[^\s/?#@])")
_NAME = r"[A-Za-z_][\w.\-]*"
_KEY_VALUE = re.compile(rf"(?P<name>{_NAME})(?P<sep>\s*=\s*)(?P<value>[^\s,;&'\"}})\]=]+)")  # token=..., --set key=...
# "api_key": "..." (JSON), 'token': '...' (a logged dict)
_QUOTED = re.compile(rf"(?P<q>[\"'])(?P<name>{_NAME})(?P=q)(?P<sep>\s*:\s*)(?P<vq>[\"'])(?P<value>[^\"']*)(?P=vq)")
_FLAG = re.compile(rf"--(?P<name>{_NAME})(?P<sep>\s+)(?P<value>[^\s\-][^\s]*)")  # --hub-token VALUE


def _words(name: str) -> list[str]:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)  # apiKey -> api_Key
    return [w for w in re.split(r"[^a-z0-9]+", snake.lower()) if w]


def is_secret_name(name: str) -> bool:
    """True when ``name`` (an argument, field or environment variable) ends in a word that says it holds a secret."""
    words = _words(name)
    if not words or words[-1] not in SECRET_WORDS or (len(words) == 1 and words[0] in NEEDS_QUALIFIER):
        return False
    if words[-1] == "key" and words[-2] in DATA_KEY_WORDS:
        return False
    return not (words[-1] == "token" and len(words) > 1 and words[-2] in SPECIAL_TOKEN_WORDS)


def _is_secret_value(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() not in TRIVIAL


_REMEMBERED: set[str] = set()


def remember(*values: str) -> None:
    """Mask these exact values from now on in this process (the CLI calls it with the secrets of its command line)."""
    _REMEMBERED.update(v for v in values if _is_secret_value(v) and len(v) >= MIN_SECRET_LEN)


def env_secrets(environ: dict[str, str] | None = None) -> set[str]:
    """Values of the environment variables whose names say they hold a secret (``HF_TOKEN``, ``OPENAI_API_KEY``);
    a value that is an existing path (a key *file*) is not masked: paths appear in outputs legitimately."""
    env = os.environ if environ is None else environ
    return {
        v
        for k, v in env.items()
        if is_secret_name(k) and _is_secret_value(v) and len(v) >= MIN_SECRET_LEN and not os.path.exists(v)
    }


def known_secrets() -> list[str]:
    """Remembered and environment secrets, longest first (so that a secret containing another is masked whole)."""
    return sorted(_REMEMBERED | env_secrets(), key=len, reverse=True)


def _named_values(text: str) -> Iterator[re.Match]:
    for pattern in (_QUOTED, _KEY_VALUE, _FLAG):
        for m in pattern.finditer(text):
            if is_secret_name(m["name"]) and _is_secret_value(m["value"]):
                yield m


def secrets_in_text(text: str) -> set[str]:
    """The secret values ``text`` names (``token=...``, ``"api_key": "..."``, ``--hub-token ...``, ``hf_...``)."""
    found = {m["value"] for m in _named_values(text)}
    found |= {m["userinfo"] for m in _URL_USERINFO.finditer(text) if m["userinfo"] != MASK}
    found |= {part for m in _URL_USERINFO.finditer(text) for part in m["userinfo"].split(":")[1:] if part != MASK}
    return found | {m.group(0) for p in TOKEN_PATTERNS for m in p.finditer(text)}


def secrets_in_argv(argv: Iterable[str]) -> set[str]:
    """The secret values of a command line: ``--token X``, ``--token=X``, ``--set hub_token=X``, ``token=X`` inside
    ``--model_args``, ``{"api_key": "X"}`` inside ``--metadata``, and anything that looks like a token."""
    argv = list(argv)
    found: set[str] = set()
    for i, arg in enumerate(argv):
        flag = arg[2:].split("=", 1)[0] if arg.startswith("--") else ""
        if flag and is_secret_name(flag):
            value = arg.split("=", 1)[1] if "=" in arg else (argv[i + 1] if i + 1 < len(argv) else "")
            if _is_secret_value(value):
                found.add(value)
        found |= secrets_in_text(arg)
    return found


def _mask_named(m: re.Match) -> str:
    if not (is_secret_name(m["name"]) and _is_secret_value(m["value"])):
        return m.group(0)
    start, end = m.span("value")
    return m.group(0)[: start - m.start()] + MASK + m.group(0)[end - m.start() :]


def redact_text(text: str, secrets: Iterable[str] | None = None) -> str:
    """``text`` with every secret masked (``secrets``: the exact values to mask; default :func:`known_secrets`)."""
    for value in known_secrets() if secrets is None else secrets:
        if value in text:
            text = text.replace(value, MASK)
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    for pattern in (_QUOTED, _KEY_VALUE, _FLAG):
        text = pattern.sub(_mask_named, text)
    for pattern in TOKEN_PATTERNS:
        text = pattern.sub(MASK, text)
    return text


def redact(value: Any, secrets: Iterable[str] | None = None) -> Any:
    """A copy of ``value`` (a string, or dicts / lists / tuples of them) with every secret masked: values under a
    secret name, and secrets inside any string (:func:`redact_text`). Other values are returned as they are."""
    known = known_secrets() if secrets is None else list(secrets)

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return redact_text(v, known)
        if isinstance(v, dict):
            return {
                k: MASK if isinstance(k, str) and is_secret_name(k) and _is_secret_value(x) else walk(x)
                for k, x in v.items()
            }
        if isinstance(v, list):
            return [walk(x) for x in v]
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            return tuple(walk(x) for x in v)
        return v

    return walk(value)


def redact_argv(argv: Iterable[str]) -> list[str]:
    """A command line with the values of secret flags (``--token X``, ``--token=X``) and every secret masked."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next:
            out.append(MASK if _is_secret_value(arg) else arg)
            mask_next = False
            continue
        flag = arg[2:].split("=", 1)[0] if arg.startswith("--") else ""
        if flag and is_secret_name(flag):
            if "=" in arg:
                arg = f"--{flag}={MASK}"
            else:
                mask_next = True
        out.append(redact_text(arg))
    return out


def redact_object_attributes(obj: Any) -> Any:
    """A shallow copy of ``obj`` (e.g. transformers' ``TrainingArguments``) whose secret-named attributes are masked."""
    import copy

    clone = copy.copy(obj)
    for name, value in vars(obj).items():
        if is_secret_name(name) and _is_secret_value(value):
            object.__setattr__(clone, name, MASK)
    return clone


class RedactingStream:
    """A text stream (stdout / stderr) that masks secrets in everything written through it."""

    def __init__(self, stream: TextIO, secrets: Iterable[str]) -> None:
        self._stream = stream
        self._secrets = sorted(set(secrets), key=len, reverse=True)

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text, self._secrets))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextmanager
def redacted_std_streams() -> Iterator[None]:
    """Pass ``sys.stdout`` and ``sys.stderr`` (logs, progress, printed tables) through :class:`RedactingStream`."""
    import sys

    saved = sys.stdout, sys.stderr
    secrets = known_secrets()
    sys.stdout, sys.stderr = RedactingStream(saved[0], secrets), RedactingStream(saved[1], secrets)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
