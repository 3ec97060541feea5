"""Numeric options and settings: one set of types (`core/options.py`) for every command and the
Python API, and the refusal of an option that belongs to another encoder or training family."""
from __future__ import annotations

import argparse
import importlib
import re

import pytest

from conftest import SAMPLE, run_tool
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.options import (
    NamedNumbers,
    Number,
    checked,
    finite_float,
    float_in,
    int_in,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    probability,
    random_seed,
    refuse_foreign,
)

# (kind, accepted command-line strings with their value, refused strings)
NOT_NUMBERS = ["", "x", "1,5", "nan", "inf", "-inf"]
TYPES = [
    (positive_int, {"1": 1, "32": 32, " 7 ": 7}, ["0", "-1", "1.5", "1e3", *NOT_NUMBERS]),
    (non_negative_int, {"0": 0, "5": 5}, ["-1", "0.0", *NOT_NUMBERS]),
    (int_in(2), {"2": 2, "9": 9}, ["1", "0", "-2", *NOT_NUMBERS]),
    (random_seed, {"0": 0, "4294967295": 2**32 - 1}, ["-1", "4294967296", *NOT_NUMBERS]),
    (finite_float, {"-1.5": -1.5, "0": 0.0, "1e-3": 1e-3}, NOT_NUMBERS),
    (positive_float, {"1e-9": 1e-9, "60": 60.0}, ["0", "-0.0", "-1", *NOT_NUMBERS]),
    (non_negative_float, {"0": 0.0, "0.3": 0.3}, ["-1e-9", *NOT_NUMBERS]),
    (probability, {"0": 0.0, "0.5": 0.5, "1": 1.0}, ["-0.1", "1.0001", *NOT_NUMBERS]),
    (float_in(0.5, 2), {"0.5": 0.5, "2": 2.0}, ["0.49", "2.01", *NOT_NUMBERS]),
]


@pytest.mark.parametrize("kind, accepted, refused", TYPES, ids=[kind.description for kind, _, _ in TYPES])
def test_types_accept_and_refuse_command_line_text(kind, accepted, refused):
    for text, value in accepted.items():
        assert kind(text) == value and type(kind(text)) is type(value)
    for text in refused:
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(f"expected {kind.description}, got {text!r}")):
            kind(text)


@pytest.mark.parametrize("kind, refused", [
    (positive_int, [0, -3, 2.0, True, None, float("nan")]),
    (positive_float, [0, -1.5, float("nan"), float("inf"), float("-inf"), False, None]),
    (probability, [1.5, -0.1, float("nan"), float("inf")]),
    (finite_float, [float("nan"), float("inf"), float("-inf"), [1.0]]),
])
def test_types_check_python_values_and_pass_good_ones_through(kind, refused):
    for value in refused:
        with pytest.raises(InputError, match=re.escape(f"setting: expected {kind.description}, got {value!r}")):
            checked("setting", value, kind)
    assert positive_int(5) == 5 and positive_float(100) == 100 and type(positive_float(100)) is int  # not converted
    assert probability(1) == 1 and finite_float(-2.5) == -2.5


def test_descriptions():
    assert [kind.description for kind in (positive_int, non_negative_int, int_in(2), random_seed, finite_float,
                                          positive_float, non_negative_float, probability, float_in(0.5, 2))] == [
        "an integer >= 1", "an integer >= 0", "an integer >= 2", "an integer in [0, 4294967295]", "a finite number",
        "a finite number > 0", "a finite number >= 0", "a number in [0, 1]", "a number in [0.5, 2]"]


def test_named_numbers():
    heads = NamedNumbers(("dense", "sparse", "colbert"), non_negative_float, "head")
    assert heads("dense=1, sparse=0.3") == {"dense": 1.0, "sparse": 0.3}
    assert heads({"colbert": 2}) == {"colbert": 2}  # already parsed (the Python API): checked, unchanged
    for text, message in [("dense=1,lexical=2", "unknown head 'lexical' (known: dense, sparse, colbert)"),
                          ("dense", "'dense' is not HEAD=NUMBER"),
                          ("dense=nan", "dense: expected a finite number >= 0, got 'nan'"),
                          ("sparse=-1", "sparse: expected a finite number >= 0, got '-1'"),
                          ("dense=1,dense=2", "head 'dense' given twice"),
                          ({"dense": float("inf")}, "dense: expected a finite number >= 0, got inf")]:
        with pytest.raises(argparse.ArgumentTypeError, match=f"^{re.escape(message)}$"):
            heads(text)


