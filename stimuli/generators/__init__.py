"""Generators: systems submitted as code, run by the platform to produce their clips.

`contract` is what a generator module provides, `baseline` the built-in procedural generator,
`source` finds and unpacks a generator's code, `isolation` and `sandbox` run it isolated (bubblewrap,
seccomp, a cgroup), `runner` is the process inside, and `validate` checks a module against the
contract and the clip spec. None of these modules import Django at import time, so
the sandbox runner and the benchmarks can use them without settings.

The stage's Django side: `generation` (attach code, validate it, generate a system's clips),
`tasks` (its Celery tasks), `api` (REST), `views` and `urls` (organizer pages).
"""
