"""The README's figures are the regression files' expectations: every SciFact nDCG@10 in the family
table equals an expected value (nDCG@10) of the file its row names, and a figure labelled with a CPU
kind equals that kind's value where the file gives one per kind. No model runs."""
import re

import pytest
import yaml

from conftest import REPO

REGRESSIONS = REPO / "eval" / "regressions"
FIGURE = re.compile(r"\b0\.\d{4}\b(?:\s*\(((?:AMD|Intel) AVX(?:2|-512))\))?")  # 0.7027, or 0.7027 (AMD AVX2)


def file_kind(label: str) -> str:
    """The README's label (AMD AVX2, Intel AVX-512) -> the file's CPU kind (AMD-AVX2, Intel-AVX512)."""
    return label.replace(" ", "-").replace("AVX-512", "AVX512")
FILE = re.compile(r"`regress ([\w.+-]+\.yaml)`")


def family_rows(text: str) -> list[dict]:
    """The family table's rows as {column header: cell}."""
    lines = text.splitlines()
    start = next(number for number, line in enumerate(lines) if line.startswith("| family |"))
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        assert len(cells) == len(header), line
        rows.append(dict(zip(header, cells)))
    return rows


def ndcg_values(path) -> tuple[set[float], dict[str, set[float]]]:
    """A file's nDCG@10 expected values (each CPU kind's too) and, per CPU kind, its per-kind values."""
    values, per_kind = set(), {}
    for metrics in yaml.safe_load(path.read_text())["expected"].values():
        value = metrics.get("ndcg_cut_10", {}).get("value")
        if isinstance(value, dict):
            for kind, number in value.items():
                values.add(number)
                per_kind.setdefault(kind, set()).add(number)
        elif value is not None:
            values.add(value)
    return values, per_kind


def mismatches(text: str) -> list[str]:
    found = []
    rows = family_rows(text)
    assert len(rows) >= 10
    for row in rows:
        family, cell, files = row["family"], row["SciFact test nDCG@10"], FILE.findall(row["reproduced by"])
        figures = list(FIGURE.finditer(cell))
        if not figures:
            assert cell == "not measured" and not files, row  # a row without a figure names no file
            continue
        if not files:
            found.append(f"{family}: {cell!r} names no regression file")
            continue
        missing = [name for name in files if not (REGRESSIONS / name).is_file()]
        if missing:
            found += [f"{family}: {name} does not exist" for name in missing]
            continue
        values, per_kind = set(), {}
        for name in files:
            path = REGRESSIONS / name
            file_values, file_kinds = ndcg_values(path)
            values |= file_values
            for kind, numbers in file_kinds.items():
                per_kind.setdefault(kind, set()).update(numbers)
        for match in figures:
            figure, label = float(match.group().split()[0]), match.group(1)
            if label and figure not in per_kind.get(file_kind(label), set()):
                found.append(f"{family}: {figure} ({label}) is no {file_kind(label)} value of {', '.join(files)}")
            elif figure not in values:
                found.append(f"{family}: {figure} is no nDCG@10 expected by {', '.join(files)}")
    return found


def test_every_family_figure_is_its_regression_files_expectation():
    assert mismatches((REPO / "README.md").read_text()) == []


@pytest.mark.parametrize("change,message", [
    (("0.7375 (BM25 top 1000", "0.7376 (BM25 top 1000"), "0.7376 is no nDCG@10 expected by"),
    (("`regress scifact-bm25.yaml`", "-"), "names no regression file"),
    (("`regress scifact-bm25.yaml`", "`regress scifact-bm26.yaml`"), "scifact-bm26.yaml does not exist"),
    (("0.7027 (AMD AVX2)", "0.6981 (AMD AVX2)"), "0.6981 (AMD AVX2) is no AMD-AVX2 value of scifact-sparseembed.yaml"),
])
def test_a_wrong_figure_fails(change, message):
    """The check itself can fail: a README figure off by 0.0001, a row that names no file or a
    missing one, a CPU kind's figure under the other kind."""
    text = (REPO / "README.md").read_text()
    assert change[0] in text
    found = mismatches(text.replace(change[0], change[1], 1))
    assert len(found) == 1 and message in found[0], found


CI_TIER = sorted((REGRESSIONS / "ci").glob("*.yaml"))


@pytest.mark.parametrize("path", CI_TIER, ids=lambda path: path.name)
def test_each_ci_margin_is_larger_than_its_runs_tolerance(path):
    """A margin over another run (above: {RUN: M}, M >= 0) separates working from broken only when
    it is larger than the tolerance the value is allowed: otherwise a run the tolerance admits may
    stand no higher than the run it should beat. Negative margins are floors ("at most this far
    below BM25"), which the file's header explains."""
    narrow = []
    for run, metrics in yaml.safe_load(path.read_text())["expected"].items():
        for metric, expectation in metrics.items():
            for other, margin in expectation.get("above", {}).items():
                if margin >= 0 and not margin > expectation.get("tolerance", 0.0):
                    narrow.append(f"{run} {metric}: margin {margin} over {other} "
                                  f"<= tolerance {expectation.get('tolerance', 0.0)}")
    assert narrow == []
