"""``python -m bias_harness.report.responses``: the command of :mod:`bias_harness.responses` under the path that
recorded runs and scripts call (``save`` / ``restore``)."""

from __future__ import annotations

import sys

from bias_harness.responses import main

if __name__ == "__main__":
    sys.exit(main())
