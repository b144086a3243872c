"""``bias-harness data build|list|push|generate``: datasets built from the authors' raw files."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from bias_harness.commands import add_dry_run
from bias_harness.errors import BadInput, UnknownName, check_writable
from bias_harness.options import Opt


def dataset_name(value: str, allow_all: bool = False) -> str:
    """argparse type of a dataset argument: a known dataset name (never a path), or ``all`` for ``data build``."""
    from bias_harness.datasets_src.registry import builders
    from bias_harness.options import check_keys

    if allow_all and value == "all":
        return value
    try:
        check_keys([value], builders(), "name", what="dataset")
    except UnknownName as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("name: ")) from None
    return value


def repo_id(value: str) -> str:
    """argparse type of ``--repo-id``: ORG/NAME as the Hub spells it."""
    if not re.fullmatch(r"[A-Za-z0-9][\w.\-]{0,95}/[A-Za-z0-9][\w.\-]{0,95}", value):
        raise argparse.ArgumentTypeError(f"expected ORG/NAME (letters, digits, - _ .), not {value!r}")
    return value


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="build, list and publish the datasets")
    dsub = p.add_subparsers(dest="data_command", required=True, metavar="ACTION")

    b = dsub.add_parser("build", help="build NAME (or all) from raw files into BIAS_HARNESS_DATA_DIR")
    b.add_argument("name", type=lambda v: dataset_name(v, allow_all=True), help="dataset name, or 'all'")
    b.add_argument("--out", type=Opt("out_dir"), default=None, help="output root (default: BIAS_HARNESS_DATA_DIR)")
    b.add_argument(
        "--allow-modified-raw",
        action="store_true",
        help="build even from raw files whose sha256 differs from the pinned upstream files (the card then "
        "says that the data differs from upstream, with the real sha256 and row counts)",
    )
    b.set_defaults(func=_build)

    ls = dsub.add_parser("list", help="list the datasets, their raw files and whether a local copy exists")
    ls.set_defaults(func=_list)

    push = dsub.add_parser(
        "push", help="upload a built dataset (the files its build wrote, by its manifest build_info.json) to the Hub"
    )
    push.add_argument("name", type=dataset_name, help="dataset name (see `bias-harness data list`)")
    push.add_argument("--repo-id", type=repo_id, required=True, help="ORG/NAME on the Hub")
    push.add_argument("--private", action="store_true")
    add_dry_run(push, "write the exact folder that would be uploaded to DIR (default ./hub_upload) and upload nothing")
    push.add_argument(
        "--data-dir",
        type=Opt("in_dir"),
        default=None,
        help="the data root the dataset was built into (default: BIAS_HARNESS_DATA_DIR)",
    )
    push.set_defaults(func=_push)

    from bias_harness.datasets_src import generate

    gen = dsub.add_parser(
        "generate", help="write new rows with an LLM (OpenAI-compatible server), the papers' own methods"
    )
    generate.add_arguments(gen)
    gen.set_defaults(func=generate.run)


def _build(args: argparse.Namespace) -> int:
    from bias_harness.datasets_src.base import build_dataset
    from bias_harness.datasets_src.registry import builders, get_builder

    names = list(builders()) if args.name == "all" else [args.name]
    for name in names:
        folder = build_dataset(get_builder(name), args.out, allow_modified_raw=args.allow_modified_raw)
        print(f"{name}: {folder}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from bias_harness.datasets_src.registry import builders
    from bias_harness.plugins.data import local_path

    for name, cls in builders().items():
        built = local_path(name)
        state = f"built at {built}" if (built / "README.md").is_file() else "not built"
        if _modified_raw(built):
            state += ", from modified raw files"
        print(f"{name:16s} {cls.card.pretty_name} [{cls.card.license}] ({state})")
        for raw in cls.raw_files.values():
            print(f"    {raw.key}  <- {raw.repo}@{raw.commit[:12]}:{raw.path}")
    return 0


def _push(args: argparse.Namespace) -> int:
    import sys

    from bias_harness.datasets_src.publish import manifest_files, push_folder
    from bias_harness.plugins.data import local_path

    folder = local_path(args.name, args.data_dir)
    if not (folder / "README.md").is_file():
        raise BadInput(f"no built copy of {args.name} at {folder}; run `bias-harness data build {args.name}` first")
    if args.dry_run is not None:
        check_writable(args.dry_run, "--dry-run")
    files = manifest_files(folder)  # what the build wrote, checked by sha256: nothing else is published
    if modified := _modified_raw(folder):
        print(
            f"bias-harness: warning: {args.name} was built from raw files that differ from upstream "
            f"({', '.join(modified)}); its card says so",
            file=sys.stderr,
        )
    where = push_folder(folder, args.repo_id, private=args.private, dry_run_dir=args.dry_run, files=files)
    print(where)
    return 0


def _modified_raw(folder: Path) -> list[str]:
    """The raw files a built copy was made from that differ from upstream (``build_info.json``)."""
    import json

    info = folder / "build_info.json"
    if not info.is_file():
        return []
    return [m["key"] for m in json.loads(info.read_text(encoding="utf-8")).get("modified_raw_files", {}).values()]