def test_refuse_foreign_names_the_option_and_its_owners():
    owners = {"--alpha": ["tilde"], "--teacher": ["tildev2", "splade", "sparseembed"]}
    refuse_foreign(["--alpha"], owners, "tilde", ("re-ranker", "re-rankers"))  # its own: accepted
    with pytest.raises(InputError, match="^--alpha is an option of the 'tilde' re-ranker, not of 'dense'$"):
        refuse_foreign(["--alpha"], owners, "dense", ("re-ranker", "re-rankers"))
    with pytest.raises(InputError, match="^--teacher is an option of the 'sparseembed', 'splade' and 'tildev2' "
                                         "training families, not of 'tilde'$"):
        refuse_foreign(["--teacher"], owners, "tilde", ("training family", "training families"))


# Commands that refuse a bad number while parsing: argv (required arguments may be left out: argparse
# converts each value as it reads it, before it looks for missing ones) and the option named.
TRAIN = ["--queries", "q", "--qrels", "r", "--corpus", "c", "--negatives", "n", "--output", "o"]
BAD_OPTIONS = [
    ("fuse", ["--weight", "1", "--weight", "nan"], "--weight"),
    ("fuse", ["--weight", "-inf"], "--weight"),
    ("fuse", ["--method", "rrf", "--rrf-k", "-1"], "--rrf-k"),
    ("fuse", ["--hits", "0"], "--hits"),
    ("encode", ["corpus", "--shard-size", "0"], "--shard-size"),
    ("encode", ["queries", "--impact-scale", "nan"], "--impact-scale"),
    ("encode", ["queries", "--top-k", "-1"], "--top-k"),
    ("encode", ["dense", "--batch-size", "0"], "--batch-size"),
    ("prepare", ["corpus", "--shard-size", "-5"], "--shard-size"),
    ("expand", ["--batch-size", "0"], "--batch-size"),
    ("expand", ["--top-m", "1.5"], "--top-m"),
    ("rerank", ["--interpolate", "1.5"], "--interpolate"),
    ("rerank", ["--hits", "0"], "--hits"),
    ("rerank", ["--alpha", "2"], "--alpha"),
    ("rerank", ["--cls-weight", "-1"], "--cls-weight"),
    ("rerank", ["--hybrid-weights", "dense=nan"], "--hybrid-weights"),
    ("search_dense", ["--hits", "0"], "--hits"),
    ("bm25aug", ["queries", "--batch-size", "0"], "--batch-size"),
    ("bm25aug", ["queries", "--boost-scale", "inf"], "--boost-scale"),
    ("bm25aug", ["index", "--shard-size", "0"], "--shard-size"),
    ("regress", ["x.yaml", "--threads", "0"], "--threads"),
    ("train", ["splade", *TRAIN, "--batch-size", "0"], "--batch-size"),
    ("train", ["splade", *TRAIN, "--save-every", "0"], "--save-every"),
    ("train", ["splade", *TRAIN, "--max-steps", "-1"], "--max-steps"),
    ("train", ["splade", *TRAIN, "--group-size", "1"], "--group-size"),
    ("train", ["splade", *TRAIN, "--warmup-ratio", "1.5"], "--warmup-ratio"),
    ("train", ["splade", *TRAIN, "--seed", "-1"], "--seed"),
    ("train", ["sparseembed", *TRAIN, "--lambda-w", "-1"], "--lambda-w"),
    ("train", ["tildev2", *TRAIN, "--b", "2"], "--b"),
    ("train", ["tilde", *TRAIN, "--passage-terms-weight", "nan"], "--passage-terms-weight"),
    ("train", ["ssr", *TRAIN, "--score-scale", "0"], "--score-scale"),
    ("train", ["bm25aug", *TRAIN, "--k1", "-1"], "--k1"),
    ("ssr", ["embed", "--batch-size", "0"], "--batch-size"),
    ("ssr", ["fit", "--query-k-min", "0"], "--query-k-min"),
    ("ssr", ["index", "--impact-scale", "0"], "--impact-scale"),
]


@pytest.mark.parametrize("tool, argv, option", BAD_OPTIONS, ids=[f"{t}-{' '.join(a[-2:])}" for t, a, _ in BAD_OPTIONS])
def test_a_bad_number_is_one_argparse_error_naming_the_option(tool, argv, option):
    result = run_tool(tool, *argv)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert [line for line in result.stderr.splitlines() if "error:" in line] == [result.stderr.splitlines()[-1]]
    last = result.stderr.splitlines()[-1]
    assert f"error: argument {option}: " in last and "expected " in last, result.stderr


