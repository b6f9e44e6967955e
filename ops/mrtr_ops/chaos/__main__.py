"""`python -m mrtr_ops.chaos`: the chaos run (scripts/chaos)."""

import sys

from mrtr_ops.chaos.run import main

sys.exit(main())
