"""Milvus (the `[milvus]` extra): the `milvus` engine (engine.py), its collection of the impact shards
(collection.py) and `python -m lsr_pyserini.milvus index|search` (command.py)."""
from .engine import MilvusEngine  # noqa: F401  (registers the engine)

from ...core.forwarding import forward_to  # noqa: E402

__getattr__ = forward_to(__name__, "engines.milvus.engine")  # names of engines/milvus.py before the engine folders
