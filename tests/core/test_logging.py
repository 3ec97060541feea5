"""Library modules log; commands show the records as `warning:` lines on stderr, none with --quiet."""
import logging

from conftest import run_tool
from lsr_pyserini.core import cli
from lsr_pyserini.core.readers import checked_corpus

EMPTY_TEXTS = '{"_id": "a", "text": "vitamin"}\n{"_id": "b", "text": ""}\n{"_id": "c", "title": ""}\n'
EMPTY_WARNING = "2 of 3 documents have empty text; they are encoded anyway"


def warning_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_a_library_warning_is_a_log_record_and_not_printed(tmp_path, caplog, capsys):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(EMPTY_TEXTS)
    logging.getLogger(cli.PACKAGE_LOGGER).removeHandler(cli._MESSAGES)  # as a library user has it
    with caplog.at_level(logging.WARNING):
        checked_corpus(str(corpus))
    [record] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert record.name == "lsr_pyserini.core.readers" and record.getMessage() == EMPTY_WARNING
    assert "warning:" not in capsys.readouterr().err


def test_a_command_shows_records_as_warning_lines_and_quiet_hides_them(capsys):
    library = logging.getLogger("lsr_pyserini.core.readers")
    try:
        cli.quiet_messages(False)
        library.warning("something to know")
        library.info("a note")
        cli.warn("the command's own")
        assert capsys.readouterr().err.splitlines() == ["warning: something to know", "a note",
                                                        "warning: the command's own"]
        cli.quiet_messages(True)
        library.warning("something to know")
        cli.warn("the command's own")
        library.info("a result")
        assert capsys.readouterr().err.splitlines() == ["a result"]
    finally:
        cli.quiet_messages(False)


def test_quiet_silences_a_library_warning_a_command_shows_without_it(tiny_preset, tmp_path):
    """`encode corpus` (the warning comes from core/readers.py) and `prepare corpus` (its own)."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(EMPTY_TEXTS)
    shown = run_tool("encode", "corpus", "--encoder", tiny_preset, "--input", corpus, "--output", tmp_path / "a")
    assert shown.returncode == 0, shown.stderr
    assert warning_lines(shown.stderr) == [f"warning: {EMPTY_WARNING}"]
    quiet = run_tool("encode", "corpus", "--encoder", tiny_preset, "--input", corpus, "--output", tmp_path / "b",
                     "--quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert warning_lines(quiet.stderr) == [] and (tmp_path / "b").is_dir(), quiet.stderr
    shown = run_tool("prepare", "corpus", "--input", corpus, "--output", tmp_path / "p")
    assert shown.returncode == 0 and warning_lines(shown.stderr) == ["warning: 2 of 3 documents have empty text"]
    quiet = run_tool("prepare", "corpus", "--input", corpus, "--output", tmp_path / "q", "--quiet")
    assert quiet.returncode == 0 and warning_lines(quiet.stderr) == [], quiet.stderr


def test_quiet_help_says_it_silences_warnings():
    for tool, side in (("encode", "corpus"), ("prepare", "corpus"), ("train", "splade")):
        result = run_tool(tool, side, "--help")
        assert result.returncode == 0 and "no warnings" in " ".join(result.stdout.split()), (tool, result.stderr)
