"""The flags of `pisa search`, `seismic search`, `bmp search` and `seismic index` reach the engine:
each command runs in this process with its index class (or build) replaced by one that records
what it is asked, every flag at a non-default value (the engines' own tests check what the
libraries do with those values on real indexes)."""
from __future__ import annotations

import importlib

import pytest

from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.outputs import release_outputs

# engine -> (its index class's name in its command module, flags, what its search is asked after the queries)
SEARCHES = {
    "pisa": ("PisaIndex", ["--algorithm", "wand"], (7, 3)),
    "seismic": ("SeismicIndex", ["--query-cut", "4", "--heap-factor", "0.5"], (7, 4, 0.5, 3)),
    "bmp": ("BmpIndex", ["--alpha", "0.25", "--beta", "0.5"], (7, 0.25, 0.5, 3)),
}


ENCODER = {"family": "splade", "model": "splade-tiny"}  # what the index records of its documents' encoder


@pytest.fixture(autouse=True)
def no_locks_left_in_this_process():
    yield
    release_outputs()


@pytest.mark.parametrize("engine", sorted(SEARCHES))
def test_search_flags_reach_the_index(engine, tmp_path, monkeypatch):
    command = importlib.import_module(f"lsr_pyserini.engines.{engine}.command")
    class_name, flags, expected = SEARCHES[engine]
    asked, opened = [], []

    class Recording:
        manifest, documents = {"encoder": ENCODER}, 2

        def __init__(self, index, *args):
            opened.append(args)  # pisa: the algorithm

        def search(self, queries, *args):
            asked.append(args)
            return {qid: [("d1", 3.0), ("d2", 1.0)] for qid, _ in queries}

    monkeypatch.setattr(command, class_name, Recording)
    if engine == "seismic":
        monkeypatch.setattr(command, "seismic_documents_encoder", lambda index: ENCODER)
    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\twhat folds a protein\n")  # reads as text: no record of `encode queries` beside it
    argv = ["search", "--index", str(tmp_path / "index"), "--topics", str(topics), "--output", str(tmp_path / "run.txt"),
            "--hits", "7", "--threads", "3", "--tag", "mine", *flags]
    with pytest.raises(InputError, match="--unrecorded-topics"):
        command.main(argv)
    release_outputs()
    command.main(argv + ["--unrecorded-topics"])
    assert asked == [expected] and (opened[-1] == ("wand",) if engine == "pisa" else True)
    assert {line.split()[5] for line in (tmp_path / "run.txt").read_text().splitlines()} == {"mine"}


def test_seismic_index_flags_reach_the_build(tmp_path, monkeypatch):
    from lsr_pyserini.engines.seismic import command

    built = []

    def build(vectors, index, settings, overwrite, progress):
        built.append(settings)
        return {"documents": 1, "terms": 1, "nonzeros": 1, "build_seconds": 0.0, "exact": False,
                "large_vocabulary": True}

    monkeypatch.setattr(command, "build_seismic_index", build)
    monkeypatch.setattr(command, "vector_bytes", lambda folder: 0)
    command.main(["index", "--input", str(tmp_path / "v"), "--index", str(tmp_path / "ix"), "--n-postings", "7",
                  "--centroid-fraction", "0.2", "--min-cluster-size", "3", "--summary-energy", "0.5",
                  "--max-fraction", "2.5", "--doc-cut", "9", "--large-vocabulary", "never", "--threads", "2", "--quiet"])
    (settings,) = built
    assert (settings.n_postings, settings.centroid_fraction, settings.min_cluster_size, settings.summary_energy,
            settings.max_fraction, settings.doc_cut, settings.large_vocabulary, settings.threads) == \
        (7, 0.2, 3, 0.5, 2.5, 9, "never", 2)
