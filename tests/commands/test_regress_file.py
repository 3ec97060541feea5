"""The regression file: what `load_regression` refuses (exit 2, one line naming the file and the key),
margins over other runs and floors, and efficiency expectations read from `evaluate --json`."""
import json
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_tool
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.evaluation import EFFICIENCY_FIGURES
from lsr_pyserini.commands.regress.run import check_expectations, load_regression, read_efficiency

REGRESSION_FILES = sorted((REPO / "eval" / "regressions").glob("*.yaml")) + sorted(
    (REPO / "eval" / "regressions" / "ci").glob("*.yaml")) + [REPO / "lsr_pyserini" / "sample" / "sample-splade-tiny.yaml"]


@pytest.mark.parametrize("path", REGRESSION_FILES, ids=lambda path: path.name)
def test_every_shipped_file_validates(path):
    spec = load_regression(str(path))
    assert spec["expected"] and set(spec["expected"]) == set(spec["runs"])
    # a file that trains states the thread count of its training steps (load_regression checks
    # that each training step passes it)
    trains = any(step.split()[0] in ("train", "adapt") or step.startswith("ssr fit") for step in spec["steps"])
    assert ("train_threads" in spec) == trains, path


def valid_spec() -> dict:
    return {
        "collection": "tiny",
        "qrels": "{data}/qrels.test.trec",
        "steps": ["fuse --run {data}/run.good.txt --run {data}/run.bad.txt --output {work}/run.fused.txt"],
        "runs": {"good": "{data}/run.good.txt", "fused": "{work}/run.fused.txt"},
        "expected": {"good": {"ndcg_cut_10": {"value": 1.0, "tolerance": 0.001}},
                     "fused": {"ndcg_cut_10": {"at_least": 0.5, "above": {"good": -0.1}}}},
        "efficiency": {"store": {"file": "{work}/efficiency.json",
                                 "expected": {"store_bytes_per_document": {"at_most": 100}}}},
    }


def setter(*keys, value=None, delete=False):
    """A change to the valid spec: set (or delete) the value at spec[keys[0]][keys[1]]..."""
    def change(spec):
        holder = spec
        for key in keys[:-1]:
            holder = holder[key]
        if delete:
            del holder[keys[-1]]
        else:
            holder[keys[-1]] = value
    return change


