"""scripts/uv_env.py: scripts/setup.sh's uv gets the machine's pip configuration, so that it resolves what pip would."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("uv_env", ROOT / "scripts" / "uv_env.py")
uv_env = importlib.util.module_from_spec(spec)
spec.loader.exec_module(uv_env)


def test_pip_options_become_uv_variables_and_the_environment_wins() -> None:
    lines = [
        "global.cert='/etc/ssl/certs/ca.crt'",
        "global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'",
        "global.find-links='/opt/files'",
        ":env:.find-links='/opt/wheels'",
        "global.constraint='/etc/xdg/pip/constraints.txt'",
        ":env:.default-timeout='180'",
        "global.no-color='1'",  # no uv counterpart: left out
        "not a config line",
    ]
    got = dict(line.removeprefix("export ").split("=", 1) for line in uv_env.exports(uv_env.pip_config(lines)))
    assert got == {
        "UV_INDEX_STRATEGY": "unsafe-best-match",
        "SSL_CERT_FILE": "/etc/ssl/certs/ca.crt",
        "UV_EXTRA_INDEX_URL": "'file:///opt/a/simple file:///opt/b/simple'",
        "UV_FIND_LINKS": "/opt/wheels",
        "UV_CONSTRAINT": "/etc/xdg/pip/constraints.txt",
        "UV_HTTP_TIMEOUT": "180",
    }


def test_the_script_reads_this_machines_pip_config() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / "uv_env.py")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "export UV_INDEX_STRATEGY=unsafe-best-match"
    assert all(line.startswith("export UV_") or line.startswith("export SSL_CERT_FILE=") for line in lines)
