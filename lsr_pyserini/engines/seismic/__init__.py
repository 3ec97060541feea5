"""Seismic (the `[seismic]` extra): the `seismic` engine (engine.py), its index of the impact shards
(index.py) and `python -m lsr_pyserini.seismic index|search` (command.py)."""
from .engine import SeismicEngine  # noqa: F401  (registers the engine)

from ...core.forwarding import forward_to  # noqa: E402

__getattr__ = forward_to(__name__, "engines.seismic.engine")  # names of engines/seismic.py before the engine folders