REFUSALS = [  # (change, what the one error line must say after the file's name)
    (setter("expect", value={"good": {}}), "unknown key 'expect'"),
    (setter("expected", delete=True), "missing required key 'expected'"),
    (setter("expected", value=None), "expected: must be a non-empty mapping, not None"),
    (setter("expected", value={}), "expected: must be a non-empty mapping, not {}"),
    (setter("expected", "good", "ndcg_cut_10", value=0.5), "expected.good.ndcg_cut_10: must be a non-empty mapping such as"),
    (setter("expected", "good", "ndcg_cut_10", "tolerence", value=0.1),
     "expected.good.ndcg_cut_10: unknown key 'tolerence' (allowed: value, tolerance, tolerance_elsewhere, at_least, above)"),
    (setter("expected", "good", "ndcg_cut_10", "at_least", value=0.5),
     "expected.good.ndcg_cut_10: give exactly one of value, at_least"),
    (setter("expected", "fused", "ndcg_cut_10", "tolerance", value=0.1), "expected.fused.ndcg_cut_10.tolerance: needs 'value'"),
    (setter("expected", "good", "ndcg@10", value={"value": 1.0}), "expected.good: unknown metric 'ndcg@10' (known: ndcg_cut_10,"),
    (setter("expected", "good", "ndcg_cut_10", "tolerance", value="0.01"),
     "expected.good.ndcg_cut_10.tolerance: must be a non-negative number, not '0.01'"),
    (setter("expected", "good", "ndcg_cut_10", "tolerance", value=-0.01),
     "expected.good.ndcg_cut_10.tolerance: must be a non-negative number, not -0.01"),
    (setter("expected", "good", "ndcg_cut_10", "value", value=True), "expected.good.ndcg_cut_10.value: must be a number, not True"),
    (setter("expected", "good", "ndcg_cut_10", "value", value={"AMD-AVX2": 0.7, "AVX512": 0.69}),
     "expected.good.ndcg_cut_10.value: unknown CPU kind 'AVX512' (known: AMD-DEFAULT, AMD-AVX2, AMD-AVX512,"),
    (setter("expected", "good", "ndcg_cut_10", "value", value={"AMD-AVX2": "0.7"}),
     "expected.good.ndcg_cut_10.value.AMD-AVX2: must be a number, not '0.7'"),
    (setter("expected", "good", "ndcg_cut_10", "value", value={}),
     "expected.good.ndcg_cut_10.value: must be a non-empty mapping, not {}"),
    (setter("runs", "extra", value="{work}/run.extra.txt"), "runs.extra: has no expectations under expected"),
    (setter("expected", "ghost", value={"ndcg_cut_10": {"value": 0.5}}), "expected.ghost: is not a run listed under runs"),
    (setter("expected", "fused", "ndcg_cut_10", "above", value={"ghost": 0.01}),
     "expected.fused.ndcg_cut_10.above.ghost: is not a run listed under runs"),
    (setter("expected", "fused", "ndcg_cut_10", "above", value={"fused": 0.01}),
     "expected.fused.ndcg_cut_10.above.fused: is the run itself"),
    (setter("expected", "fused", "ndcg_cut_10", "above", value={}), "expected.fused.ndcg_cut_10.above: must be a non-empty mapping"),
    (setter("steps", value="fuse --run a --run b"), "steps: must be a non-empty list, not 'fuse --run a --run b'"),
    (setter("steps", value=["fuse --run a", {"fuse": "--run b"}]), "steps[2]: must be a string, not {'fuse': '--run b'}"),
    (setter("steps", value=["pyserini.search.lucene --index x"]), "steps[1]: 'pyserini.search.lucene --index x' must start with one of"),
    (setter("runs", "efficiency", value="{work}/run.txt"), "runs.efficiency: reserved name"),
    (setter("runs", "good", value="{wrk}/run.txt"),
     "runs.good: unknown placeholder {wrk} (known: {data}, {work}, {threads}, {train_threads})"),
    (setter("runs", "environment", value="{work}/run.txt"), "runs.environment: reserved name"),
    (setter("train_threads", value=0), "train_threads: must be a positive integer, not 0"),
    (setter("train_threads", value="1"), "train_threads: must be a positive integer, not '1'"),
    (setter("steps", value=["train splade --queries q --output {work}/m --threads {threads}"]),
     "steps[1]: a training step must pass `--threads {train_threads}`"),
    (setter("steps", value=["fuse --run a", "ssr fit --tokens t --output {work}/m"]),
     "steps[2]: a training step must pass `--threads {train_threads}`"),
    (setter("steps", value=["train splade --queries q --output {work}/m --threads {train_threads}"]),
     "missing key 'train_threads'"),
    (setter("efficiency", "store", "file", value="{work/e.json"), "efficiency.store.file: '{work/e.json': expected '}'"),
    (setter("efficiency", "store", "path", value="x.json"), "efficiency.store: unknown key 'path' (allowed: file, expected)"),
    (setter("efficiency", "store", "file", delete=True), "efficiency.store: missing required key 'file'"),
    (setter("efficiency", "store", "expected", "doc_nonzeros", value={"value": 1}),
     "efficiency.store.expected: unknown efficiency figure 'doc_nonzeros' (known: size_bytes,"),
    (setter("efficiency", "store", "expected", "store_bytes_per_document", value={"at_most": 1, "at_least": 0}),
     "efficiency.store.expected.store_bytes_per_document: give exactly one of value, at_least, at_most"),
    (setter("efficiency", "store", "expected", "store_bytes_per_document", value={"above": {"good": 1}}),
     "efficiency.store.expected.store_bytes_per_document: unknown key 'above'"),
]


def refusal(path: Path, capsys) -> str:
    """The regress command in this process (as `python -m` runs it): exit 2, one error line."""
    from lsr_pyserini.commands.regress import command as regress
    from lsr_pyserini.core.cli import run_main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        run_main(lambda: regress.main([str(path), "--work", str(path.parent / "work")]))
    captured = capsys.readouterr()
    errors = captured.err.strip().splitlines()
    assert exit_.value.code == 2 and len(errors) == 1 and not captured.out, captured
    assert not (path.parent / "work" / "logs").exists()  # refused before any step ran
    return errors[0]


@pytest.mark.parametrize("change,message", REFUSALS, ids=[message.split(":")[0] for _, message in REFUSALS])
def test_refusals_name_the_file_and_the_key(change, message, tmp_path, capsys):
    spec = valid_spec()
    change(spec)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    assert refusal(path, capsys).startswith(f"error: {path}: {message}")


