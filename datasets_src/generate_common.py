"""Shared machinery for generating new dataset rows with an LLM behind any OpenAI-compatible server.

A *generator* (``generate_stop``, ``generate_multiagent``) plans the chat requests and turns a parsed
answer into a record. This module does the rest, the same way for every work:

1. send the requests (``openai`` client, a thread pool, a tqdm bar);
2. classify each answer: ``refused`` (a refusal, the API's ``refusal`` field or a ``content_filter`` stop),
   ``empty``, ``truncated`` (cut at ``max_tokens`` mid-answer), ``malformed_json`` / ``malformed_answer`` (no
   parseable JSON object / plain-text layout), ``schema``
   (the record fails the dataset's JSON Schema), ``invalid_content`` (checks the schema cannot express),
   ``api_error`` (the request failed after the client's retries);
3. append the accepted records to a local dataset config, atomically and without duplicates;
4. write every rejected answer, with its reason, to a rejects JSONL, and a run summary JSON.

Layout of the local store (one folder per work, next to the built datasets)::

    <data_dir>/<work>_generated/README.md               Hub-style YAML ``configs`` (load_dataset reads it)
    <data_dir>/<work>_generated/<config>/train.jsonl    accepted records, one per line, each with a content ``id``
    <data_dir>/<work>_generated/runs/<run>.summary.json counts per reason, request settings (never the key)
    <data_dir>/<work>_generated/runs/<run>.rejects.jsonl rejected answers: reason, detail, request, raw answer

``datasets.load_dataset("<data_dir>/<work>_generated", "<config>")`` loads a config; so does
``bias_harness.plugins.data.load("<work>_generated", "<config>", data_source="local")``.

The API key is read from the environment variable named by the caller and is never logged or written:
every string that leaves this module (rejects, summaries, error messages) passes through
:func:`bias_harness.redact.redact`, which masks it (and any other token) wherever it shows up.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bias_harness.datasets_src.raw import RawDataError, load_jsonl, validate_records

from bias_harness.redact import redact, remember

log = logging.getLogger(__name__)

REASONS = (
    "refused",
    "empty",
    "truncated",
    "malformed_json",
    "malformed_answer",
    "schema",
    "invalid_content",
    "api_error",
)
SPLIT_FILE = "train.jsonl"
_CONFIG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# A refusal is an answer without a JSON object that opens like one of these (checked after JSON parsing fails).
REFUSAL = re.compile(
    r"^\W*(i['’]?m sorry|i am sorry|sorry\b|i apologi[sz]e|i can['’]?t\b|i cannot\b|i can not\b|i won['’]?t\b|"
    r"i will not\b|i['’]?m (?:not able|unable)|i am (?:not able|unable)|i must decline|as an ai\b|"
    r"unfortunately,? i (?:can|am)\b)",
    re.IGNORECASE,
)


class Rejected(Exception):
    """An answer that cannot become a record; ``reason`` is one of :data:`REASONS`.

    ``started``: a parser saw the start of the expected layout (an answer cut at ``max_tokens`` is then ``truncated``).
    """

    def __init__(self, reason: str, detail: str, started: bool = False) -> None:
        assert reason in REASONS, reason
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail, self.started = reason, detail, started


class GenerationSetupError(RuntimeError):
    """The run cannot start or must stop (bad arguments, authentication, unknown model)."""


@dataclass
class Request:
    """One chat request: the messages and what the generator needs to build the record (``meta``, JSON-serialisable)."""

    index: int
    messages: list[dict[str, str]]
    meta: dict[str, Any]


@dataclass
class Answer:
    text: str | None
    finish_reason: str | None = None
    refusal: str | None = None
    error: str | None = None  # set when the request failed


class Generator(Protocol):
    """What a work provides: a name, the record schema, the content keys of the id, a plan, and a record builder."""

    name: str
    schema: dict[str, Any]
    content_keys: tuple[str, ...]

    def plan(self, n: int, seed: int) -> list[Request]: ...

    # optional: ``parse(text) -> dict`` replaces :func:`extract_json_object` (raise ``Rejected`` when it fails)

    def to_record(self, request: Request, obj: dict[str, Any]) -> dict[str, Any]:
        """The dataset record (schema fields only) from the parsed answer and the request."""
        ...

    def check(self, request: Request, record: dict[str, Any]) -> None:
        """Checks the schema cannot express, on a schema-valid record: raise ``Rejected('invalid_content', ...)``."""
        ...

    def extras(self, request: Request) -> dict[str, Any]:
        """Provenance columns appended to an accepted record (not schema-checked)."""
        ...


# ---------------------------------------------------------------- the client


@dataclass
class ClientSettings:
    model: str
    base_url: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = None
    max_tokens: int = 1024
    json_mode: bool = False  # send response_format={"type": "json_object"} (not every server supports it)
    timeout: float = 120.0
    max_retries: int = 2

    def public(self) -> dict[str, Any]:
        """What the run summary records (the env var's *name*, never its value)."""
        return asdict(self)


class ChatClient:
    """A thin wrapper over ``openai.OpenAI``: one :class:`Answer` per request (failures become ``Answer.error``),
    except authentication, permission and unknown-model errors, which raise :class:`GenerationSetupError`."""

    def __init__(self, settings: ClientSettings) -> None:
        import openai

        self.settings = settings
        self.secret = os.environ.get(settings.api_key_env) or None
        remember(self.secret or "")  # masked by bias_harness.redact in everything written, whatever the variable's name
        if self.secret is None:
            log.info("environment variable %s is not set: sending a placeholder API key", settings.api_key_env)
        self._client = openai.OpenAI(
            base_url=settings.base_url,
            api_key=self.secret or "EMPTY",
            timeout=settings.timeout,
            max_retries=settings.max_retries,
        )

    def complete(self, messages: list[dict[str, str]], seed: int | None) -> Answer:
        import openai

        s = self.settings
        kwargs: dict[str, Any] = {"model": s.model, "messages": messages}
        if s.max_tokens > 0:  # 0: leave it to the server (models that only take max_completion_tokens)
            kwargs["max_tokens"] = s.max_tokens
        if s.temperature is not None:
            kwargs["temperature"] = s.temperature
        if seed is not None:
            kwargs["seed"] = seed
        if s.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError) as err:
            # configuration problems: every other request would fail the same way
            raise GenerationSetupError(redact(f"{type(err).__name__} from {s.base_url}: {err}")) from None
        except openai.OpenAIError as err:
            return Answer(None, error=redact(f"{type(err).__name__}: {err}"))
        if not resp.choices:
            return Answer(None, error="the server returned no choices")
        choice = resp.choices[0]
        msg = choice.message
        return Answer(msg.content, choice.finish_reason, getattr(msg, "refusal", None))


