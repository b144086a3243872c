import sys

from bias_harness.cli import main

sys.exit(main())
