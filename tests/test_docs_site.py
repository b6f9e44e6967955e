"""The documentation site builds with --strict, lists every page, shows every picture; the README stays a front page.

`scripts/test` builds the site too; this is the same check in the inner loop, in process, so a
moved section that left a dangling link fails in seconds rather than at the end of CI.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from mkdocs.commands.build import build
from mkdocs.config import load_config

from tests.support.paths import ROOT

DOCS = ROOT / "docs"
README_MAX_LINES = 250
"""Issue 23 section 4: the README is a front page; the manual is the site."""


def _nav_pages(entries: object) -> set[str]:
    """Every page file named anywhere in mkdocs.yml's nested `nav`."""
    if isinstance(entries, str):
        return {entries}
    if isinstance(entries, list):
        return set().union(*(_nav_pages(entry) for entry in entries))
    if isinstance(entries, dict):
        return set().union(*(_nav_pages(value) for value in entries.values()))
    return set()


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move sections to docs/"


def test_nav_lists_every_page_and_only_pages_that_exist() -> None:
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert pages - nav == set(), "pages missing from mkdocs.yml's nav"
    assert nav - pages == set(), "nav entries without a page"


def test_every_image_under_docs_is_shown_on_a_page() -> None:
    shown = {
        (page.parent / image).resolve().relative_to(DOCS.resolve()).as_posix()
        for page in DOCS.rglob("*.md")
        for image in re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", page.read_text())
    }  # each as its page names it, relative to that page
    images = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*") if path.suffix in {".png", ".svg", ".jpg"}}
    assert images - shown == set(), "images under docs/ that no page shows"


def test_the_site_builds_strictly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken link or anchor, a link out of docs/ or an orphan page is a warning, and --strict fails on it."""
    monkeypatch.chdir(ROOT)  # the home page's README snippets are found from the checkout
    monkeypatch.setenv("NO_MKDOCS_2_WARNING", "1")
    config = load_config(str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(tmp_path / "site"))
    build(config)
    assert (tmp_path / "site" / "index.html").is_file()
    home = (tmp_path / "site" / "index.html").read_text()
    for section in ("the-two-commands", "try-it", "the-picture", "where-to-read-on"):
        assert f'id="{section}"' in home, f"home page lacks {section}: a README snippet gone, or a fence left open"
    picture = re.search(r"<pre[^>]*>(?:(?!</pre>).)*any instance can serve any round", home, re.S)
    assert picture is not None, "the picture is not a code block on the home page (a fence left open?)"