# ---------------------------------------------------------------- parsing


def extract_json_object(text: str) -> dict[str, Any]:
    """The JSON object in ``text``: the whole answer, a fenced ```json block, or the first ``{...}`` in it."""
    stripped = text.strip()
    fence = re.search(r"```(?:json)?\s*\n(.*?)```", stripped, re.DOTALL | re.IGNORECASE)
    candidates = [fence.group(1).strip()] if fence else []
    candidates.append(stripped)
    first_error: json.JSONDecodeError | None = None
    for cand in candidates:
        try:
            obj = json.loads(cand)
        except json.JSONDecodeError as err:
            first_error = first_error or err
            start = cand.find("{")
            if start < 0:
                continue
            try:
                obj, _ = json.JSONDecoder().raw_decode(cand, start)
            except json.JSONDecodeError as err2:
                first_error = err2
                continue
        if isinstance(obj, dict):
            return obj
        raise Rejected("malformed_json", f"expected a JSON object, got a JSON {type(obj).__name__}")
    if first_error is None or "{" not in stripped:
        raise Rejected("malformed_json", "the answer contains no JSON object")
    raise Rejected(
        "malformed_json",
        f"invalid JSON: {first_error.msg} (line {first_error.lineno}, column {first_error.colno})",
        started=True,
    )


def validate(record: dict[str, Any], schema: dict[str, Any], index: int) -> None:
    """Schema check of one record; a failure becomes ``Rejected('schema', "field 'x': message")``."""
    try:
        validate_records([record], schema, file="<model answer>", row_label=f"generation {index}")
    except RawDataError as err:
        raise Rejected("schema", f"field '{err.field}': {err.detail}") from None


def classify(answer: Answer, request: Request, generator: Generator) -> dict[str, Any]:
    """The record for an answer, or :class:`Rejected` with the reason."""
    if answer.error is not None:
        raise Rejected("api_error", answer.error)
    if answer.refusal:
        raise Rejected("refused", f"the API reported a refusal: {answer.refusal}")
    if answer.finish_reason == "content_filter":
        raise Rejected("refused", "the server stopped the answer with finish_reason=content_filter")
    text = answer.text or ""
    if not text.strip():
        raise Rejected("empty", "the answer is empty")
    parse = getattr(generator, "parse", None) or extract_json_object
    try:
        obj = parse(text)
    except Rejected as err:
        if REFUSAL.search(text):
            raise Rejected("refused", f"the model declined: {text.strip()[:200]}") from None
        if answer.finish_reason == "length":
            if err.started:  # the expected layout was started and cut off
                raise Rejected(
                    "truncated", f"the answer stopped at max_tokens before it was complete ({err.detail})"
                ) from None
            raise Rejected(err.reason, f"{err.detail} (the answer was cut at max_tokens)") from None
        raise
    record = generator.to_record(request, obj)
    validate(record, generator.schema, request.index)
    generator.check(request, record)
    return {**record, **generator.extras(request)}


