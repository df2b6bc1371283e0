"""Every link and citation README.md and docs/ make that a reader can follow leads somewhere
(issue 60): a Markdown link's file and anchor, a repository path named in backticks, a section
cited by its title (`docs/gke.md`, "The elastic lint"), and no source outside the repository
that a user cannot read (the maintainers' notes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TOP = re.compile(r"^(?:(?:cli/elastix|trainer/elastix_trainer|tests|bench|\.ci)/|"
                 r"docs/(?:ci/|examples/)?[\w.-]+$)")
"""A backticked word that is a path in this repository (other repositories' paths, cited
beside their names, share ``docs/`` or ``templates/``: one level under docs/ is elastix's)."""
_EXTS = (".md", ".py", ".yaml", ".yml", ".json", ".sh", ".j2", ".toml", ".cjs", ".xsd", ".txt")

_LINK = re.compile(r"(?<!!)\[[^\]]+\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]+)`")
_CITED = re.compile(r"`((?:docs/[\w./-]+|README)\.md)`,?\s+\"([^\"]+)\"")
_FENCE = re.compile(r"^\s*```")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(path: Path) -> str:
    """The file without its fenced code blocks (commands and output, not citations)."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def slug(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    title = re.sub(r"[`*_]", "", title.strip().lower())
    return re.sub(r"[^\w\- ]", "", title).replace(" ", "-")


def headings(path: Path) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^#+\s+(.*?)\s*$", _prose(path), re.M)]


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_every_markdown_link_has_its_file_and_anchor(doc):
    for target in _LINK.findall(_prose(doc)):
        if re.match(r"[a-z]+:", target):
            assert target.startswith("https://"), (doc, target)
            continue
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        assert dest.exists(), f"{_rel(doc)}: {target}: no such file"
        if anchor:
            assert anchor in {slug(h) for h in headings(dest)}, \
                f"{_rel(doc)}: {target}: no heading with that anchor in {_rel(dest)}"


def _paths(text: str) -> list[str]:
    out = []
    for code in _CODE.findall(text):
        word = code.split()[0] if code.split() else ""
        word = re.sub(r"[:@].*$", "", word).rstrip(".,;)")  # file:L12, file@commit
        if not TOP.match(word) or re.search(r"[<>{}$*]|\.\.\.", word):
            continue
        name = word.rstrip("/").rsplit("/", 1)[-1]
        if word.endswith("/") or name.endswith(_EXTS) or "." not in name:  # not module.attr
            out.append(word)
    return out


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_every_repository_path_named_exists(doc):
    missing = sorted({p for p in _paths(_prose(doc)) if not (ROOT / p).exists()})
    assert missing == [], f"{_rel(doc)} names paths this repository lacks: {missing}"


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_every_section_cited_by_its_title_is_there(doc):
    text = " ".join(_prose(doc).split())
    for file, title in _CITED.findall(text):
        dest = ROOT / (file if file != "README.md" else "README.md")
        assert dest.exists(), (doc, file)
        titles = [" ".join(h.replace("`", "").split()).lower() for h in headings(dest)]
        assert any(t.startswith(title.lower()) for t in titles), \
            f"{_rel(doc)} cites {file}, \"{title}\": no such section"


@pytest.mark.parametrize("doc", DOCS, ids=_rel)
def test_no_doc_cites_a_source_users_do_not_have(doc):
    # the maintainers' notes (reference/, shared/) are not in the repository: a gate's source
    # is a file here or a public URL with a version
    text = doc.read_text(encoding="utf-8")
    found = re.findall(r"(?<![\w/.])(?:shared/reference/|reference/[\w-]+\.md|"
                       r"anchors-2026-[\d-]+\.md|neighbours-2026-[\d-]+\.md)", text)
    assert found == [], f"{_rel(doc)} cites {found}"


def test_the_checks_catch_what_they_look_for(tmp_path):
    # a dead anchor, a missing path and a missing section are each found
    doc = tmp_path / "d.md"
    doc.write_text("# Title here\n\nSee [x](#nope) and `docs/nope.md`, \"No Such\".\n")
    assert "title-here" in {slug(h) for h in headings(doc)}
    assert _LINK.findall(_prose(doc)) == ["#nope"]
    assert _paths(_prose(doc)) == ["docs/nope.md"]
    assert _CITED.findall(_prose(doc)) == [("docs/nope.md", "No Such")]
