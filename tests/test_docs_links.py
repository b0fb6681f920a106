"""The README and docs/ hold together: every relative link and anchor resolves, the README
fits on a screen or two, nothing points at a document outside the repository, and the
README's quick start runs and prints what the README shows."""

from __future__ import annotations

import re
import shlex
import unicodedata
from pathlib import Path

import pytest

from tests.conftest import ROOT, cli

README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 300

_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target); the target ends at whitespace (a title may follow) or ')'
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REF_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HTML_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out, fenced = [], False
    for no, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((no, line))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its rendered text (code spans, links and emphasis
    reduced to their text), lowercased, punctuation dropped (letters, digits, marks, '_',
    '-' and spaces stay), each space a '-'."""
    text = _INLINE_CODE.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"(\*\*|\*|__)(.+?)\1", r"\2", text)  # emphasis
    text = text.strip().lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor a page offers: its headings' slugs (a repeated slug gets -1, -2, ... as
    on GitHub) and explicit ``<a id=...>`` / ``<a name=...>`` targets."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _, line in _prose_lines(path.read_text(encoding="utf-8")):
        found.update(_HTML_ID.findall(line))
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        found.add(base if n == 0 else f"{base}-{n}")
        seen[base] = n + 1
    return found


def links(path: Path) -> list[tuple[int, str]]:
    """(line, target) of every link in the page's prose (code spans and blocks left out)."""
    out = []
    for no, line in _prose_lines(path.read_text(encoding="utf-8")):
        prose = _INLINE_CODE.sub("", line)
        out += [(no, t) for t in _LINK.findall(prose)]
        m = _REF_DEF.match(prose)
        if m:
            out.append((no, m.group(1)))
    return out


def broken_links(files: list[Path], root: Path = ROOT) -> list[str]:
    """What does not resolve, as ``file:line: target (why)``, files named from ``root``."""
    problems = []
    cache: dict[Path, set[str]] = {}
    for page in files:
        for no, target in links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # http:, mailto:, ...
                continue
            where = f"{page.relative_to(root)}:{no}: {target}"
            file_part, _, anchor = target.partition("#")
            dest = (page.parent / file_part).resolve() if file_part else page
            if not dest.exists():
                problems.append(f"{where} (no such file)")
                continue
            if not anchor:
                continue
            if dest.suffix != ".md":
                problems.append(f"{where} (an anchor into a file that is not Markdown)")
                continue
            if dest not in cache:
                cache[dest] = anchors(dest)
            if anchor not in cache[dest]:
                problems.append(f"{where} (no heading or anchor '{anchor}' there)")
    return problems


def test_slug_follows_githubs_rules() -> None:
    assert slug("## rocprofv3 (ROCm 6.2 – 7.x)".lstrip("# ")) == "rocprofv3-rocm-62--7x"
    assert slug("7. Hardware peaks (`tracelens.core.hardware`, `tracelens gpus`)") == \
        "7-hardware-peaks-tracelenscorehardware-tracelens-gpus"
    assert slug("Where a collective's facts live, by PyTorch generation") == \
        "where-a-collectives-facts-live-by-pytorch-generation"
    assert slug("`summarize --format json`") == "summarize---format-json"
    assert slug("Idle breakdown: why the device is idle") == "idle-breakdown-why-the-device-is-idle"


def test_the_checker_finds_a_broken_link_and_anchor(tmp_path) -> None:
    """The checker itself can fail: a missing file, a missing anchor, a missing anchor in
    the same page; a link in code is not a link."""
    page = tmp_path / "a.md"
    (tmp_path / "b.md").write_text("# Title\n\n## Real part\n")
    page.write_text("# A\n\n[x](b.md#real-part) [y](b.md#gone) [z](nothere.md) [w](#a)\n"
                    "[v](#missing) `[c](code.md)`\n\n```\n[d](fenced.md)\n```\n")
    problems = broken_links([page], root=tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "b.md#gone (no heading or anchor 'gone' there)",
        "nothere.md (no such file)",
        "#missing (no heading or anchor 'missing' there)"]


def test_every_relative_link_and_anchor_resolves() -> None:
    problems = broken_links(markdown_files())
    assert not problems, "\n".join(problems)


def test_docs_index_lists_every_page() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    listed = {t.partition("#")[0] for _, t in links(DOCS / "index.md")}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.name != "index.md"
               and p.name not in listed]
    assert not missing, f"docs/index.md does not list {missing}"
    assert "docs/index.md" in {t.partition("#")[0] for _, t in links(README)} and index


