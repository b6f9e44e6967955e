"""The client drivers: small programs on the official clients, each printing one JSON record per feature.

The Node drivers (`*.mjs`) run from the npm tree `scripts/interop` installs
(`package.json`, `package-lock.json`); `py_clients.py` runs by path in the
workspace's environment or in the FastMCP-tasks one (`fastmcp-tasks.txt`).
"""

from pathlib import Path

DRIVERS_DIR = Path(__file__).resolve().parent
