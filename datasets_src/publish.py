"""Publishing a built dataset folder to the Hub (always an explicit user action)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

log = logging.getLogger(__name__)


def check_card(folder: Path, repo_type: str = "dataset") -> None:
    """Parse ``folder/README.md`` with huggingface_hub's card class for ``repo_type`` (the Hub's own parser): a card
    whose YAML metadata the Hub cannot read is refused before anything is uploaded."""
    from huggingface_hub import DatasetCard, ModelCard

    path = Path(folder) / "README.md"
    if not path.is_file():
        raise FileNotFoundError(f"{folder} has no README.md card: build it first")
    cls = DatasetCard if repo_type == "dataset" else ModelCard
    try:
        card = cls.load(path, repo_type=repo_type)
    except Exception as err:  # noqa: BLE001  (yaml / metadata errors of any kind)
        raise ValueError(f"{path}: the card's YAML metadata cannot be read by huggingface_hub: {err}") from err
    if not card.data.to_dict():
        raise ValueError(f"{path}: the card has no YAML metadata block")


def push_folder(
    folder: Path, repo_id: str, private: bool = False, dry_run_dir: Path | None = None, repo_type: str = "dataset"
) -> str:
    """Upload ``folder`` (card + data) to ``repo_id``; with ``dry_run_dir`` copy exactly that upload there instead.

    The token comes from the usual Hugging Face login or ``HF_TOKEN``; it is never printed or written.
    """
    folder = Path(folder)
    check_card(folder, repo_type)
    if dry_run_dir is not None:
        dest = Path(dry_run_dir)
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(folder, dest)
        log.info("dry run: wrote the exact upload folder for %s to %s", repo_id, dest)
        return str(dest)
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
    commit = api.upload_folder(
        repo_id=repo_id, repo_type=repo_type, folder_path=str(folder), commit_message="Upload with bias-harness"
    )
    url = (
        getattr(commit, "commit_url", None)
        or f"https://huggingface.co/{'datasets/' if repo_type == 'dataset' else ''}{repo_id}"
    )
    log.info("pushed %s to %s", folder, url)
    return str(url)
