"""Generator modules for the validator and sandbox tests: one good, the rest each broken one way.

Self-contained (numpy only), since the sandbox makes only the `tests` package readable.
"""
