"""The user's pages say what they mean: no page refers to the tracker ("issue 15") for its content."""
import re

from conftest import REPO

ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE)  # "issue 14", "Issue\n16", "issue #3"


def test_no_page_speaks_of_an_issue_number():
    pages = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
    assert len(pages) > 5
    found = []
    for page in pages:
        text = page.read_text()
        for match in ISSUE_NUMBER.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{page.relative_to(REPO)}:{line}: {' '.join(match.group().split())!r}")
    assert not found, "say what the issue asked for instead:\n" + "\n".join(found)


MACHINE_PATH = re.compile(r"""(?:default\s*=\s*|Path\()\s*["'](/(?:work|home|root|mnt|data|scratch)\b[^"']*)["']""")


def test_benchmarks_take_their_paths_from_flags_or_the_checkout():
    """No benchmark defaults to a folder of one machine (its data and work folders are flags, or
    found from the checkout: ../shared/data)."""
    scripts = sorted((REPO / "benchmarks").glob("*.py")) + [REPO / "lsr_pyserini" / "bench.py"]
    assert len(scripts) > 10
    found = [f"{script.relative_to(REPO)}: {match.group(1)}" for script in scripts
             for match in MACHINE_PATH.finditer(script.read_text())]
    assert not found, "take it from a flag:\n" + "\n".join(found)
