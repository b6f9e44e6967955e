"""The checkout the tests run in (tests live at `<root>/tests/...`)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "deploy" / "kubernetes"
