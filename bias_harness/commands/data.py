"""``bias-harness data build|list|push|generate``: datasets built from the authors' raw files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bias_harness.commands import add_dry_run
from bias_harness.errors import check_writable


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="build, list and publish the datasets")
    dsub = p.add_subparsers(dest="data_command", required=True, metavar="ACTION")

    b = dsub.add_parser("build", help="build NAME (or all) from raw files into BIAS_HARNESS_DATA_DIR")
    b.add_argument("name", help="dataset name, or 'all'")
    b.add_argument("--out", type=Path, default=None, help="output root (default: BIAS_HARNESS_DATA_DIR)")
    b.add_argument(
        "--allow-modified-raw",
        action="store_true",
        help="build even from raw files whose sha256 differs from the pinned upstream files (the card then "
        "says that the data differs from upstream, with the real sha256 and row counts)",
    )
    b.set_defaults(func=_build)

    ls = dsub.add_parser("list", help="list the datasets, their raw files and whether a local copy exists")
    ls.set_defaults(func=_list)

    push = dsub.add_parser("push", help="upload a built dataset (card + data) to the Hub")
    push.add_argument("name")
    push.add_argument("--repo-id", required=True, help="ORG/NAME on the Hub")
    push.add_argument("--private", action="store_true")
    add_dry_run(push, "write the exact folder that would be uploaded to DIR (default ./hub_upload) and upload nothing")
    push.add_argument("--data-dir", type=Path, default=None)
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
    from bias_harness.datasets_src.publish import push_folder
    from bias_harness.plugins.data import local_path

    folder = local_path(args.name, args.data_dir)
    if not (folder / "README.md").is_file():
        print(
            f"bias-harness: error: no built copy of {args.name} at {folder}; run `bias-harness data build "
            f"{args.name}` first",
            file=sys.stderr,
        )
        return 2
    if args.dry_run is not None:
        check_writable(args.dry_run, "--dry-run")
    if modified := _modified_raw(folder):
        print(
            f"bias-harness: warning: {args.name} was built from raw files that differ from upstream "
            f"({', '.join(modified)}); its card says so",
            file=sys.stderr,
        )
    where = push_folder(folder, args.repo_id, private=args.private, dry_run_dir=args.dry_run)
    print(where)
    return 0


def _modified_raw(folder: Path) -> list[str]:
    """The raw files a built copy was made from that differ from upstream (``build_info.json``)."""
    import json

    info = folder / "build_info.json"
    if not info.is_file():
        return []
    return [m["key"] for m in json.loads(info.read_text(encoding="utf-8")).get("modified_raw_files", {}).values()]
