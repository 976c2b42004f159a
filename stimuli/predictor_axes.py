"""The learned predictors' axes as the base knows them (the values are stimuli/predictor_models.py's
rows; the predictors themselves are the objective stage's): their order, what each measures, and
the mark that says a value came from untrained stand-in files. No Django here, so the scoring's
offline code reads them too."""

from __future__ import annotations

# Audiobox Aesthetics' four axes, then PAM's one, in the order every table shows them.
AXES = ("PQ", "PC", "CE", "CU", "PAM")
# What each axis measures, on which scale, for a page's headings.
AXIS_TITLES = {
    "PQ": "Audiobox Aesthetics: production quality, 1-10",
    "PC": "Audiobox Aesthetics: production complexity, 1-10",
    "CE": "Audiobox Aesthetics: content enjoyment, 1-10",
    "CU": "Audiobox Aesthetics: content usefulness, 1-10",
    "PAM": "PAM: clean rather than noisy, 0-1",
}
# What the model id of an untrained stand-in's values ends with (stimuli/objective/predictors/
# standins.py writes such files): every table of those values says they mean nothing.
UNTRAINED_MARK = "(untrained stand-in)"
