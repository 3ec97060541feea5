"""How one corpus shard is encoded, as a recipe another process can rebuild: `encode corpus` and
`encode dense` use it in one process, and `core/parallel.py` sends it to worker processes or Ray
actors, which call `load()` once and then `encode(texts)` per shard.

A recipe is small and picklable (settings, not a model). `encode` runs where the model is and
returns only what the model computed (integer impacts, dense parts), in the corpus order of the
shard's texts; `records` runs in the one writer's process and pairs that with the shard's documents
into what the writer takes. Texts are batched by length within the shard
(`core.batching.encode_in_length_order`), so a shard's output does not depend on which process
encoded it: the shards are byte-identical to those of one process.
"""
from __future__ import annotations

from ..core.length_order import encode_in_length_order
from ..core.devices import Placement, current, placed
from ..core.readers import Document
from ..core.writer import to_impacts


class CorpusShards:
    """`encode corpus`: a sparse encoder built from preset `settings`; with `with_dense`, its dense
    side too (`--dense-store`), records then being (sparse records, (docids, dense parts))."""

    def __init__(self, settings: dict, with_dense: bool = False, placement: Placement | None = None):
        self.settings, self.with_dense = settings, with_dense
        self.placement = placement or current()  # --device/--dtype of the command, sent to every worker
        self.encoder = None

    def __getstate__(self) -> dict:  # never the model
        return {"settings": self.settings, "with_dense": self.with_dense, "placement": self.placement}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def load(self):
        """The encoder, built once."""
        if self.encoder is None:
            from . import build_encoder

            with placed(self.placement):
                self.encoder = build_encoder(self.settings)
        return self.encoder

    def encode(self, texts: list[str], progress=None):
        encoder = self.load()
        encode = encoder.encode_documents_with_dense if self.with_dense else encoder.encode_documents
        with placed(self.placement):
            outputs = encode_in_length_order(encode, texts, self.settings["batch_size"], progress)
        scale = self.settings["impact_scale"]
        if self.with_dense:
            return [to_impacts(output[0], scale) for output in outputs], [output[1] for output in outputs]
        return [to_impacts(vector, scale) for vector in outputs]

    def records(self, shard: list[Document], encoded):
        impacts = encoded[0] if self.with_dense else encoded
        records = [doc.record(vector=vector) for doc, vector in zip(shard, impacts)]
        return (records, ([d.id for d in shard], encoded[1])) if self.with_dense else records


class DenseShards:
    """`encode dense`: a TransformerDenseEncoder built from its keyword arguments; records are
    (docids, vectors)."""

    def __init__(self, options: dict, batch_size: int, placement: Placement | None = None):
        self.options, self.batch_size = options, batch_size
        self.placement = placement or current()
        self.encoder = None

    def __getstate__(self) -> dict:
        return {"options": self.options, "batch_size": self.batch_size, "placement": self.placement}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def load(self):
        if self.encoder is None:
            from ..models.dense.encoder import TransformerDenseEncoder

            with placed(self.placement):
                self.encoder = TransformerDenseEncoder(**self.options)
        return self.encoder

    def encode(self, texts: list[str], progress=None):
        encoder = self.load()
        with placed(self.placement):
            return encode_in_length_order(encoder.encode_documents, texts, self.batch_size, progress)

    def records(self, shard: list[Document], encoded):
        return [d.id for d in shard], encoded
