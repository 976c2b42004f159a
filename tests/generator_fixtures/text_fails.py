"""A text-conditioned generator that fails on prompts with "explode" in them."""

from ._common import Model, tones


def load_model(path):
    return Model()


def generate(model, category, n, seed):
    return tones(model, category, n, seed)


def generate_from_text(model, prompt, n, seed):
    if "explode" in prompt:
        raise RuntimeError("this generator cannot make that sound")
    return tones(model, prompt, n, seed)
