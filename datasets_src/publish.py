"""Publishing a built dataset folder to the Hub (always an explicit user action)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

log = logging.getLogger(__name__)


def push_folder(folder: Path, repo_id: str, private: bool = False, dry_run_dir: Path | None = None, repo_type: str = "dataset") -> str:
    """Upload ``folder`` (card + data) to ``repo_id``; with ``dry_run_dir`` copy exactly that upload there instead.

    The token comes from the usual Hugging Face login or ``HF_TOKEN``; it is never printed or written.
    """
    folder = Path(folder)
    if not (folder / "README.md").is_file():
        raise FileNotFoundError(f"{folder} has no README.md card: build it first")
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
    commit = api.upload_folder(repo_id=repo_id, repo_type=repo_type, folder_path=str(folder), commit_message="Upload with bias-harness")
    url = getattr(commit, "commit_url", None) or f"https://huggingface.co/{'datasets/' if repo_type == 'dataset' else ''}{repo_id}"
    log.info("pushed %s to %s", folder, url)
    return str(url)
