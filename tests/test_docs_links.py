"""Links in the documents a reader opens (README.md, BENCHMARKS.md, docs/*.md) lead somewhere
in a clone of the repository.

Every relative Markdown link or image (`[text](path)`, `![alt](path)`, `[id]: path`, and the
`href`/`src` of inline HTML) must name a file or directory that exists inside the repository;
an anchor (`#...`) is ignored. A path in a code span that climbs out of a document's directory
(`../...`) is held to the same rule: docs/ once pointed at `../shared/...` and `../seeds/...`,
which sit beside a development checkout and not in a clone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([ROOT / "README.md", ROOT / "BENCHMARKS.md", *(ROOT / "docs").glob("*.md")])

FENCE = re.compile(r"^ {0,3}(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.IGNORECASE)
EXTERNAL = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*:|//)")  # http:, https:, mailto:, ...


def lines_outside_fences(text: str) -> list[tuple[int, str]]:
    """(line number, line) for every line outside fenced code blocks."""
    out, fenced = [], None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if m and fenced is None:
            fenced = m.group(1)
        elif m and line.strip().startswith(fenced):
            fenced = None
        elif fenced is None:
            out.append((number, line))
    return out


def links(path: Path) -> list[tuple[int, str]]:
    """(line number, target) of every relative link in the document."""
    found = []
    for number, line in lines_outside_fences(path.read_text()):
        prose = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)  # a link in code is not one
        targets = [m.group(1) for m in INLINE.finditer(prose)] + [m.group(1) for m in HTML.finditer(prose)]
        ref = REFERENCE.match(prose)
        if ref:
            targets.append(ref.group(1))
        for target in targets:
            target = target.strip("<>")
            if not target or target.startswith("#") or EXTERNAL.match(target):
                continue
            found.append((number, target))
    return found


def climbing_code_paths(path: Path) -> list[tuple[int, str]]:
    """(line number, path) of every code span that starts with `../`."""
    found = []
    for number, line in lines_outside_fences(path.read_text()):
        for m in CODE_SPAN.finditer(line):
            span = m.group(2).strip()
            if span.startswith("../"):
                found.append((number, span.split()[0]))
    return found


def broken(document: Path, target: str) -> str | None:
    """Why `target`, as written in `document`, leads nowhere in a clone; None if it leads to a file."""
    relative = target.split("#", 1)[0].split("?", 1)[0]
    if not relative:
        return None
    if relative.startswith("/"):
        return "an absolute path"
    resolved = (document.parent / relative).resolve()
    if not resolved.is_relative_to(ROOT):
        return "outside the repository"
    if not resolved.exists():
        return "no such file in the repository"
    return None


def test_the_documents_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in DOCUMENTS}
    assert {"README.md", "BENCHMARKS.md", "docs/protocol.md"} <= names


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_to_a_file_of_the_repository(document):
    bad = [f"{document.relative_to(ROOT)}:{n}: {t} ({why})"
           for n, t in links(document) if (why := broken(document, t))]
    assert not bad, "links that lead nowhere in a clone:\n" + "\n".join(bad)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_path_in_code_climbs_out_of_the_repository(document):
    bad = [f"{document.relative_to(ROOT)}:{n}: {t} ({why})"
           for n, t in climbing_code_paths(document) if (why := broken(document, t))]
    assert not bad, ("paths that lead nowhere in a clone (name the source instead, or link its "
                     "public address):\n" + "\n".join(bad))


def test_the_checks_find_what_they_look_for(tmp_path):
    """The parsing itself: links in prose are found, links in code are not, anchors and
    external addresses are left alone."""
    doc = ROOT / "docs" / "_probe.md"  # never written: only its directory matters to `broken`
    text = "\n".join([
        "See [the protocol](protocol.md#encoding), ![plot](../benchmarks/allocations-vs-nodes.png),",
        "[gone](nothing-here.md), [up](../../elsewhere.md) and [web](https://example.org/x.md).",
        "`[not a link](nowhere.md)` and `../shared/reference/` in code; [anchor](#top).",
        "```",
        "[fenced](nowhere-either.md)",
        "```",
        "[ref]: ../README.md",
        '<img src="img/ui-overview.png"> <a href="missing.html">x</a>',
    ])
    probe = tmp_path / "probe.md"
    probe.write_text(text)
    found = links(probe)
    assert [t for _, t in found] == ["protocol.md#encoding", "../benchmarks/allocations-vs-nodes.png",
                                     "nothing-here.md", "../../elsewhere.md", "../README.md",
                                     "img/ui-overview.png", "missing.html"]
    verdicts = {t: broken(doc, t) for _, t in found}
    assert verdicts == {
        "protocol.md#encoding": None,
        "../benchmarks/allocations-vs-nodes.png": None,
        "nothing-here.md": "no such file in the repository",
        "../../elsewhere.md": "outside the repository",
        "img/ui-overview.png": None,
        "missing.html": "no such file in the repository",
        "../README.md": None,
    }
    assert [t for _, t in climbing_code_paths(probe)] == ["../shared/reference/"]
    assert broken(doc, "../shared/reference/") == "no such file in the repository"
