"""Sharded impact search: several Lucene impact indexes searched as one (engine.py), and `lucene merge-runs`."""
from .engine import ShardedImpactEngine, merge_runs, shard_list  # noqa: F401  (registers the engine)

from ...core.forwarding import forward_to  # noqa: E402

__getattr__ = forward_to(__name__, "engines.sharded.engine")  # names of engines/sharded.py before the engine folders
