"""Every JSON/CSV output is byte-identical to the committed fixtures (tests/golden/).

The fixtures were written by ``tests/golden/make_golden.py`` on the code before a refactoring
that must not change any output; a difference here is a changed number, name or ordering.
Rewrite a fixture only when an output is meant to change, and say why in the commit.
"""

from __future__ import annotations

import json

import pytest

from tests.golden.make_golden import SHARED, Case, cases, fixture, path_of, run

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_output_is_unchanged(case: Case) -> None:
    if case.shared() and not SHARED.exists():
        pytest.skip(f"{SHARED} not present (shared/ is not beside this checkout)")
    want = json.loads(path_of(case).read_text())
    got = fixture(case, run(case))
    assert got["exit_code"] == want["exit_code"]
    if want["stored"] == "text":
        assert got.get("output") == want["output"]
    else:
        assert (got.get("chars"), got.get("sha256")) == (want["chars"], want["sha256"])


def test_every_case_has_a_fixture_and_no_absolute_path() -> None:
    from tests.golden.make_golden import GOLDEN, ROOT

    names = {c.name for c in CASES}
    stored = {p.stem for p in GOLDEN.glob("*.json")}
    assert names == stored
    for p in GOLDEN.glob("*.json"):
        text = p.read_text()
        assert str(ROOT) not in text and str(SHARED) not in text, p.name
