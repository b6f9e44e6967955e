"""`python -m mrtr_ops.swarm`: the rolling upgrade on Docker Swarm (scripts/swarm-e2e)."""

import sys

from mrtr_ops.swarm.walkthrough import main

sys.exit(main())
