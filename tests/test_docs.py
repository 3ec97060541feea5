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


def test_docs_readme_lists_every_page_with_one_line():
    """No page is reachable only from a table: docs/README.md lists each, with one line."""
    index = (REPO / "docs" / "README.md").read_text()
    rows = {match.group(1): match.group(2) for match in re.finditer(r"^\| \[([\w.-]+\.md)\]\(\1\) \| (.+) \|$",
                                                                     index, re.MULTILINE)}
    pages = sorted(page.name for page in (REPO / "docs").glob("*.md") if page.name != "README.md")
    assert sorted(rows) == pages, set(pages) ^ set(rows)
    assert all(line.strip() for line in rows.values())


def test_python_m_lsr_pyserini_lists_every_command_with_one_line():
    """`python -m lsr_pyserini` printed nothing; it lists each command (a module with a __main__
    guard, or a package with __main__.py) once, each with its docstring's first line."""
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "lsr_pyserini"], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0 and not result.stderr, result.stderr
    listed = dict(re.findall(r"^  (\w+) +(\S.*)$", result.stdout, re.MULTILINE))
    package = REPO / "lsr_pyserini"
    commands = {path.stem for path in package.glob("*.py") if 'if __name__ == "__main__":' in path.read_text()
                and path.stem != "__main__"} | {path.parent.name for path in package.glob("*/__main__.py")}
    assert set(listed) == commands and {"encode", "lucene", "serve", "train", "demo"} <= commands, listed
    assert listed["encode"] == "Encode a corpus or queries with a sparse encoder preset into files Lucene reads"


PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
READ_PATH = re.compile(r"""["']((?:indexes|stores|models|runs)/[\w./-]+)["']""")


def test_every_folder_a_python_example_reads_is_built_by_a_command_of_the_docs():
    """A path of the checkout's output folders that an example opens (`store="indexes/..."`) is the
    `--output` or `--index` of a command some page or the README gives (docs/pyterrier.md used a
    store no command built)."""
    pages = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
    texts = {page: page.read_text() for page in pages}
    built = {match.group(1) for text in texts.values()
             for match in re.finditer(r"--(?:output|index)[ =]([\w./-]+)", text)}
    missing = [f"{page.relative_to(REPO)}: {path}" for page, text in texts.items()
               for block in PYTHON_BLOCK.findall(text) for path in READ_PATH.findall(block)
               if path not in built]
    assert not missing, "give the command that builds it:\n" + "\n".join(missing)
