"""BMP (Block-Max Pruning; the `[bmp]` extra): the `bmp` engine (engine.py), its index of the impact
shards (index.py) and `python -m lsr_pyserini.bmp index|search` (command.py)."""
from .engine import BmpEngine  # noqa: F401  (registers the engine)