def test_the_valid_spec_loads_and_malformed_yaml_is_one_line(tmp_path, capsys):
    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump(valid_spec()))
    assert load_regression(str(path))["name"] == "good"
    path.write_text("collection: x\nsteps: [a\n")
    assert refusal(path, capsys).startswith(f"error: {path}: malformed YAML")
    path.write_text("- collection\n")
    assert refusal(path, capsys) == f"error: {path}: must be a non-empty mapping, not ['collection']"


def loaded(tmp_path, expected: dict, efficiency: dict | None = None) -> dict:
    spec = {"collection": "c", "qrels": "q", "steps": ["fuse"], "runs": {run: "r" for run in expected},
            "expected": expected, **({"efficiency": efficiency} if efficiency else {})}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return load_regression(str(path))


def test_margins_and_floors(tmp_path):
    spec = loaded(tmp_path, {
        "bm25": {"ndcg_cut_10": {"value": 0.64, "tolerance": 0.0}},
        "untrained": {"ndcg_cut_10": {"at_least": 0.3}},
        "trained": {"ndcg_cut_10": {"value": 0.66, "tolerance": 0.01, "above": {"bm25": 0.01, "untrained": 0.2}},
                    "recall_100": {"at_least": 0.9, "above": {"bm25": 0.0}}},
    })
    measured = {"bm25": {"ndcg_cut_10": 0.64, "recall_100": 0.9}, "untrained": {"ndcg_cut_10": 0.45, "recall_100": 0.5},
                "trained": {"ndcg_cut_10": 0.65, "recall_100": 0.9}}
    assert check_expectations(spec, measured) == []  # 0.65 = 0.64 + 0.01 exactly: a margin reached
    measured["bm25"]["ndcg_cut_10"] = 0.6401
    assert check_expectations(spec, measured) == [
        "bm25: ndcg_cut_10 = 0.6401, expected 0.64 +/- 0",
        "trained: ndcg_cut_10 = 0.65, expected >= bm25's 0.6401 + 0.01 = 0.6501"]
    measured["bm25"]["ndcg_cut_10"], measured["untrained"]["ndcg_cut_10"] = 0.64, 0.46
    measured["trained"]["recall_100"] = 0.89
    assert check_expectations(spec, measured) == [
        "trained: ndcg_cut_10 = 0.65, expected >= untrained's 0.46 + 0.2 = 0.66",
        "trained: recall_100 = 0.89, expected >= 0.9",
        "trained: recall_100 = 0.89, expected >= bm25's 0.9 + 0 = 0.9"]


def test_a_negative_margin_bounds_how_far_below_a_run_may_fall(tmp_path):
    spec = loaded(tmp_path, {"bm25": {"ndcg_cut_10": {"at_least": 0}},
                             "tiny": {"ndcg_cut_10": {"at_least": 0, "above": {"bm25": -0.06}}}})
    assert check_expectations(spec, {"bm25": {"ndcg_cut_10": 0.78}, "tiny": {"ndcg_cut_10": 0.72}}) == []
    assert check_expectations(spec, {"bm25": {"ndcg_cut_10": 0.78}, "tiny": {"ndcg_cut_10": 0.7199}}) == [
        "tiny: ndcg_cut_10 = 0.7199, expected >= bm25's 0.78 - 0.06 = 0.72"]


def test_a_value_per_cpu_kind_applies_on_that_kind_and_their_spread_elsewhere(tmp_path):
    spec = loaded(tmp_path, {"fused": {"ndcg_cut_10": {"value": {"AMD-AVX2": 0.7027, "Intel-AVX512": 0.6981},
                                                       "tolerance": 0.001}}})
    at = lambda value: {"fused": {"ndcg_cut_10": value}}  # noqa: E731
    assert check_expectations(spec, at(0.7027), cpu="AMD-AVX2") == []
    assert check_expectations(spec, at(0.6981), cpu="Intel-AVX512") == []
    assert check_expectations(spec, at(0.6981), cpu="AMD-AVX2") == [
        "fused: ndcg_cut_10 = 0.6981, expected 0.7027 (AMD-AVX2) +/- 0.001"]
    assert check_expectations(spec, at(0.7027), cpu="Intel-AVX512") == [
        "fused: ndcg_cut_10 = 0.7027, expected 0.6981 (Intel-AVX512) +/- 0.001"]
    # a kind the file does not list (the same width from another vendor too): the measured spread,
    # widened by the tolerance
    assert check_expectations(spec, at(0.6972), cpu="AMD-AVX512") == []
    assert check_expectations(spec, at(0.7036), cpu=None) == []
    assert check_expectations(spec, at(0.7038), cpu="AMD-AVX512") == [
        "fused: ndcg_cut_10 = 0.7038, expected AMD-AVX2 0.7027, Intel-AVX512 0.6981: on AMD-AVX512, their spread "
        "+/- 0.001"]


