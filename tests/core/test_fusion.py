"""Score fusion (lsr_pyserini/fusion.py) and `python -m lsr_pyserini.fuse`: arithmetic and bad input."""
import pytest

from conftest import error_lines, run_tool
from lsr_pyserini.core.readers import InputError, read_run
from lsr_pyserini.core.fusion import fuse, interpolate, normalise

A = {"q1": [("d1", 10.0), ("d2", 8.0), ("d3", 6.0)], "q2": [("d1", 1.0), ("d4", 0.5)]}
B = {"q1": [("d3", 0.9), ("d1", 0.7), ("d5", 0.5)], "q2": [("d4", 3.0), ("d1", 2.0)]}


def write_run(path, run, tag="t"):
    path.write_text("".join(f"{q} Q0 {d} {r} {s} {tag}\n" for q, docs in run.items()
                            for r, (d, s) in enumerate(docs, start=1)))
    return path


def test_normalisations():
    assert normalise(A["q1"], "minmax") == {"d1": 1.0, "d2": 0.5, "d3": 0.0}
    z = normalise(A["q1"], "zscore")
    assert z["d2"] == pytest.approx(0.0) and z["d1"] == pytest.approx(-z["d3"]) and z["d1"] == pytest.approx(1.2247, abs=1e-4)
    assert normalise([("d", 3.0), ("e", 3.0)], "minmax") == {"d": 1.0, "e": 1.0}
    assert normalise([("d", 3.0)], "zscore") == {"d": 0.0}


def test_minmax_interpolation_counts_a_missing_document_as_the_run_minimum():
    fused = fuse([A, B], [0.5, 0.5], "minmax")
    q1 = dict(fused["q1"])
    # d1: 0.5*1 + 0.5*0.5; d3: 0.5*0 + 0.5*1; d2: 0.5*0.5 + (absent from B) 0; d5: 0 + 0.5*0
    assert q1 == pytest.approx({"d1": 0.75, "d3": 0.5, "d2": 0.25, "d5": 0.0})
    assert [d for d, _ in fused["q1"]] == ["d1", "d3", "d2", "d5"]
    assert dict(fuse([A, B], [1.0, 0.0])["q2"]) == pytest.approx({"d1": 1.0, "d4": 0.0})


def test_zscore_missing_document_gets_the_lowest_zscore():
    fused = dict(fuse([A, B], [1.0, 1.0], "zscore")["q1"])
    zb = normalise(B["q1"], "zscore")
    assert fused["d2"] == pytest.approx(normalise(A["q1"], "zscore")["d2"] + min(zb.values()))


def test_rrf():
    fused = dict(fuse([A, B], [1.0, 1.0], "rrf", rrf_k=60)["q1"])
    assert fused["d1"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["d5"] == pytest.approx(1 / 63)
    assert fused["d2"] == pytest.approx(1 / 62)


def test_interpolate_weight_is_the_rerankers_and_depth_cuts():
    both = interpolate(A, B, 1.0, depth=2)
    assert [d for d, _ in both["q1"]] == ["d3", "d1"]
    with pytest.raises(InputError, match="in \\[0, 1\\]"):
        interpolate(A, B, 1.5)


def test_runs_without_a_common_query_are_refused():
    with pytest.raises(InputError, match="no query in common"):
        fuse([A, {"q9": [("d1", 1.0)]}], names=["a.txt", "b.txt"])


def test_a_non_finite_weight_or_a_negative_rrf_k_is_refused():
    with pytest.raises(InputError, match="weights must be finite numbers, got 0.5, nan"):
        fuse([A, B], [0.5, float("nan")])
    with pytest.raises(InputError, match="rrf k must be a finite number >= 0, got -1"):
        fuse([A, B], method="rrf", rrf_k=-1)  # 1 / (k + rank) would divide by zero at rank 1


def test_fuse_cli(tmp_path):
    a, b, out = write_run(tmp_path / "a.txt", A), write_run(tmp_path / "b.txt", B), tmp_path / "f.txt"
    result = run_tool("fuse", "--run", a, "--run", b, "--weight", "0.5", "--weight", "0.5", "--output", out)
    assert result.returncode == 0, result.stderr
    assert read_run(str(out)) == {q: [(d, pytest.approx(s, abs=1e-6)) for d, s in r] for q, r in fuse([A, B]).items()}
    assert out.read_text().splitlines()[0] == "q1 Q0 d1 1 0.750000 fused-minmax"
    result = run_tool("fuse", "--run", a, "--run", b, "--method", "rrf", "--hits", "1", "--output", out, "--overwrite")
    assert result.returncode == 0 and len(out.read_text().splitlines()) == 2


def test_fuse_cli_bad_input(tmp_path):
    a = write_run(tmp_path / "a.txt", A)
    other = write_run(tmp_path / "other.txt", {"q7": [("d1", 1.0)]})
    bad, infinite = tmp_path / "bad.txt", tmp_path / "inf.txt"
    bad.write_text("q1 Q0 d1 1 high t\n")
    infinite.write_text("q1 Q0 d1 1 3.5 t\nq1 Q0 d2 2 -inf t\n")
    out = tmp_path / "f.txt"
    cases = [
        (("--run", a, "--run", other), "the runs have no query in common"),
        (("--run", a, "--run", bad), "bad.txt:1: score 'high' is not a number"),
        (("--run", a, "--run", infinite), "inf.txt:2: score '-inf' is not a finite number"),
        (("--run", a, "--run", a, "--weight", "1"), "1 --weight for 2 --run"),
        (("--run", a), "at least two --run"),
        (("--run", a, "--run", tmp_path / "none.txt"), "none.txt: no such file"),
    ]
    for args, message in cases:
        result = run_tool("fuse", *args, "--output", out)
        assert result.returncode == 2, result.stderr
        assert len(error_lines(result)) == 1 and message in error_lines(result)[0], result.stderr
        assert not out.exists()


def test_fuse_warns_about_queries_only_some_runs_have(tmp_path):
    a = write_run(tmp_path / "a.txt", A)
    b = write_run(tmp_path / "b.txt", {"q1": B["q1"]})
    result = run_tool("fuse", "--run", a, "--run", b, "--output", tmp_path / "f.txt")
    assert result.returncode == 0
    assert "warning: 1 of 2 queries are missing from some runs" in result.stderr
    assert set(read_run(str(tmp_path / "f.txt"))) == {"q1", "q2"}
