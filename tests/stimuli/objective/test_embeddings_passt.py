"""PaSST (hear21passt's passt_s_swa_p16_128_ap476): the released checkpoint's layout, clip and
timestamp embeddings, errors, and, where hear21passt imports, the same embeddings as its HEAR
wrapper on the same weights.

No released weights are available to the tests: a random-initialised checkpoint with the
published parameter names and shapes stands in for `passt-s-f128-p16-s10-ap.476-swa.pt`.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch

from stimuli.objective.embeddings import WeightsMissing, load_embedding_model

RATE = 32000


def released_shapes() -> dict[str, tuple]:
    """Every tensor of the released checkpoint, by the authors' names, with its shape."""
    shapes = {
        "cls_token": (1, 1, 768), "dist_token": (1, 1, 768), "new_pos_embed": (1, 2, 768),
        "freq_new_pos_embed": (1, 768, 12, 1), "time_new_pos_embed": (1, 768, 1, 99),
        "patch_embed.proj.weight": (768, 1, 16, 16), "patch_embed.proj.bias": (768,),
        "norm.weight": (768,), "norm.bias": (768,),
        "head.0.weight": (768,), "head.0.bias": (768,),
        "head.1.weight": (527, 768), "head.1.bias": (527,),
        "head_dist.weight": (527, 768), "head_dist.bias": (527,),
    }  # fmt: skip
    for i in range(12):
        block = {
            "norm1.weight": (768,), "norm1.bias": (768,), "norm2.weight": (768,), "norm2.bias": (768,),
            "attn.qkv.weight": (2304, 768), "attn.qkv.bias": (2304,),
            "attn.proj.weight": (768, 768), "attn.proj.bias": (768,),
            "mlp.fc1.weight": (3072, 768), "mlp.fc1.bias": (3072,),
            "mlp.fc2.weight": (768, 3072), "mlp.fc2.bias": (768,),
        }  # fmt: skip
        shapes.update({f"blocks.{i}.{name}": shape for name, shape in block.items()})
    return shapes


def released_checkpoint(path, seed: int = 0) -> dict:
    rng = torch.Generator().manual_seed(seed)
    state = {}
    for name, shape in released_shapes().items():
        if ("norm" in name and name.endswith("weight")) or name == "head.0.weight":
            state[name] = 1.0 + 0.1 * torch.randn(shape, generator=rng)
        else:
            state[name] = 0.05 * torch.randn(shape, generator=rng)
    torch.save(state, path)
    return state


def noise(seconds: float, rate: int = RATE, n: int = 2, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 0.1, (n, int(seconds * rate))).astype(np.float32)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("passt") / "passt-s-f128-p16-s10-ap.476-swa.pt"
    released_checkpoint(path)
    return path


def test_the_released_checkpoint_loads_and_embeds_each_clip(checkpoint):
    model = load_embedding_model("passt", {}, str(checkpoint), device="cpu")
    assert model.model_id.startswith("passt:clip@")
    assert model.sample_rate == RATE and model.timestamp_embedding_size == 768
    clips = model.embed(noise(2.0, 22050), 22050)
    assert clips.shape == (2, 1, 768) and np.isfinite(clips).all() and clips.std() > 0
    # A clip over the model's 10 s goes through in windows and still gives one embedding.
    assert model.embed(noise(12.0, n=1), RATE).shape == (1, 1, 768)
    _, stamps = model.module.get_timestamp_embeddings(torch.from_numpy(noise(3.0)), model.model)
    assert stamps.tolist() == [[1500.0], [1500.0]]


def test_timestamp_embeddings_are_the_releases_160_ms_windows_every_50_ms(checkpoint):
    model = load_embedding_model("passt", {"frames": True, "logits": True}, str(checkpoint), "cpu")
    assert model.model_id.startswith("passt:frames-logits@")
    emb, stamps = model.module.get_timestamp_embeddings(torch.from_numpy(noise(1.0)), model.model)
    # 1 s padded by 80 ms each side: windows at 0, 50, ..., 1,000 ms.
    assert emb.shape == (2, 21, 527 + 768)
    assert stamps[0].tolist() == pytest.approx([50.0 * i for i in range(21)])
    scene = model.module.get_scene_embeddings(torch.from_numpy(noise(1.0)), model.model)
    assert scene.shape == (2, 1295)


def test_a_missing_or_other_checkpoint_is_an_error_naming_the_file_and_where_it_is_published(
    tmp_path, settings
):
    settings.FOLEY_MODEL_DIR = str(tmp_path)
    with pytest.raises(
        WeightsMissing, match=r"passt-s-f128-p16-s10-ap\.476-swa\.pt.*kkoutini/PaSST"
    ):
        load_embedding_model("passt")
    state = released_checkpoint(tmp_path / "other.pt")
    del state["dist_token"]
    state["time_new_pos_embed"] = torch.zeros(1, 768, 1, 62)  # a 16-frame-stride model
    torch.save({"model": state}, tmp_path / "other.pt")
    with pytest.raises(
        ValueError, match=r"lacks dist_token; time_new_pos_embed is \(1, 768, 1, 62\)"
    ):
        load_embedding_model("passt", {}, str(tmp_path / "other.pt"))


def _reference():
    """hear21passt's network and front end, or a skip saying why they cannot run here."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            from hear21passt.models.passt import get_model
            from hear21passt.models.preprocess import AugmentMelSTFT
            from hear21passt.wrapper import PasstBasicWrapper
    except Exception as exc:  # torchaudio built for another torch fails at import, not install
        pytest.skip(f"hear21passt does not import here ({type(exc).__name__}: {exc})")
    return get_model, AugmentMelSTFT, PasstBasicWrapper


def test_the_same_embeddings_as_hear21passt_on_the_same_weights(checkpoint):
    get_model, AugmentMelSTFT, PasstBasicWrapper = _reference()
    with contextlib.redirect_stdout(io.StringIO()):
        net = get_model(arch="passt_s_swa_p16_128_ap476", pretrained=False)
        net.load_state_dict(torch.load(checkpoint))
        mel = AugmentMelSTFT(n_mels=128, sr=32000, win_length=800, hopsize=320, n_fft=1024,
                             freqm=48, timem=192, htk=False, fmin=0.0, fmax=None, norm=1,
                             fmin_aug_range=10, fmax_aug_range=2000)  # fmt: skip
        reference = PasstBasicWrapper(mel=mel, net=net, mode="all").eval()
    ours = load_embedding_model("passt", {"logits": True}, str(checkpoint), "cpu")
    framed = load_embedding_model("passt", {"logits": True, "frames": True}, str(checkpoint), "cpu")
    audio = torch.from_numpy(noise(4.0))
    with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
        scene = reference.get_scene_embeddings(audio).numpy()
        frames, stamps = reference.get_timestamp_embeddings(audio[:, :RATE])
    got = ours.embed(audio.numpy(), RATE)[:, 0]
    np.testing.assert_allclose(got, scene, rtol=1e-4, atol=1e-4 * np.abs(scene).max())
    got, got_stamps = framed.module.get_timestamp_embeddings(audio[:, :RATE], framed.model)
    np.testing.assert_allclose(got, frames, rtol=1e-4, atol=1e-4 * frames.abs().max().item())
    np.testing.assert_allclose(got_stamps, stamps)
