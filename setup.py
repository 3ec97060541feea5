"""Setuptools entry point; metadata lives in setup.cfg. The encoder presets (`lsr_pyserini/presets/`)
and the sample collection are package data, so wheels, sdists and editable installs all find them."""
from setuptools import setup

setup()
