"""PAM on MS-CLAP 2023: the released file's layout loads and scores clips in [0, 1], every
mismatch of a file is named at once, a missing file names itself, its setting and where it is
published, GPT-2's BPE gives GPT-2's public token ids, the windows and the resampling are PAM's;
and, where the reference code imports, the same scores as msclap's CLAP and as PAM's own code
on the same weights (scripts/crosscheck_reference_predictors_pam.py runs those).

No released weights are available to the tests: a random checkpoint in the released form (a
dict whose `model` holds the state dict) stands in for `CLAP_weights_2023.pth`, with HTSAT-tiny
whole and a small GPT-2 (2 layers, 128 wide: 2 heads) over GPT-2's vocabulary size. The tokenizer files
are a part of GPT-2's: its 256 byte tokens, the merges that PAM's prompts and "Hello world" go
through, in GPT-2's order, and those tokens, all under GPT-2's ids. Both are written by the
platform's stand-ins (stimuli/objective/predictors/standins.py).
"""

from __future__ import annotations

import importlib.util
import json
import types
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from stimuli.objective.embeddings import WeightsMissing
from stimuli.objective.predictors import msclap, pam
from stimuli.objective.predictors.standins import (
    DEMO_SIZES,
    INNER,
    LAYERS,
    POSITIONS,
    VOCAB,
    WIDTH,
    msclap_state,
    tokenizer_files,
    write_pam,
)
from stimuli.objective.predictors.standins import msclap_state as released_state

TOLERANCE = 1e-5
# GPT-2's ids of PAM's prompts as msclap feeds them (the text, " ", <|endoftext|>).
CLEAN = [1169, 2128, 318, 1598, 290, 3424, 13, 220, 50256]
NOISY = [1169, 2128, 318, 31210, 290, 351, 20316, 13, 220, 50256]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pam")
    tokenizer_files(root / "gpt2")
    torch.save({"model": released_state()}, root / msclap.WEIGHTS_FILE)
    return root


@pytest.fixture(scope="module")
def model(files) -> pam.Pam:
    return pam.load(files / msclap.WEIGHTS_FILE, files / "gpt2", device="cpu")


