"""Old import paths kept working after a move: a module `__getattr__` that reads a name from the
module that holds it now, with a DeprecationWarning (lsr_pyserini/moved.py keeps whole old modules)."""
from __future__ import annotations

import importlib
import warnings

PACKAGE = __package__.rsplit(".", 1)[0]
# names that changed with their module: an engine's index class was a "Searcher" (the public facade's name)
RENAMED = {"PisaSearcher": "PisaIndex", "SeismicSearcher": "SeismicIndex"}


def forward_to(door: str, room: str):
    """A module `__getattr__` for a command's door (or an engine's package): a name that lived in the
    module before it became a door is read from the room that holds it now, with a DeprecationWarning."""
    def __getattr__(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        module = importlib.import_module(f"{PACKAGE}.{room}")
        if not hasattr(module, RENAMED.get(name, name)):
            raise AttributeError(f"module {door!r} has no attribute {name!r}")
        warnings.warn(f"{door}.{name} moved to {PACKAGE}.{room}", DeprecationWarning, stacklevel=2)
        return getattr(module, RENAMED.get(name, name))

    return __getattr__
