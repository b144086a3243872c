"""README's generated tables: the Troubleshooting table (one row per class of error the one handler tells apart,
:data:`bias_harness.errors.ERROR_CLASSES`) and the table of task ``--metadata`` keys (every work's schema,
:mod:`bias_harness.plugins.metadata`). Nothing in them is typed by hand:

    python -m bias_harness.docs_tables            # print both tables
    python -m bias_harness.docs_tables README.md  # rewrite them in place, between their markers

``tests/shared/test_fuzz_cli.py`` fails when README's tables differ from the generated ones.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def troubleshooting() -> str:
    """One row per class of error (:data:`bias_harness.errors.ERROR_CLASSES`)."""
    from bias_harness.errors import ERROR_CLASSES

    rows = ["| error | when | the line names | exit code |", "|---|---|---|---|"]
    rows += [f"| {e.name} | {e.cause} | {e.line} | {e.exit_code} |" for e in ERROR_CLASSES]
    return "\n".join(rows) + "\n"


def metadata_keys() -> str:
    from bias_harness.plugins.metadata import markdown

    return markdown()


TABLES = {"troubleshooting": troubleshooting, "metadata-keys": metadata_keys}


def marked(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- generated: {name} .*?-->\n)(.*?)(<!-- end generated: {name} -->)", re.S)


def update(text: str) -> str:
    """``text`` with every generated table replaced by its current version (markers must be there)."""
    for name, make in TABLES.items():
        pattern = marked(name)
        if not pattern.search(text):
            raise ValueError(f"no '<!-- generated: {name} ... -->' marker")
        text = pattern.sub(lambda m, make=make: m.group(1) + make() + m.group(3), text)
    return text


def main(argv: list[str]) -> int:
    if argv:
        path = Path(argv[0])
        path.write_text(update(path.read_text(encoding="utf-8")), encoding="utf-8")
        return 0
    for make in TABLES.values():
        print(make())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