FOREIGN_OPTIONS = [
    ("train", ["tilde", *TRAIN, "--teacher", "t.txt"],
     "--teacher is an option of the 'sparseembed', 'splade' and 'tildev2' training families, not of 'tilde'"),
    ("train", ["bm25aug", *TRAIN, "--teacher-scale", "2"],
     "--teacher-scale is an option of the 'sparseembed', 'splade' and 'tildev2' training families, not of 'bm25aug'"),
    ("encode", ["queries", "--encoder", "bge-m3", "--pooling", "max", "--input", SAMPLE / "queries.test.tsv",
                "--output", "{tmp}/never.tsv"], "--pooling is an option of the 'splade' encoder, not of 'bgem3'"),
    ("encode", ["queries", "--encoder", "tildev2", "--chat-template", "t.jinja", "--input", SAMPLE / "queries.test.tsv",
                "--output", "{tmp}/never.tsv"], "--chat-template is an option of the 'promptreps' encoder, not of 'tildev2'"),
    ("rerank", ["--reranker", "dense", "--run", "r", "--queries", "q", "--store", "s", "--output", "o",
                "--alpha", "0.5"], "--alpha is an option of the 'tilde' re-ranker, not of 'dense'"),
]


@pytest.mark.parametrize("tool, argv, message", FOREIGN_OPTIONS, ids=[m.split()[0] for _, _, m in FOREIGN_OPTIONS])
def test_an_option_of_another_family_is_refused_in_one_line(tool, argv, message, tmp_path):
    result = run_tool(tool, *(str(arg).format(tmp=tmp_path) for arg in argv))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [f"error: {message}"], result.stderr
    assert not list(tmp_path.iterdir())


def test_train_help_shows_teacher_options_only_to_the_families_that_read_them():
    from lsr_pyserini.train.__main__ import build_parser

    families = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    shown = {name for name, parser in families.items() if "--teacher" in parser.format_help()}
    assert shown == {"splade", "sparseembed", "tildev2"}


COMMANDS = ["encode", "prepare", "expand", "rerank", "fuse", "search_dense", "bm25aug", "evaluate", "regress",
            "train.__main__", "ssr", "seismic", "export"]


def parsers(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from parsers(sub)


def test_every_numeric_option_of_every_command_has_a_type_of_core_options():
    numeric = 0
    for command in COMMANDS:
        for parser in parsers(importlib.import_module(f"lsr_pyserini.{command}").build_parser()):
            for action in parser._actions:
                name = f"{parser.prog} {'/'.join(action.option_strings)}"
                assert action.type not in (int, float), f"{name}: type={action.type.__name__}, not core.options"
                number = isinstance(action.default, (int, float)) and not isinstance(action.default, bool)
                if number and action.nargs != 0:
                    assert isinstance(action.type, (Number, NamedNumbers)), f"{name}: default {action.default}"
                numeric += isinstance(action.type, (Number, NamedNumbers))
    assert numeric > 100  # the walk reached the subcommands and the families' options


def test_python_api_settings_go_through_the_same_types(tmp_path):
    import lsr_pyserini
    from lsr_pyserini.api import encoder_settings
    from lsr_pyserini.models.bm25aug.model import AugmentedQueries
    from lsr_pyserini.rerankers import reranker_options

    cases = [
        (lambda: lsr_pyserini.Searcher(str(tmp_path), interpolate=float("nan")), "interpolate: expected a number in"),
        (lambda: lsr_pyserini.Searcher(str(tmp_path), interpolate=1.5), "interpolate: expected a number in [0, 1]"),
        (lambda: lsr_pyserini.Searcher(str(tmp_path), candidates=0), "candidates: expected an integer >= 1, got 0"),
        (lambda: lsr_pyserini.Searcher(str(tmp_path), bm25=(-1, 0.4)), "k1: expected a finite number >= 0, got -1"),
        (lambda: lsr_pyserini.Searcher(str(tmp_path), bm25=(0.9, 2)), "b: expected a number in [0, 1], got 2"),
        (lambda: lsr_pyserini.load_encoder("splade-tiny", batch_size=0), "batch_size: expected an integer >= 1"),
        (lambda: encoder_settings("splade-tiny", impact_scale=float("inf")), "impact_scale: expected a finite number"),
        (lambda: encoder_settings("splade-tiny", doc_top_k=2.5), "doc_top_k: expected an integer >= 1, got 2.5"),
        (lambda: reranker_options("tilde", {"alpha": 2}), "alpha: expected a number in [0, 1], got 2"),
        (lambda: reranker_options("bgem3", {"hybrid_weights": "dense=-1"}), "hybrid_weights: dense: expected"),
        (lambda: AugmentedQueries("m", "i", boost_scale=0), "boost_scale: expected a finite number > 0, got 0"),
    ]
    for call, message in cases:
        with pytest.raises(InputError) as err:
            call()
        assert str(err.value).startswith(message), str(err.value)
    assert reranker_options("tilde", {"alpha": "0.25"}) == {"alpha": 0.25}
    assert reranker_options("bgem3", {"hybrid_weights": "sparse=1"}) == {"hybrid_weights": {"sparse": 1.0}}
    assert encoder_settings("splade-tiny", batch_size=4)["batch_size"] == 4
