"""The query side of search: a preset resolved once into what turns query texts into an engine's
queries (engines/base.py says what each engine takes).

- `QueryEncoder`: texts to the integer impacts `encode queries` writes (`encode(text) -> {term: int}`,
  Pyserini's query-encoder interface, so `LuceneImpactSearcher(index, query_encoder=QueryEncoder(...))`
  works too), for the `lucene`, `sharded` and `seismic` engines.
- `AugmentedBm25Queries`: a `train bm25aug` checkpoint's boosts `{term: int}` for the `bm25` engine
  with whitespace analysis (the boosts `bm25aug queries` writes as repeated terms).
- `TextQueries`: texts as they are (plain BM25).
- `DenseQueries`: query vectors encoded as a dense store's manifest says its documents were.

`query_side(settings_or_none, ...)` builds the one that fits a resolved preset (`encoder_settings`).
"""
from __future__ import annotations


from ..core.length_order import encode_in_length_order
from ..core.errors import InputError
from ..models.resolve import resolve_settings
from ..models.shared_settings import QUERY_MAX_LENGTH
from ..core.topics import IMPACTS, TEXT, VECTOR  # noqa: F401  (what each query side makes)
from ..core.writer import to_impacts
from . import build_encoder
from ..models.base import SparseVector

DEFAULT_ENCODER = "splade-tiny"


def encoder_settings(name_or_path: str = DEFAULT_ENCODER, **overrides) -> dict:
    """The complete config of a preset name, a preset .yaml, or a checkpoint folder trained here,
    with `overrides` applied where not None, checked against the family's settings
    (`models/resolve.py`)."""
    from ..core.arguments import name_arg

    return resolve_settings(name_arg("name_or_path", name_or_path), overrides)


class QueryEncoder:
    """Texts to the integer query impacts `encode queries` writes: `encode(text) -> {term: int}`.

    Usable as Pyserini's query encoder: `LuceneImpactSearcher(index, query_encoder=QueryEncoder(...))`.
    Safe to share between threads (inference only; the fast paths' checks keep eager numbers).
    """

    makes = IMPACTS

    def __init__(self, name_or_path: str = DEFAULT_ENCODER, device: str | None = None, dtype: str | None = None,
                 **settings):
        from ..core.devices import placed

        with placed(device, dtype):  # as load_encoder's
            self._build(encoder_settings(name_or_path, **settings))

    @classmethod
    def from_settings(cls, settings: dict) -> "QueryEncoder":
        """A query encoder for settings already resolved by `encoder_settings`."""
        query_encoder = cls.__new__(cls)
        query_encoder._build(settings)
        return query_encoder

    def _build(self, settings: dict) -> None:
        self.settings = settings
        self.encoder = build_encoder(settings)
        self.impact_scale = self.settings.get("query_impact_scale") or self.settings["impact_scale"]
        self.batch_size = int(self.settings["batch_size"])

    def encode_floats(self, texts: list[str], progress=None) -> list[SparseVector]:
        """Float query weights in the input order, one query per forward pass: a padded batch runs the
        transformer on other shapes, whose float kernels may move a weight across a rounding boundary
        (seen on an AVX2 CPU: one term of one SciFact query, 24 alone, 23 in a batch). Alone, a query's
        impacts are the same in `encode queries`, in `Searcher` and inside Pyserini's searchers, which
        encode one query per call."""
        return encode_in_length_order(self.encoder.encode_queries, texts, 1, progress)

    def impacts(self, vector: SparseVector) -> dict[str, int]:
        return to_impacts(vector, self.impact_scale)

    def batch_encode(self, texts: list[str], progress=None) -> list[dict[str, int]]:
        return [self.impacts(vector) for vector in self.encode_floats(texts, progress)]

    def encode(self, text: str, **_pyserini_kwargs) -> dict[str, int]:
        """One query's integer impacts (Pyserini's QueryEncoder interface)."""
        return self.batch_encode([text])[0]

    def queries(self, qids: list[str], texts: list[str]) -> list[dict[str, int]]:
        return self.batch_encode(texts)

    def warm(self) -> int:
        """Encode one query of each token length up to `query_max_length`, so that the fast paths'
        one-time work per length (the trace specialised to that shape, the packed projection's
        comparison with the eager product: about 0.25 s a length for SPLADE-tiny on a Zen 3 EPYC)
        is done before a service's first request; returns the lengths warmed. The impacts of any
        later query are the same as without it: the fast paths keep eager numbers."""
        longest = int(self.settings.get("query_max_length") or QUERY_MAX_LENGTH.default)
        self.batch_encode([" ".join(["a"] * words) for words in range(1, longest - 1)])
        return longest - 2


class EncodedQueries:
    """Queries given already encoded (`search --encoded`): a Searcher with it takes them through
    `search_encoded` only."""

    makes = IMPACTS

    def queries(self, qids: list[str], texts: list[str]) -> list:
        raise InputError("this Searcher takes encoded queries (encoded=True): use search_encoded")


class TextQueries:
    makes = TEXT

    def queries(self, qids: list[str], texts: list[str]) -> list[str]:
        return list(texts)


class AugmentedBm25Queries:
    """A `train bm25aug` checkpoint's boosts for one WordPiece index (`AugmentedQueries`)."""

    makes = TEXT
    pretokenized = True

    def __init__(self, settings: dict, index: str, given: dict):
        """`settings`: the checkpoint's resolved settings; `given`: those of them the caller set
        (Searcher's `encoder_options`, declared settings of the bm25aug family), which override the
        checkpoint's: `augment`, `weighting`, `batch_size`, `scoring` (refused when not the
        index's), `k1` and `b` (the BM25 searched with), `query_max_length`, and
        `query_impact_scale` (else `impact_scale`) as the boost scale (each token repeated
        round(boost x scale) times)."""
        from ..models.bm25aug.model import AugmentedQueries

        options = {name: given[name] for name in ("augment", "weighting", "batch_size", "scoring", "k1", "b", "query_max_length") if given.get(name) is not None}
        if given.get("query_impact_scale") is not None or given.get("impact_scale") is not None:
            options["boost_scale"] = settings["query_impact_scale"] or settings["impact_scale"]
        self.augmented = AugmentedQueries(settings["model"], index, **options)

    @property
    def bm25(self) -> tuple[float, float]:
        return self.augmented.bm25

    def queries(self, qids: list[str], texts: list[str]) -> list[dict[str, int]]:
        pairs = list(zip(qids, texts))
        self.augmented.check_searchable(pairs, "queries")
        return self.augmented.boosts(pairs)[0]


def is_bm25aug(settings: dict | None) -> bool:
    return settings is not None and settings.get("family") == "bm25aug"


def __getattr__(name: str):
    """`DenseQueries` (the dense query side, with the others) on first use: it imports torch, which
    a search of a Lucene or Seismic index never needs."""
    if name == "DenseQueries":
        from ..models.dense.queries import DenseQueries

        return DenseQueries
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
