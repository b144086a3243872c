"""Publishing a mitigated model folder (weights + card) to the Hub; only on explicit request.

The token comes from the usual Hugging Face login or ``HF_TOKEN`` and is handled by ``huggingface_hub``
alone: it is never printed, logged or written. Before uploading we also check that no file of the upload
folder contains the token (a stray ``training_args`` or log could), and that huggingface_hub's ``ModelCard``
parses the card (``datasets_src.publish.check_card``: a card whose metadata the Hub cannot read is refused).
"""

from __future__ import annotations

import logging
from pathlib import Path

from bias_harness.datasets_src.publish import push_folder

from bias_harness.redact import known_secrets

log = logging.getLogger(__name__)


def _tokens() -> list[str]:
    """The secrets a folder must not contain: the environment's and the command line's (:mod:`bias_harness.redact`)
    and the Hugging Face login token."""
    found = known_secrets()
    try:
        from huggingface_hub import get_token

        tok = get_token()
        if tok:
            found.append(tok)
    except Exception:  # noqa: BLE001  (no login is fine)
        pass
    return [t for t in set(found) if len(t) >= 8]


def check_no_token(folder: Path) -> None:
    """Raise if any file under ``folder`` contains a token or key (never says which)."""
    tokens = [t.encode() for t in _tokens()]
    if not tokens:
        return
    for path in Path(folder).rglob("*"):
        if path.is_file():
            blob = path.read_bytes()
            if any(t in blob for t in tokens):
                raise RuntimeError(f"refusing to upload: {path} contains the Hugging Face token or another secret")


def push_model(folder: Path, repo_id: str, private: bool = False, dry_run_dir: Path | None = None) -> str:
    """Upload ``folder`` to model repo ``repo_id``; with ``dry_run_dir`` copy exactly that upload there instead."""
    folder = Path(folder)
    if "/" not in repo_id:
        raise ValueError(f"--push-to must be ORG/NAME, not {repo_id!r}")
    check_no_token(folder)
    return push_folder(folder, repo_id, private=private, dry_run_dir=dry_run_dir, repo_type="model")
