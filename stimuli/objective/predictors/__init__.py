"""Learned per-clip predictors of what listeners say about a clip (e.g. Audiobox Aesthetics).

Each module loads a released checkpoint into a network built here under the release's parameter
names and predicts, for one clip, the ratings its listeners were trained to give. Torch is
imported by the modules themselves, which only the workers import.
"""

# The entry the platform's untrained stand-in files carry beside the released ones
# (standins.py), which the released code ignores: a predictor loaded from such a file says so,
# and so do the model ids of its values (predictor_scores.py, with stimuli/predictor_axes.py's
# mark) and the results that show them.
UNTRAINED = "untrained_standin"