def test_readme_fits_on_a_screen_or_two() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES})"


_DESIGN = re.compile(r"DESIGN(\s+§|\.md)")
# "README, \"Many hosts\"", "README §Cost model", "README \"What the numbers mean\"": a README
# section by name (the README is short now; its sections moved to docs/). Not the oracles'.
_README_SECTION = re.compile(r"(?<!oracle )(?<!oracles/)README(,|:)?\s+(§|\"|“)")


def _hits(pattern: re.Pattern[str], files: list[Path]) -> list[str]:
    """``file:line`` of each match, a match across a line break included."""
    out = []
    for p in files:
        text = p.read_text(encoding="utf-8")
        out += [f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
                for m in pattern.finditer(text)]
    return out


def test_no_reference_to_a_document_outside_the_repository() -> None:
    """DESIGN.md is not in the repository: its sections live in docs/ now."""
    templates = sorted(p for p in (ROOT / "reports" / "templates").rglob("*") if p.is_file())
    code = sorted(p for d in ("tracelens", "parsers", "reports", "tracelens_dev", "tests",
                              "benchmarks") for p in (ROOT / d).rglob("*")
                  if p.suffix in (".py", ".toml", ".c") and p.name != "test_docs_links.py")
    hits = _hits(_DESIGN, [*markdown_files(), *templates, *code])
    assert not hits, f"references to DESIGN: {hits}"


def test_docs_name_no_readme_section() -> None:
    """The docs link to the page that holds a definition, not to a README section by name."""
    templates = sorted(p for p in (ROOT / "reports" / "templates").rglob("*") if p.is_file())
    hits = _hits(_README_SECTION, [*sorted(DOCS.glob("*.md")), *templates])
    assert not hits, f"README sections named instead of linked: {hits}"


def _between(text: str, marker: str) -> str:
    start, end = f"<!-- {marker} -->", f"<!-- /{marker} -->"
    assert text.count(start) == 1 and text.count(end) == 1, f"README needs one {start} ... {end}"
    return text.split(start, 1)[1].split(end, 1)[0]


def quickstart_command() -> list[str]:
    """The tracelens command of the README's quick start (the last `&&` part of the first
    command in the quick-start block), as arguments."""
    block = _between(README.read_text(encoding="utf-8"), "quickstart")
    commands = [line.strip() for line in block.splitlines()
                if "tracelens " in line and not line.lstrip().startswith(("#", "```"))]
    assert commands, "no tracelens command between the quick-start markers"
    last = commands[0].split("&&")[-1].strip()
    args = shlex.split(last)
    assert args[0] == "tracelens", last
    return args[1:]


def _squeeze(line: str) -> str:
    return " ".join(line.split())


def test_quickstart_runs_and_prints_what_the_readme_shows(monkeypatch) -> None:
    """The quick start's command exits 0 on the bundled sample, and every line of the
    README's output excerpt (whitespace aside; a line "..." marks a cut) is a line it
    printed. When the output changes on purpose, run the quick-start command and paste the
    new lines between the quickstart-output markers."""
    args = quickstart_command()
    assert any((ROOT / a).exists() for a in args), f"the quick start names no bundled file: {args}"
    monkeypatch.chdir(ROOT)
    res = cli(*args)
    assert res.returncode == 0, res.stderr
    printed = {_squeeze(line) for line in res.stdout.splitlines()}
    excerpt = _between(README.read_text(encoding="utf-8"), "quickstart-output")
    shown = [_squeeze(line) for line in excerpt.splitlines()
             if line.strip() and not line.strip().startswith("```") and line.strip() != "..."]
    assert len(shown) >= 5, "the README shows no output excerpt"
    missing = [line for line in shown if line not in printed]
    assert not missing, f"README excerpt lines the quick start did not print: {missing}"


def test_readme_test_command_is_ci_s() -> None:
    """The quick start's second command is exactly what .ci/run runs (tests/test_repo.py
    checks the line is in the README; here: inside the quick-start block)."""
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in _between(README.read_text(encoding="utf-8"), "quickstart")


@pytest.mark.parametrize("page", [p.name for p in sorted(DOCS.glob("*.md"))])
def test_each_doc_page_has_a_title(page: str) -> None:
    first = (DOCS / page).read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("# "), f"docs/{page} starts without a '# ' title"
