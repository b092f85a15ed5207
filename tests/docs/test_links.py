"""Every relative link in the documentation leads to a file, a directory or a heading."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from tests.docs.markdown_links import broken_links, github_slug, page_anchors, page_links

ROOT: Final = Path(__file__).parents[2]


def documentation_pages() -> list[Path]:
    """README.md, docs/*.md, benchmarks/README.md and every README.md under src/."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    pages += [ROOT / "benchmarks" / "README.md", *sorted((ROOT / "src").rglob("README.md"))]
    return [page for page in pages if page.is_file()]


def test_every_relative_link_resolves() -> None:
    broken = broken_links(documentation_pages(), ROOT)
    if broken:
        pytest.fail(f"{len(broken)} broken links:\n" + "\n".join(broken), pytrace=False)


def _write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_links_outside_code_are_found_with_their_lines() -> None:
    text = (
        "See [the guide](docs/guide.md) and ![a chart](img/chart.png).\n"
        "`[not a link](inline.md)` and [web](https://example.com), [mail](mailto:a@b.c)\n"
        "```python\n"
        "x = [1](fenced.md)\n"
        "```\n"
        '[titled](other.md "Title") [anchor](#usage) [both](a.md#part)\n'
    )
    assert [(link.line, link.target) for link in page_links(text)] == [
        (1, "docs/guide.md"),
        (1, "img/chart.png"),
        (6, "other.md"),
        (6, "#usage"),
        (6, "a.md#part"),
    ]


@pytest.mark.parametrize(
    ("heading", "slug"),
    [
        ("Quick start", "quick-start"),
        (
            "Oplog files to change events: `shardstream replay`",
            "oplog-files-to-change-events-shardstream-replay",
        ),
        ("What's new?", "whats-new"),
        ("snake_case and kebab-case", "snake_case-and-kebab-case"),
        ("A  B", "a--b"),
        ("Ünïcode Überschrift", "ünïcode-überschrift"),
    ],
)
def test_github_slug(heading: str, slug: str) -> None:
    assert github_slug(heading, {}) == slug


def test_repeated_headings_are_numbered_as_github_numbers_them() -> None:
    text = "# Usage\n## Usage\n### Usage\n## Usage 1\n```text\n# Usage\n```\n"
    assert page_anchors(text) == {"usage", "usage-1", "usage-2", "usage-1-1"}


def test_headings_with_links_and_html_anchors() -> None:
    text = '## See [the design](design.md) ##\n<a id="custom-spot"></a>\n'
    assert page_anchors(text) == {"see-the-design", "custom-spot"}


def test_broken_links_are_listed_with_file_line_and_target(tmp_path: Path) -> None:
    _write(tmp_path, "docs/guide.md", "# Guide\n## Setting up\n")
    _write(tmp_path, "src/pkg/README.md", "[up](/docs/guide.md#setting-up) [gone](../nowhere.md)\n")
    page = _write(
        tmp_path,
        "README.md",
        "# Top\n"
        "[ok](docs/guide.md) [dir](docs) [anchor](docs/guide.md#setting-up) [self](#top)\n"
        "[missing](docs/missing.md)\n"
        "[bad anchor](docs/guide.md#tear-down) [bad self](#bottom)\n"
        "[spaced](docs/My%20Guide.md)\n",
    )
    pages = [page, tmp_path / "src/pkg/README.md"]
    assert broken_links(pages, tmp_path) == [
        "README.md:3 -> docs/missing.md (no such file or directory)",
        "README.md:4 -> docs/guide.md#tear-down (no heading with the anchor #tear-down)",
        "README.md:4 -> #bottom (no heading with the anchor #bottom)",
        "README.md:5 -> docs/My%20Guide.md (no such file or directory)",
        "src/pkg/README.md:1 -> ../nowhere.md (no such file or directory)",
    ]
    _write(tmp_path, "docs/My Guide.md", "")
    assert "README.md:5" not in "\n".join(broken_links(pages, tmp_path))


def test_anchors_into_non_markdown_targets_are_not_checked(tmp_path: Path) -> None:
    _write(tmp_path, "code.py", "x = 1\n")
    page = _write(tmp_path, "README.md", "[line](code.py#L1)\n")
    assert broken_links([page], tmp_path) == []
