"""Generators: systems submitted as code, run by the platform to produce their clips.

`api` documents the contract a generator module follows, `baseline` is the built-in procedural
generator, `sandbox` runs submitted code in an isolated process, and `validate` checks a module
against the contract and the clip spec. None of these modules import Django at import time, so
the sandbox runner and the benchmarks can use them without settings.
"""