def test_a_kind_not_listed_takes_the_tolerance_elsewhere(tmp_path):
    spec = loaded(tmp_path, {"ft": {"ndcg_cut_10": {"value": {"AMD-AVX2": 0.7445, "AMD-AVX512": 0.7445},
                                                    "tolerance": 0.002, "tolerance_elsewhere": 0.005}}})
    at = lambda value: {"ft": {"ndcg_cut_10": value}}  # noqa: E731
    assert check_expectations(spec, at(0.7410), cpu="Intel-AVX512") == []
    assert check_expectations(spec, at(0.7410), cpu="AMD-AVX2") == [
        "ft: ndcg_cut_10 = 0.741, expected 0.7445 (AMD-AVX2) +/- 0.002"]
    assert check_expectations(spec, at(0.7390), cpu="Intel-AVX512") == [
        "ft: ndcg_cut_10 = 0.739, expected AMD-AVX2 0.7445, AMD-AVX512 0.7445: on Intel-AVX512, their spread "
        "+/- 0.005"]


def test_efficiency_expectations(tmp_path):
    spec = loaded(tmp_path, {"run": {"ndcg_cut_10": {"at_least": 0}}}, {"index": {"file": "f", "expected": {
        "avg_nonzeros_per_document": {"value": 247.0, "tolerance": 1.0},
        "flops": {"at_most": 10.0}, "size_bytes": {"at_least": 1000}}}})
    measured = {"run": {"ndcg_cut_10": 0.5},
                "efficiency": {"index": {"avg_nonzeros_per_document": 246.0, "flops": 10.0, "size_bytes": 1000}}}
    assert check_expectations(spec, measured) == []
    measured["efficiency"]["index"] = {"avg_nonzeros_per_document": 248.2, "flops": 10.5, "size_bytes": 999}
    assert check_expectations(spec, measured) == [
        "index: avg_nonzeros_per_document = 248.2, expected 247 +/- 1",
        "index: flops = 10.5, expected <= 10",
        "index: size_bytes = 999, expected >= 1000"]
    measured["efficiency"]["index"] = {}
    assert check_expectations(spec, measured)[0] == "index: avg_nonzeros_per_document was not measured"


def test_read_efficiency(tmp_path):
    path = tmp_path / "e.json"
    path.write_text(json.dumps([{"index": "x", "size_bytes": 10, "flops": 1.5, "unknown": 3}]))
    assert read_efficiency(str(path)) == {"size_bytes": 10, "flops": 1.5}
    for text, message in (("[{}, {}]", "not the one object"), ("{", "malformed JSON")):
        path.write_text(text)
        with pytest.raises(InputError, match=message):
            read_efficiency(str(path))
    with pytest.raises(InputError, match="no such efficiency file"):
        read_efficiency(str(tmp_path / "none.json"))


@pytest.fixture
def tiny_collection(tmp_path) -> Path:
    """qrels, two runs (nDCG@10 1.0 and 0.6309) and a store folder: 4 documents in 400 bytes."""
    data = tmp_path / "data" / "tiny"
    (data / "store").mkdir(parents=True)
    (data / "qrels.test.trec").write_text("q1 0 d1 1\nq2 0 d2 1\n")
    (data / "run.good.txt").write_text("q1 Q0 d1 1 2 good\nq1 Q0 d3 2 1 good\nq2 Q0 d2 1 2 good\nq2 Q0 d4 2 1 good\n")
    (data / "run.bad.txt").write_text("q1 Q0 d3 1 2 bad\nq1 Q0 d1 2 1 bad\nq2 Q0 d4 1 2 bad\nq2 Q0 d2 2 1 bad\n")
    (data / "store" / "docids.txt").write_text("d1\nd2\nd3\nd4\n")
    (data / "store" / "vectors.bin").write_bytes(bytes(400 - 12))
    return data


