"""Dense search: the `dense` engine, exact inner product over a dense store (engine.py), and
`python -m lsr_pyserini.search_dense` (command.py)."""
from .engine import DenseEngine  # noqa: F401  (registers the engine)

from ...core.forwarding import forward_to  # noqa: E402

__getattr__ = forward_to(__name__, "engines.dense.engine")  # names of engines/dense.py before the engine folders
