"""Setuptools entry point; metadata lives in setup.cfg.

The encoder presets live in the top-level `encoders/` folder of the repository and are installed
as the package `lsr_pyserini.presets`, so `--encoder NAME` works from an installed wheel too.
"""
from setuptools import setup

setup(
    package_dir={"": ".", "lsr_pyserini.presets": "encoders"},
    packages=["lsr_pyserini", "lsr_pyserini.encoders", "lsr_pyserini.rerankers", "lsr_pyserini.ssr", "lsr_pyserini.train",
              "lsr_pyserini.sample", "lsr_pyserini.presets"],
)