def run_regression(data: Path, expected: dict, efficiency: dict, work: str):
    spec = {"collection": data.name, "qrels": "{data}/qrels.test.trec",
            "steps": ["fuse --run {data}/run.good.txt --run {data}/run.bad.txt --weight 0.7 --weight 0.3 "
                      "--output {work}/run.fused.txt",
                      "evaluate --store {data}/store --json {work}/efficiency.json"],
            "runs": {"good": "{data}/run.good.txt", "bad": "{data}/run.bad.txt", "fused": "{work}/run.fused.txt"},
            "expected": expected,
            "efficiency": {"store": {"file": "{work}/efficiency.json", "expected": efficiency}}}
    path = data.parent.parent / "tiny.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run_tool("regress", path, "--data-root", data.parent, "--work", data.parent.parent / work)
    return result, json.loads(result.stdout.strip().splitlines()[-1])


def test_regress_checks_margins_and_efficiency_end_to_end(tiny_collection):
    result, measured = run_regression(
        tiny_collection,
        {"good": {"ndcg_cut_10": {"value": 1.0}},
         "bad": {"ndcg_cut_10": {"at_least": 0.6}},
         "fused": {"ndcg_cut_10": {"at_least": 0.9, "above": {"bad": 0.3}}}},
        {"store_bytes_per_document": {"value": 100.0, "tolerance": 0}, "store_documents": {"value": 4},
         "store_size_bytes": {"at_most": 400}}, work="pass")
    assert result.returncode == 0 and "MISS" not in result.stderr, result.stderr
    assert measured["bad"]["ndcg_cut_10"] == 0.6309 and measured["fused"]["ndcg_cut_10"] == 1.0
    assert measured["efficiency"] == {"store": {"store_bytes_per_document": 100.0, "store_documents": 4,
                                                "store_size_bytes": 400}}
    assert "store_bytes_per_document  100       100 +/- 0" in result.stdout  # the efficiency table
    written = json.loads((tiny_collection.parent.parent / "pass" / "efficiency.json").read_text())[0]
    figures = {key for key, _ in EFFICIENCY_FIGURES}
    assert {key for key, value in written.items() if not isinstance(value, str)} <= figures

    result, measured = run_regression(
        tiny_collection,
        {"good": {"ndcg_cut_10": {"value": 1.0, "above": {"fused": 0.01}}},
         "bad": {"ndcg_cut_10": {"at_least": 0.6}},
         "fused": {"ndcg_cut_10": {"at_least": 0.9, "above": {"bad": 0.4}}}},
        {"store_size_bytes": {"at_most": 399}, "store_documents": {"at_least": 5}, "flops": {"at_most": 1}}, work="miss")
    assert result.returncode == 1
    assert [line for line in result.stderr.splitlines() if line.startswith("MISS")] == [
        "MISS good: ndcg_cut_10 = 1, expected >= fused's 1 + 0.01 = 1.01",
        "MISS fused: ndcg_cut_10 = 1, expected >= bad's 0.6309 + 0.4 = 1.0309",
        "MISS store: store_size_bytes = 400, expected <= 399",
        "MISS store: store_documents = 4, expected >= 5",
        "MISS store: flops was not measured"]
    assert set(measured) == {"good", "bad", "fused", "efficiency", "environment"}


def test_regress_checks_this_cpu_kinds_value(tiny_collection):
    """regress reads this CPU's kind and checks its value: 0.6309 is inside the spread of the two
    kinds' values but misses this kind's."""
    from lsr_pyserini.core.environment import cpu_kind

    this = cpu_kind()
    other = "other-DEFAULT" if this != "other-DEFAULT" else "AMD-AVX2"
    result, measured = run_regression(
        tiny_collection,
        {"good": {"ndcg_cut_10": {"value": 1.0}},
         "bad": {"ndcg_cut_10": {"value": {this: 0.7, other: 0.6309}}},
         "fused": {"ndcg_cut_10": {"at_least": 0.9}}},
        {"store_documents": {"value": 4}}, work="kind")
    assert result.returncode == 1 and measured["environment"]["cpu_kind"] == this
    assert [line for line in result.stderr.splitlines() if line.startswith("MISS")] == [
        f"MISS bad: ndcg_cut_10 = 0.6309, expected 0.7 ({this}) +/- 0"]
    assert " 0.7000 " in result.stdout  # the table shows this kind's value


