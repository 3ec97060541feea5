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
