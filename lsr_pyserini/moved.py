"""Where the modules of before the one-model-per-family layout went, so that a script importing from
an old place keeps working: `from lsr_pyserini.encoders.bm25aug import AugmentedQueries`,
`import lsr_pyserini.core.quantize` and the like resolve to the new modules, with a
DeprecationWarning naming them. A name is looked up in the new modules in the order listed.

Not kept: helpers that became methods of a family's model (bge-m3's `dense_score`, `sparse_score`,
`colbert_score`, `candidate_scores`: `BgeM3Model.score`/`scores`; SPLADE's `run_to_head`:
`kernels.vocabulary`), the training modules' `add_arguments` (flags are generated from the
declarations now), `SAETrainer` (now `SAEFit`, a model of the training loop), and the submodules of
the old `lsr_pyserini.ssr` package (`python -m lsr_pyserini.ssr` is unchanged; the modules are
`lsr_pyserini.models.ssr.*`).

The engine-folder layout moved each engine's modules into `engines/NAME/` and every command into a
room (`commands/`, or its engine's folder) behind a door of the same name at the top of the package:
`python -m lsr_pyserini.X` is unchanged, and a name imported from a door (`from lsr_pyserini.lucene
import run_tool`) or from an engine's old module (`lsr_pyserini.engines.lucene.run_precisions`) is
read from its room with a DeprecationWarning (`forward_to`).

One meaning per name: `core.settings` is `core.declarations`, `models.settings` is
`models.shared_settings`, `models.configs` is `models.resolve` and `serve.config` is `serve.served`
(each family's `models/NAME/config.py` keeps its name: the family's schema).
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings

from .core.forwarding import forward_to  # noqa: F401  (the doors' and engine folders' old names)

FAMILY = {name: tuple(f"models.{name}.{module}" for module in modules) for name, modules in {
    "bgem3": ("model", "encoder", "config"), "bm25aug": ("model", "config"), "dense": ("encoder", "config", "queries"),
    "promptreps": ("encoder", "config"), "sparseembed": ("encoder", "config"), "splade": ("model", "encoder", "config"),
    "tilde": ("model", "config"), "tildev2": ("encoder", "config")}.items()}

MOVED = {
    "core.batching": ("core.length_order",),
    "core.fastpath": ("kernels.fastpath",),
    "core.jit": ("kernels.jit",),
    "core.quantize": ("kernels.int8",),
    "core.regression": ("commands.regress.run",),
    "core.shards": ("engines.sharded.engine",),
    "core.wordpiece_bm25": ("kernels.wordpiece_bm25", "core.indexes"),
    "encoders.base": ("models.base", "models.registry"),
    "encoders.shards": ("encoders.recipes",),
    "encoders.ssr": ("models.ssr.encoder",),
    **{f"encoders.{name}": modules for name, modules in FAMILY.items()},
    "encoders.splade": (*FAMILY["splade"], "kernels.vocabulary"),
    "rerankers.base": ("models.base", "models.registry"),
    **{f"rerankers.{name}": (f"models.{name}.reranker",)
       for name in ("bgem3", "dense", "promptreps", "sparseembed", "ssr", "tilde")},
    "train.base": ("models.registry",),
    "train.losses": ("models.losses",),
    **{f"train.{name}": (f"models.{name}.training",)
       for name in ("bgem3", "bm25aug", "sparseembed", "splade", "ssr", "tilde", "tildev2")},
}
MOVED["train.ssr"] += ("models.ssr.sae",)
# the engine-folder layout: an engine's index (its "store" before) lies in its folder; commands in commands/
MOVED.update({
    "stores.pisa": ("engines.pisa.index",), "stores.seismic": ("engines.seismic.index",),
    "stores.milvus": ("engines.milvus.collection",), "core.java": ("core.jvm",),
    "regression": ("commands.regress.run",), "serve.rest2": ("serve.rest_pyserini2",),
})
# one meaning per name: the four modules called config or settings say what they hold
MOVED.update({
    "core.settings": ("core.declarations",),           # Setting and Schema: how a setting is declared
    "models.settings": ("models.shared_settings",),     # the settings several families share
    "models.configs": ("models.resolve",),              # a preset or checkpoint resolved into one config
    "serve.config": ("serve.served",),                  # what the service serves, and its bounds
})
from .core.forwarding import RENAMED  # noqa: E402  (names that changed with their module)


class MovedModule(types.ModuleType):
    """An old module path: each name is read from the new modules on first use."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        for target in self.__moved_to__:
            module = importlib.import_module(f"{__package__}.{target}")
            if hasattr(module, RENAMED.get(name, name)):
                value = getattr(module, RENAMED.get(name, name))
                setattr(self, name, value)
                return value
        raise AttributeError(f"module {self.__name__!r} (moved to {', '.join(self.__moved_to__)}) has no "
                             f"attribute {name!r}")


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        old = fullname.removeprefix(f"{__package__}.")
        if old != fullname and old in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        module = MovedModule(spec.name)
        module.__moved_to__ = MOVED[spec.name.removeprefix(f"{__package__}.")]
        return module

    def exec_module(self, module) -> None:
        warnings.warn(f"{module.__name__} moved to {' and '.join(f'{__package__}.{t}' for t in module.__moved_to__)}",
                      DeprecationWarning, stacklevel=2)


def install() -> None:
    """Resolve the old module paths (after every other finder: a module of today always wins)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())
