"""Learned per-clip predictors of what listeners say about a clip (e.g. Audiobox Aesthetics).

Each module loads a released checkpoint into a network built here under the release's parameter
names and predicts, for one clip, the ratings its listeners were trained to give. Torch is
imported by the modules themselves, which only the workers import.
"""