def content_id(record: dict[str, Any], keys: tuple[str, ...]) -> str:
    """Stable id of a record's content (the same variant generated twice gets the same id)."""
    payload = json.dumps({k: record.get(k) for k in keys}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:16]


# ---------------------------------------------------------------- the local store


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder/.lock`` (POSIX flock; no lock where fcntl is missing)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover (Windows)
        yield
        return
    with open(folder / ".lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _atomic_write(path: Path, text: str) -> None:
    """Written whole (temporary name, checked, renamed) or not at all: :func:`bias_harness.atomic.write_text`."""
    from bias_harness.atomic import write_text

    write_text(path, text)


@dataclass
class Store:
    """The local dataset folder that receives accepted records (see the module docstring for the layout)."""

    root: Path  # the data dir
    work: str
    config: str = "generated"

    def __post_init__(self) -> None:
        if not _CONFIG_NAME.match(self.config) or self.config in {"runs"}:
            raise GenerationSetupError(
                f"--out-config must be letters, digits, '_', '.' or '-' (and not 'runs'), not {self.config!r}"
            )
        self.root = Path(self.root)

    @property
    def folder(self) -> Path:
        return self.root / f"{self.work}_generated"

    @property
    def data_file(self) -> Path:
        return self.folder / self.config / SPLIT_FILE

    def read(self, config: str | None = None) -> list[dict[str, Any]]:
        path = self.folder / (config or self.config) / SPLIT_FILE
        if not path.is_file():
            return []
        return load_jsonl(path)

    def append(self, records: list[dict[str, Any]], index_field: str | None = None) -> tuple[int, int]:
        """Add records whose ``id`` is not there yet; returns (added, already present). Atomic under a lock.

        ``index_field``: also number the new records (0-based position in the config's file), after ``id``.
        """
        with _locked(self.folder):
            existing = self.read()
            seen = {r.get("id") for r in existing}
            new = []
            for rec in records:
                if rec["id"] not in seen:
                    seen.add(rec["id"])
                    if index_field:
                        rec = {
                            "id": rec["id"],
                            index_field: len(existing) + len(new),
                            **{k: v for k, v in rec.items() if k != "id"},
                        }
                    new.append(rec)
            if new or not self.data_file.is_file():
                lines = [json.dumps(r, ensure_ascii=False) for r in existing + new]
                _atomic_write(self.data_file, "".join(line + "\n" for line in lines))
            self._write_card()
        return len(new), len(records) - len(new)

    def configs(self) -> list[str]:
        if not self.folder.is_dir():
            return []
        return sorted(p.parent.name for p in self.folder.glob(f"*/{SPLIT_FILE}") if p.parent.name != "runs")

    def _write_card(self) -> None:
        import yaml

        configs = self.configs()
        meta = {
            "pretty_name": f"{self.work} (LLM-generated rows)",
            "tags": ["bias", "fairness", "synthetic"],
            "configs": [
                {"config_name": c, "data_files": [{"split": "train", "path": f"{c}/{SPLIT_FILE}"}]} for c in configs
            ],
        }
        rows = "\n".join(
            f"| `{c}` | {sum(1 for _ in open(self.folder / c / SPLIT_FILE, encoding='utf-8'))} |" for c in configs
        )
        body = f"""# {self.work}: rows generated with an LLM

Written by `bias-harness data generate {self.work}` (the paper's own generation method, run against an
OpenAI-compatible server). Every row passed the dataset's JSON Schema and the checks listed in
`docs/data_generation.md`; rejected answers and their reasons are in `runs/*.rejects.jsonl`.
These rows are model output and have **not** been reviewed by a person: read them before you use them.

| config | rows (split `train`) |
|---|---|
{rows}

```python
from datasets import load_dataset
ds = load_dataset("{self.folder}", "{configs[0] if configs else self.config}")
```
"""
        _atomic_write(self.folder / "README.md", "---\n" + yaml.safe_dump(meta, sort_keys=False) + "---\n\n" + body)


# ---------------------------------------------------------------- the run


@dataclass
class RunSummary:
    work: str
    config: str
    requested: int
    answered: int = 0  # less than requested only when the run was interrupted
    accepted: int = 0
    appended: int = 0
    already_present: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    data_file: str = ""
    rejects_file: str = ""
    summary_file: str = ""
    seconds: float = 0.0

    @property
    def n_rejected(self) -> int:
        return sum(self.rejected.values())

    def text(self) -> str:
        why = ", ".join(f"{k} {v}" for k, v in sorted(self.rejected.items())) or "none"
        cut = f" (interrupted: {self.answered} answered)" if self.answered < self.requested else ""
        return (
            f"{self.work}: {self.requested} requested{cut}, {self.accepted} accepted "
            f"({self.appended} appended, {self.already_present} already present), {self.n_rejected} rejected ({why})\n"
            f"data:    {self.data_file}  (config '{self.config}', split 'train')\n"
            f"rejects: {self.rejects_file}\n"
            f"summary: {self.summary_file}"
        )


def run_generation(
    generator: Generator,
    settings: ClientSettings,
    store: Store,
    n: int,
    seed: int = 0,
    workers: int = 4,
    progress: bool = True,
    client: ChatClient | None = None,
    options: dict[str, Any] | None = None,
) -> RunSummary:
    """Plan ``n`` requests, generate, classify, append the accepted records, write rejects and a summary.

    ``options``: the work-specific settings, recorded in the summary as they are.
    """
    from tqdm.auto import tqdm

    if n < 1:
        raise GenerationSetupError(f"--n must be at least 1, not {n}")
    requests = generator.plan(n, seed)
    client = client or ChatClient(settings)
    started = time.time()
    run_id = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started)) + f"-{store.config}-{uuid.uuid4().hex[:8]}"
    answers: dict[int, Answer] = {}
    counts: Counter[str] = Counter()
    bar = tqdm(total=len(requests), desc=f"generate {generator.name}", unit="gen", disable=not progress)
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    interrupted = False
    try:
        futures = {pool.submit(client.complete, r.messages, seed + r.index): r for r in requests}
        for fut in as_completed(futures):
            answers[futures[fut].index] = fut.result()
            bar.update(1)
    except KeyboardInterrupt:  # keep what was answered so far: it is validated and appended below
        interrupted = True
        log.warning(
            "interrupted: keeping the %d answers received, dropping the other %d requests",
            len(answers),
            len(requests) - len(answers),
        )
    finally:
        pool.shutdown(wait=not interrupted, cancel_futures=True)
        bar.close()

    accepted: list[dict[str, Any]] = []  # distinct records that passed every check
    n_passed = 0
    rejects: list[dict[str, Any]] = []
    seen_ids: set[str] = set()
    for req in requests:  # request order, so the appended file does not depend on thread timing
        if req.index not in answers:  # never answered (interrupted run)
            continue
        ans = answers[req.index]
        try:
            record = classify(ans, req, generator)
        except Rejected as err:
            counts[err.reason] += 1
            rejects.append(
                {
                    "index": req.index,
                    "reason": err.reason,
                    "detail": err.detail,
                    "request": req.meta,
                    "answer": ans.text,
                    "finish_reason": ans.finish_reason,
                }
            )
            continue
        n_passed += 1
        record = {"id": content_id(record, generator.content_keys), **record, "model": settings.model}
        if record["id"] in seen_ids:  # the same variant twice in one run: keep the first
            continue
        seen_ids.add(record["id"])
        accepted.append(record)

    appended, _ = store.append(accepted, getattr(generator, "index_field", None))
    runs = store.folder / "runs"
    rejects_file = runs / f"{run_id}.rejects.jsonl"
    summary_file = runs / f"{run_id}.summary.json"
    _atomic_write(rejects_file, "".join(json.dumps(redact(r), ensure_ascii=False) + "\n" for r in rejects))
    summary = RunSummary(
        work=generator.name,
        config=store.config,
        requested=len(requests),
        answered=len(answers),
        accepted=n_passed,
        appended=appended,
        already_present=n_passed - appended,
        rejected={k: counts[k] for k in REASONS if counts[k]},
        data_file=str(store.data_file),
        rejects_file=str(rejects_file),
        summary_file=str(summary_file),
        seconds=round(time.time() - started, 3),
    )
    payload = {
        **asdict(summary),
        "run_id": run_id,
        "seed": seed,
        "workers": workers,
        "client": settings.public(),
        "options": options or {},
    }
    _atomic_write(summary_file, json.dumps(redact(payload), indent=2, ensure_ascii=False) + "\n")
    for r in rejects:
        log.debug("rejected generation %d (%s): %s", r["index"], r["reason"], redact(r["detail"]))
    return summary
