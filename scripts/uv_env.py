"""Print ``export`` lines that give uv the machine's pip configuration (uv reads none of pip's files).

scripts/setup.sh installs with uv where it can (a fresh install in a fraction of pip's time) and must resolve exactly
what pip would: the same indexes, find-links folders (e.g. a local CPU build of torch), constraints and certificates,
from ``pip config list`` (pip's config files and its PIP_* environment variables). Also pip's rule of taking the best
version from every index (uv's default takes the first index that has the package). Run with the venv's Python:

    eval "$(.venv/bin/python scripts/uv_env.py)"
"""

from __future__ import annotations

import shlex
import subprocess
import sys

# pip's option -> uv's variable; list-valued options are joined with spaces, which uv splits
OPTIONS = {
    "index-url": "UV_DEFAULT_INDEX",
    "extra-index-url": "UV_EXTRA_INDEX_URL",
    "find-links": "UV_FIND_LINKS",
    "constraint": "UV_CONSTRAINT",
    "cert": "SSL_CERT_FILE",
    "timeout": "UV_HTTP_TIMEOUT",
    "default-timeout": "UV_HTTP_TIMEOUT",
    "trusted-host": "UV_INSECURE_HOST",
}


def pip_config(lines: list[str]) -> dict[str, str]:
    """``pip config list`` lines (``global.find-links='/opt/wheels'``, ``:env:.find-links='...'``) -> option: value;
    the environment wins over the files, as in pip."""
    found: dict[str, tuple[int, str]] = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if not sep:
            continue
        scope, _, option = key.rpartition(".")
        rank = {":env:": 2, "install": 1}.get(scope, 0)
        if option in OPTIONS and rank >= found.get(option, (-1, ""))[0]:
            found[option] = (rank, " ".join(shlex.split(value)))
    return {option: value for option, (_, value) in found.items()}


def exports(config: dict[str, str]) -> list[str]:
    out = {"UV_INDEX_STRATEGY": "unsafe-best-match"}  # pip: the best match over all indexes
    for option, value in config.items():
        out[OPTIONS[option]] = value.split()[0] if option in ("cert", "timeout", "default-timeout") else value
    return [f"export {name}={shlex.quote(value)}" for name, value in out.items()]


def main() -> int:
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    print("\n".join(exports(pip_config(done.stdout.splitlines()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
