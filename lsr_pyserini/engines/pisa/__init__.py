"""PISA (the `[pisa]` extra): the `pisa` engine (engine.py), its index of the impact shards (index.py) and
`python -m lsr_pyserini.pisa index|search` (command.py)."""
from .engine import PisaEngine  # noqa: F401  (registers the engine)

from ...core.forwarding import forward_to  # noqa: E402

__getattr__ = forward_to(__name__, "engines.pisa.engine")  # names of engines/pisa.py before the engine folders