def noise(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.normal(0, 0.1, int(seconds * rate)).astype(np.float32)


def test_prompts_are_tokenised_with_gpt2s_public_ids(tmp_path):
    folder = tokenizer_files(tmp_path / "gpt2")
    tokenizer = msclap.Gpt2Tokenizer(folder)
    assert tokenizer.encode("Hello world<|endoftext|>") == [15496, 995, 50256]
    ids = tokenizer(list(pam.PROMPTS))
    assert ids.shape == (2, 77)
    assert ids[0, :9].tolist() == CLEAN and ids[1, :10].tolist() == NOISY
    assert ids[0, 9:].eq(0).all() and ids[1, 10:].eq(0).all()  # "!", the padding, is id 0
    other = tokenizer_files(tmp_path / "roberta")
    (other / "vocab.json").write_text(json.dumps({"<s>": 0, "!": 1}), "utf-8")
    with pytest.raises(ValueError, match="not GPT-2's vocabulary"):
        msclap.Gpt2Tokenizer(other)
    try:
        from tokenizers import ByteLevelBPETokenizer
    except ImportError:
        return
    reference = ByteLevelBPETokenizer(str(folder / "vocab.json"), str(folder / "merges.txt"))
    for text in ("the sound is clear and clean. ", "Hello world", "it's  a dog\tand 3 ants."):
        assert tokenizer.ids(text) == reference.encode(text).ids


@pytest.mark.slow  # HTSAT-tiny whole: seconds per window on 2 shared cores
def test_the_released_layout_loads_and_scores_each_clip_in_0_1(model):
    assert model.scale == pytest.approx(1 / 0.07, rel=1e-5)
    assert model.prompts.shape == (2, 1024)
    clips = np.stack([noise(4.0, 22050, seed) for seed in range(2)])
    # [samples] and [1, samples] are both one channel.
    scores = [pam.score(model, clips[0], 22050), pam.score(model, clips[1][None], 22050)]
    assert all(0.0 <= s <= 1.0 for s in scores) and scores[0] != scores[1]
    with pytest.raises(ValueError, match="one channel"):
        pam.score(model, clips[:2], 22050)
    with pytest.raises(ValueError, match="empty"):
        pam.score(model, np.zeros(0, np.float32), 22050)


def test_windows_are_pams_and_a_clip_scores_the_mean_of_its_windows():
    clip = torch.arange(16 * 44100, dtype=torch.float32)
    w = pam.windows(clip)
    # Two whole 7 s windows from the start, and the last 7 s for the 2 s left over.
    assert w.shape == (3, 308700)
    assert w[0, 0] == 0 and w[1, 0] == 308700 and w[2, -1] == clip[-1] and w[2, 0] == 396900
    assert pam.windows(clip[: 2 * 308700]).shape == (2, 308700)
    assert pam.windows(clip, first_only=True).tolist() == [clip[:308700].tolist()]
    short = pam.windows(clip[:100000])  # 2.3 s: repeated whole four times, cut at 7 s
    assert short.shape == (1, 308700)
    assert short[0, 100000] == 0 and short[0, 308699] == clip[8699]
    # A clip's score is the mean of its windows' (a stand-in score per window: its last sample).
    model = types.SimpleNamespace(device=torch.device("cpu"), window_scores=lambda w: w[:, -1])
    audio = clip.numpy() / clip[-1].item()
    expected = (w[:, -1] / clip[-1]).double().mean().item()
    assert pam.score(model, audio, 44100) == pytest.approx(expected, rel=1e-6)
    assert pam.score(model, audio, 44100, first_only=True) == pytest.approx(308699 / clip[-1])
    # Clips scored together: their windows in one run, each clip the mean of its own.
    calls = []
    model.window_scores = lambda w: calls.append(len(w)) or w[:, -1]
    shorter = audio[: 8 * 44100]
    together = pam.scores(model, [audio, shorter, audio], 44100)
    assert calls == [3 + 2 + 3]
    assert together == pytest.approx([pam.score(model, a, 44100) for a in (audio, shorter, audio)])
    assert pam.scores(model, [], 44100) == []


def test_resampling_keeps_a_tone_and_gives_torchaudios_length():
    t = np.arange(22050 * 2) / 22050
    tone = torch.tensor(0.5 * np.sin(2 * np.pi * 1000 * t), dtype=torch.float32)
    out = msclap.resample(tone, 22050, 44100)
    assert out.shape == (88200,)
    expected = 0.5 * np.sin(2 * np.pi * 1000 * np.arange(88200) / 44100)
    np.testing.assert_allclose(out[1000:-1000], expected[1000:-1000], atol=2e-3)
    assert msclap.resample(tone[:1001], 48000, 44100).shape == (920,)  # ceil(1001 * 147 / 160)
    assert msclap.resample(tone, 44100, 44100) is tone


def test_every_mismatch_of_a_file_is_named_in_one_error(tmp_path):
    state = released_state()
    del state["audio_encoder.projection.linear2.weight"]
    del state["caption_encoder.base.h.1.ln_2.bias"]
    state["caption_encoder.base.h.0.attn.c_attn.weight"] = torch.zeros(WIDTH, WIDTH)
    state["audio_encoder.base.htsat.bn0.weight"] = torch.zeros(32)
    state["text_projection.0.weight"] = torch.zeros(1)
    state["caption_encoder.base.h.0.attn.extra"] = torch.zeros(1)
    torch.save({"model": state}, tmp_path / "other.pth")
    tokenizer_files(tmp_path / "gpt2")
    with pytest.raises(msclap.WrongCheckpoint) as caught:
        pam.load(tmp_path / "other.pth", tmp_path / "gpt2", device="cpu")
    error = caught.value
    assert error.missing == [
        "audio_encoder.projection.linear2.weight", "caption_encoder.base.h.1.ln_2.bias"
    ]  # fmt: skip
    assert error.unexpected == ["text_projection.0.weight", "caption_encoder.base.h.0.attn.extra"]
    assert len(error.wrong) == 2
    message = str(error)
    for name in (*error.missing, *error.unexpected):
        assert name in message
    assert "caption_encoder.base.h.0.attn.c_attn.weight is (128, 128), not (128, 384)" in message
    assert "audio_encoder.base.htsat.bn0.weight is (32,), not (64,)" in message
    assert "CLAP_weights_2023.pth" in message and "microsoft/msclap" in message


def test_the_networks_sizes_are_read_from_the_file_and_held_to_as_strictly(tmp_path):
    # The released layout gives HTSAT-tiny, 1,024-point DFTs and the 1,024-d joint space.
    assert msclap.audio_sizes(released_state()) == (msclap.HTSAT_TINY, 1024)
    small = DEMO_SIZES.msclap
    weights, words = write_pam(tmp_path / "demo", sizes=small)
    model = pam.load(weights, words, device="cpu")
    htsat = model.audio.base.htsat
    assert (htsat.patch_embed.proj.out_channels, len(htsat.layers)) == (8, 4)
    assert htsat.spectrogram_extractor.n_fft == 128 and model.prompts.shape == (2, small.joint)
    assert model.untrained and 0.0 <= pam.score(model, noise(4.0, 22050), 22050) <= 1.0
    # Each tensor of another shape than the rest of the file implies is named, as in the
    # released layout; sizes no HTSAT has are named before anything is built.
    state = msclap_state(sizes=small)
    state["audio_encoder.base.htsat.layers.1.blocks.0.mlp.fc1.weight"] = torch.zeros(32, 16)
    state["audio_encoder.projection.linear2.weight"] = torch.zeros(1024, 1024)
    torch.save({"model": state}, tmp_path / "small.pth")
    with pytest.raises(msclap.WrongCheckpoint) as caught:
        pam.load(tmp_path / "small.pth", words, device="cpu")
    assert caught.value.wrong == [
        "audio_encoder.base.htsat.layers.1.blocks.0.mlp.fc1.weight is (32, 16), not (64, 16)",
        "audio_encoder.projection.linear2.weight is (1024, 1024), not (32, 32)",
    ]
    state = msclap_state(sizes=small)
    state["audio_encoder.base.htsat.patch_embed.proj.weight"] = torch.zeros(6, 1, 4, 4)
    torch.save({"model": state}, tmp_path / "odd.pth")
    with pytest.raises(ValueError, match="width 6 is not divided among its 4 heads"):
        pam.load(tmp_path / "odd.pth", words, device="cpu")


def test_only_a_file_marked_as_a_stand_in_reads_as_untrained(files, tmp_path):
    # The module's file holds the state dict alone, as released; write_pam marks its own.
    assert msclap.read_release(files / msclap.WEIGHTS_FILE)[1] is False
    weights, _ = write_pam(tmp_path, sizes=DEMO_SIZES.msclap)
    assert msclap.read_release(weights)[1] is True


def test_a_missing_file_names_itself_its_setting_and_where_it_is_published(tmp_path, settings):
    settings.FOLEY_MODEL_DIR = str(tmp_path)
    with pytest.raises(WeightsMissing) as caught:
        pam.load(device="cpu")
    message = str(caught.value)
    assert str(tmp_path / "CLAP_weights_2023.pth") in message
    assert "FOLEY_PAM_WEIGHTS" in message and "Hugging Face, microsoft/msclap" in message
    settings.FOLEY_PAM_WEIGHTS = str(tmp_path / "elsewhere.pth")
    with pytest.raises(WeightsMissing, match=r"elsewhere\.pth is missing"):
        pam.load(device="cpu")
    (tmp_path / "elsewhere.pth").write_bytes(b"")
    with pytest.raises(WeightsMissing) as caught:
        pam.load(device="cpu")
    message = str(caught.value)
    assert "vocab.json, merges.txt missing in" in message and str(tmp_path / "gpt2") in message
    assert "FOLEY_PAM_TOKENIZER" in message and "openai-community/gpt2" in message


def _reference(name: str):
    try:
        module = importlib.import_module(name)
        import transformers
    except Exception as exc:  # msclap's and PAM's code import torchaudio, built for one torch
        pytest.skip(
            f"{name} does not import here ({type(exc).__name__}: {exc}); "
            "scripts/crosscheck_reference_predictors_pam.py runs this comparison"
        )
    return module, transformers


def _hf_parts(transformers, files: Path):
    """transformers' AutoModel and AutoTokenizer as msclap and PAM call them ('gpt2'), giving
    the test's GPT-2 and tokenizer instead of fetching GPT-2 small from the hub."""
    config = transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=POSITIONS, n_embd=WIDTH, n_layer=LAYERS, n_head=WIDTH // 64,
        n_inner=INNER,
    )  # fmt: skip
    model = types.SimpleNamespace(from_pretrained=lambda name: transformers.GPT2Model(config))
    folder = files / "gpt2"

    def tokenizer(name):
        return transformers.GPT2TokenizerFast(
            str(folder / "vocab.json"), str(folder / "merges.txt")
        )

    return model, types.SimpleNamespace(from_pretrained=tokenizer)


