"""Publishing a built dataset folder to the Hub (always an explicit user action).

A dataset folder is published as its build wrote it: the files its manifest (``build_info.json``, ``files``)
lists, each checked against its sha256, and the manifest; nothing else in the folder is uploaded or copied.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from bias_harness.errors import BadInput, MissingInput

log = logging.getLogger(__name__)


def check_card(folder: Path, repo_type: str = "dataset") -> None:
    """Parse ``folder/README.md`` with huggingface_hub's card class for ``repo_type`` (the Hub's own parser): a card
    whose YAML metadata the Hub cannot read is refused before anything is uploaded."""
    from huggingface_hub import DatasetCard, ModelCard

    path = Path(folder) / "README.md"
    if not path.is_file():
        raise MissingInput(f"{folder} has no README.md card: build it first")
    cls = DatasetCard if repo_type == "dataset" else ModelCard
    try:
        card = cls.load(path, repo_type=repo_type)
    except Exception as err:  # noqa: BLE001  (yaml / metadata errors of any kind)
        raise BadInput(f"{path}: the card's YAML metadata cannot be read by huggingface_hub: {err}") from err
    if not card.data.to_dict():
        raise BadInput(f"{path}: the card has no YAML metadata block (a '---' header)")


def manifest_files(folder: Path) -> list[str]:
    """The files a build wrote into ``folder`` (its ``build_info.json`` manifest, which is listed too), each
    checked against the sha256 the build recorded: a file changed, added by hand or missing is an error."""
    from bias_harness.datasets_src.raw import sha256_of

    info_path = Path(folder) / "build_info.json"
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MissingInput(
            f"{info_path}: no build manifest; build the dataset with `bias-harness data build`"
        ) from None
    except (ValueError, UnicodeDecodeError) as err:
        raise BadInput(f"{info_path}: not a build manifest ({err}); build the dataset again") from None
    files = info.get("files") if isinstance(info, dict) else None
    if not isinstance(files, dict) or not files:
        raise BadInput(f"{info_path}: lists no files (built by an older bias-harness); build the dataset again")
    for name, entry in files.items():
        path = Path(folder) / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            raise BadInput(f"{info_path}: file {name!r} is outside the dataset folder")
        if not path.is_file():
            raise MissingInput(f"{path}: listed in {info_path} but missing; build the dataset again")
        if sha256_of(path) != entry.get("sha256"):
            raise BadInput(f"{path}: differs from what the build wrote (sha256); build the dataset again")
    return [*files, "build_info.json"]


def push_folder(
    folder: Path,
    repo_id: str,
    private: bool = False,
    dry_run_dir: Path | None = None,
    repo_type: str = "dataset",
    files: list[str] | None = None,
) -> str:
    """Upload ``folder`` (card + data) to ``repo_id``; with ``dry_run_dir`` copy exactly that upload there instead.
    ``files``: only these files of the folder (paths relative to it; default every file).

    The token comes from the usual Hugging Face login or ``HF_TOKEN``; it is never printed or written.
    """
    from bias_harness.atomic import staged_folder

    folder = Path(folder)
    check_card(folder, repo_type)
    names = (
        files if files is not None else [str(p.relative_to(folder)) for p in sorted(folder.rglob("*")) if p.is_file()]
    )
    if dry_run_dir is not None:
        import shutil

        dest = Path(dry_run_dir)
        here = Path.cwd().resolve()
        if dest.resolve() in (here, *here.parents) or folder.resolve().is_relative_to(dest.resolve()):
            raise BadInput(f"--dry-run {dest}: would replace a folder that holds {folder} or the current folder")
        with staged_folder(dest) as stage:  # the whole upload folder, checked, or nothing
            for name in names:
                (stage / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(folder / name, stage / name)
            if dest.exists():  # exactly the upload: nothing of an earlier dry run stays
                shutil.rmtree(dest)
        log.info("dry run: wrote the exact upload folder for %s to %s", repo_id, dest)
        return str(dest)
    from huggingface_hub import HfApi

    api = HfApi()
    api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True)
    only = {} if files is None else {"allow_patterns": names}  # a dataset: the files of its build's manifest
    commit = api.upload_folder(
        repo_id=repo_id, repo_type=repo_type, folder_path=str(folder), commit_message="Upload with bias-harness", **only
    )
    url = (
        getattr(commit, "commit_url", None)
        or f"https://huggingface.co/{'datasets/' if repo_type == 'dataset' else ''}{repo_id}"
    )
    log.info("pushed %s to %s", folder, url)
    return str(url)
