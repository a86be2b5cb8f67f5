"""The ``lookup-knowledge`` command line: ``main`` is the console script's entry point."""

from lookup_knowledge.adapters.cli.app import main

__all__ = ["main"]
