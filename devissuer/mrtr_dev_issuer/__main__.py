"""`python -m mrtr_dev_issuer new DIR | mint SUBJECT`: create the key pair, or print a token."""

import sys

from mrtr_dev_issuer.issuer import main

sys.exit(main())