@pytest.mark.slow
def test_the_same_embeddings_and_scores_as_msclap_on_the_same_weights(
    files, model, monkeypatch, record_property
):
    reference, transformers = _reference("msclap.models.clap")
    auto_model, auto_tokenizer = _hf_parts(transformers, files)
    monkeypatch.setattr(reference, "AutoModel", auto_model)
    clap = reference.CLAP(
        audioenc_name="HTSAT", sample_rate=44100, window_size=1024, hop_size=320, mel_bins=64,
        fmin=50, fmax=8000, classes_num=527, out_emb=768, text_model="gpt2",
        transformer_embed_dim=WIDTH, d_proj=1024,
    )  # fmt: skip
    state = torch.load(files / msclap.WEIGHTS_FILE)["model"]
    missing, unexpected = clap.load_state_dict(state, strict=False)
    assert not missing and all(k.endswith((".attn.bias", ".attn.masked_bias")) for k in unexpected)
    clap.eval()
    # msclap's preprocess_text: the prompt and ' <|endoftext|>', padded with '!' to 77.
    words = auto_tokenizer.from_pretrained("gpt2")
    words.add_special_tokens({"pad_token": "!"})
    batch = [
        words.encode_plus(text=f"{p} <|endoftext|>", max_length=77, padding="max_length")
        for p in pam.PROMPTS
    ]
    tokens = {k: torch.tensor([b[k] for b in batch]) for k in ("input_ids", "attention_mask")}
    net = msclap.load_msclap(files / msclap.WEIGHTS_FILE)
    ours = msclap.Gpt2Tokenizer(files / "gpt2")(list(pam.PROMPTS))
    assert ours.tolist() == tokens["input_ids"].tolist()
    audio = np.stack([noise(7.0, 44100, seed) for seed in range(3)])
    with torch.no_grad():
        text = clap.caption_encoder(tokens)
        sound = clap.audio_encoder(torch.from_numpy(audio))[0]
        mine_text = net.caption_encoder(ours)
        mine_sound = net.audio_encoder(torch.from_numpy(audio))
        # PAM's compute_similarity and evaluate on msclap's embeddings.
        unit_text = text / text.norm(dim=-1, keepdim=True)
        unit_sound = sound / sound.norm(dim=-1, keepdim=True)
        similarity = (clap.logit_scale.exp() * unit_text @ unit_sound.T).T
        expected = torch.softmax(similarity, dim=1)[:, 0].numpy()
    scores = np.array([pam.score(model, clip, 44100) for clip in audio])
    differences = {
        "text embeddings": (mine_text - text).abs().max().item(),
        "audio embeddings": (mine_sound - sound).abs().max().item(),
        "scores": float(np.abs(scores - expected).max()),
    }
    for name, value in differences.items():
        record_property(f"msclap {name}", value)
    np.testing.assert_allclose(mine_text, text, atol=TOLERANCE)
    np.testing.assert_allclose(mine_sound, sound, atol=TOLERANCE)
    np.testing.assert_allclose(scores, expected, atol=TOLERANCE)
    # Scores away from 0 and 1, where a wrong embedding would still move them.
    assert expected.min() > 0.01 and expected.max() < 0.99


