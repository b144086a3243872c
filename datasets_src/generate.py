"""``bias-harness data generate WORK``: new rows written by an LLM with the papers' own methods.

Arguments and dispatch only; a work takes part with ``datasets_src/<work>/generate_cli.py`` (``add_arguments``,
``make_generator``, ``OPTIONS``: the options recorded with the rows) and ``generate.py`` (its method); the shared
pipeline (client, parsing, validation, store) is ``generate_common``. Usage: ``docs/data_generation.md``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def add_arguments(p: argparse.ArgumentParser) -> None:
    from bias_harness.options import Opt

    p.add_argument("work", choices=list(_methods()), help="whose generation method to run")
    p.add_argument("--model", required=True, help="model name sent to the server")
    p.add_argument("--base-url", required=True, help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    p.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="name of the environment variable that holds the API key (default OPENAI_API_KEY; unset = no key)",
    )
    p.add_argument("--n", type=Opt("int", min=1), default=10, help="number of generations to request (default 10)")
    p.add_argument(
        "--seed",
        type=Opt("int", min=0),
        default=0,
        help="seed of the request plan; request i is sent with seed+i (default 0)",
    )
    p.add_argument(
        "--out-config",
        default="generated",
        metavar="NAME",
        help="config of <data-dir>/<work>_generated that receives accepted rows (default 'generated')",
    )
    p.add_argument("--data-dir", type=Opt("out_dir"), default=None, help="data root (default: BIAS_HARNESS_DATA_DIR)")
    p.add_argument("--workers", type=Opt("int", min=1), default=4, help="concurrent requests (default 4)")
    p.add_argument(
        "--temperature", type=Opt("float", min=0), default=None, help="sampling temperature (default: the server's)"
    )
    p.add_argument(
        "--max-tokens",
        type=Opt("int", min=0),
        default=1024,
        help="max_tokens per answer (default 1024; 0 = do not send it)",
    )
    p.add_argument("--json-mode", action="store_true", help="send response_format={'type': 'json_object'}")
    p.add_argument("--timeout", type=Opt("float", above=0), default=120.0, help="seconds per request (default 120)")
    p.add_argument("--max-retries", type=Opt("int", min=0), default=2, help="client retries per request (default 2)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    for work, module in _methods().items():
        module.add_arguments(p.add_argument_group(work))


def _methods() -> dict[str, ModuleType]:
    """Each work's generation options, ``datasets_src/<work>/generate_cli.py`` (found by :mod:`bias_harness.works`)."""
    from bias_harness import works

    return {m.__name__.split(".")[-2]: m for m in works.modules("generate_cli", package="datasets_src")}


def make_generator(args: argparse.Namespace) -> Any:
    return _methods()[args.work].make_generator(args)


def run(args: argparse.Namespace) -> int:
    from bias_harness.datasets_src.generate_common import ClientSettings, GenerationSetupError, Store, run_generation
    from bias_harness.datasets_src.raw import RawDataError, RawSourceError

    from bias_harness import settings

    for name in ("httpx", "httpx2"):  # one INFO line per request otherwise (openai 3.x uses httpx2)
        logging.getLogger(name).setLevel(logging.WARNING)
    client = ClientSettings(
        model=args.model,
        base_url=args.base_url,
        api_key_env=args.api_key_env,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        json_mode=args.json_mode,
        timeout=args.timeout,
        max_retries=args.max_retries,
    )
    try:
        store = Store(args.data_dir or settings.data_dir(), args.work, args.out_config)
        generator = make_generator(args)
        keys = _methods()[args.work].OPTIONS
        options = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k in keys}
        summary = run_generation(
            generator,
            client,
            store,
            args.n,
            seed=args.seed,
            workers=args.workers,
            progress=not args.no_progress,
            options=options,
        )
    except (GenerationSetupError, RawDataError, RawSourceError) as err:
        print(f"bias-harness: error: {err}", file=sys.stderr)
        return 2
    print(summary.text())
    return 0
