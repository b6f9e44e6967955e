"""`python -m mrtr_ops.upgrade`: the rolling upgrade (scripts/rolling-upgrade)."""

import sys

from mrtr_ops.upgrade.rolling import main

sys.exit(main())