def test_resampling_is_torchaudios(record_property):
    try:
        from torchaudio.transforms import Resample
    except Exception as exc:
        pytest.skip(f"torchaudio does not import here ({type(exc).__name__}: {exc})")
    worst = 0.0
    for rate in (22050, 48000, 16000, 32000, 8000):
        audio = torch.from_numpy(noise(1.3, rate, rate))
        expected = Resample(rate, 44100)(audio[None])[0]
        ours = msclap.resample(audio, rate, 44100)
        assert ours.shape == expected.shape
        worst = max(worst, (ours - expected).abs().max().item())
    record_property("torchaudio resampling", worst)
    assert worst < 1e-6


@pytest.mark.slow
@pytest.mark.parametrize("first_only", [False, True])
def test_the_same_scores_as_pams_own_code(files, model, monkeypatch, tmp_path, first_only,
                                          record_property):  # fmt: skip
    package, transformers = _reference("PAM")
    code = importlib.import_module("PAM.PAM")
    auto_model, auto_tokenizer = _hf_parts(transformers, files)
    monkeypatch.setattr(importlib.import_module("PAM.models.clap"), "AutoModel", auto_model)
    monkeypatch.setattr(code, "AutoTokenizer", auto_tokenizer)
    # Its config.yml gives GPT-2 small's width; the test's GPT-2 is narrower.
    build = code.CLAP
    monkeypatch.setattr(code, "CLAP", lambda **kw: build(**{**kw, "transformer_embed_dim": WIDTH}))
    spec = importlib.util.spec_from_file_location(
        "pam_dataset", Path(package.__file__).parents[1] / "dataset.py"
    )
    dataset = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dataset)
    clips = [(4.0, 22050), (16.0, 48000), (7.0, 44100), (3.0, 16000), (21.5, 32000)]
    paths = []
    for i, (seconds, rate) in enumerate(clips):
        paths.append(str(tmp_path / f"{i}.wav"))
        sf.write(paths[-1], noise(seconds, rate, i), rate, subtype="FLOAT")
    reference = code.PAM(model_fp=str(files / msclap.WEIGHTS_FILE), use_cuda=False)
    data = dataset.ExampleDatasetFiles(src=paths, repro=first_only)
    _, audios, index = data.collate([data[i] for i in range(len(paths))])
    expected, _ = reference.evaluate(audios, index)
    ours = [pam.score(model, *sf.read(p, dtype="float32"), first_only=first_only) for p in paths]
    worst = float(np.abs(np.array(ours) - np.array(expected)).max())
    record_property(f"PAM's own code, first_only={first_only}", worst)
    np.testing.assert_allclose(ours, expected, atol=TOLERANCE)