def test_training_steps_run_with_the_files_thread_count_whatever_threads_says(tiny_collection, monkeypatch,
                                                                            capsys):
    """regress substitutes {train_threads} with the file's count (the one its figures were measured
    with), {threads} with --threads; --train-threads overrides the file; the JSON line records both
    beside the library versions. The steps are not run: the command lines regress builds are kept."""
    import subprocess

    from lsr_pyserini.commands.regress import command as regress
    from lsr_pyserini.commands.regress import run as regression

    spec = {"collection": tiny_collection.name, "train_threads": 1, "qrels": "{data}/qrels.test.trec",
            "steps": ["train splade --queries {data}/q.tsv --output {work}/model --threads {train_threads}",
                      "ssr fit --tokens {work}/tokens --output {work}/sae --threads {train_threads}",
                      "lucene index --input {work}/v --index {work}/index --threads {threads}"],
            "runs": {"good": "{data}/run.good.txt"}, "expected": {"good": {"ndcg_cut_10": {"value": 1.0}}}}
    path = tiny_collection.parent.parent / "trains.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    commands, real_run = [], subprocess.run

    def run(command, **kwargs):  # a step is recorded, not run; anything else (trec_eval) runs
        if not (len(command) > 2 and command[1] == "-m" and command[2].startswith("lsr_pyserini.")):
            return real_run(command, **kwargs)
        commands.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(regression.subprocess, "run", run)

    def threads_of(argv):
        commands.clear()
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_:
            regress.main([str(path), "--data-root", str(tiny_collection.parent), "--work",
                          str(tiny_collection.parent.parent / "work"), *argv])
        assert exit_.value.code == 0
        measured = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        return [command[command.index("--threads") + 1] for command in commands], measured["environment"]

    used, environment = threads_of(["--threads", "7"])
    assert used == ["1", "1", "7"]  # train, ssr fit: the file's count; lucene: --threads
    assert environment["threads"] == 7 and environment["train_threads"] == 1
    assert {"torch", "transformers", "pyserini", "java", "python", "cpu"} <= set(environment)
    assert environment["torch"].startswith("2.")
    used, environment = threads_of(["--threads", "7", "--train-threads", "3"])
    assert used == ["3", "3", "7"] and environment["train_threads"] == 3


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_regress_trains_the_same_weights_whatever_threads_says(tmp_path):
    """A real training step (4 steps from SPLADE-tiny on the sample data) run by regress with
    --threads 1 and --threads 2: the file's train_threads pins the count, so the weights are the same
    bytes; --train-threads 2 (another count) gives other weights, the CPU LayerNorm backward summing
    per thread (docs/reproducibility.md), so the first comparison is not true by accident."""
    from conftest import SAMPLE

    data = tmp_path / "data" / "sample"
    data.mkdir(parents=True)
    qids = [line.split("\t")[0] for line in (SAMPLE / "queries.test.tsv").read_text().splitlines()]
    (data / "negatives.txt").write_text("".join(f"{q} Q0 s{d} {d} {20 - d} bm25\n" for q in qids for d in range(1, 13)))
    (data / "run.txt").write_text("q1 Q0 s1 1 2 x\n")
    (data / "qrels.trec").write_text("q1 0 s1 1\n")
    spec = {"collection": "sample", "train_threads": 1, "qrels": "{data}/qrels.trec",
            "steps": [f"train splade --base splade-tiny --queries {SAMPLE}/queries.test.tsv --qrels "
                      f"{SAMPLE}/qrels.test.trec --corpus {SAMPLE}/corpus.jsonl --negatives {{data}}/negatives.txt "
                      "--output {work}/model --batch-size 2 --max-steps 4 --lr 1e-3 --doc-max-length 64 --quiet "
                      "--threads {train_threads}"],
            "runs": {"x": "{data}/run.txt"}, "expected": {"x": {"ndcg_cut_10": {"value": 1.0}}}}
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))

    def weights(work, *argv):
        result = run_tool("regress", path, "--data-root", tmp_path / "data", "--work", tmp_path / work, *argv)
        assert result.returncode == 0, result.stderr
        training = json.loads((tmp_path / work / "model" / "lsr_training.json").read_text())
        return (tmp_path / work / "model" / "model.safetensors").read_bytes(), training["environment"]["threads"]

    one, one_threads = weights("one", "--threads", "1")
    two, two_threads = weights("two", "--threads", "2")
    assert one == two and one_threads == two_threads == 1
    other, other_threads = weights("other", "--threads", "1", "--train-threads", "2")
    assert other_threads == 2 and other != one
