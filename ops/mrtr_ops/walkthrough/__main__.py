"""`python -m mrtr_ops.walkthrough`: the walkthrough (scripts/walkthrough)."""

import sys

from mrtr_ops.walkthrough.run import main

sys.exit(main())
