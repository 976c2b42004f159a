from ._common import Model, tones


def load_model(path):
    return Model(sample_rate=16000)


def generate(model, category, n, seed):
    return tones(model, category, n, seed)
