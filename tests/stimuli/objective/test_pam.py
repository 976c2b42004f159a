"""PAM on MS-CLAP 2023: the released file's layout loads and scores clips in [0, 1], every
mismatch of a file is named at once, a missing file names itself, its setting and where it is
published, GPT-2's BPE gives GPT-2's public token ids, the windows and the resampling are PAM's;
and, where the reference code imports, the same scores as msclap's CLAP and as PAM's own code
on the same weights (scripts/crosscheck_reference_predictors_pam.py runs those).

No released weights are available to the tests: a random checkpoint in the released form (a
dict whose `model` holds the state dict) stands in for `CLAP_weights_2023.pth`, with HTSAT-tiny
whole and a small GPT-2 (2 layers, 128 wide: 2 heads) over GPT-2's vocabulary size. The tokenizer files
are a part of GPT-2's: its 256 byte tokens, the merges that PAM's prompts and "Hello world" go
through, in GPT-2's order, and those tokens, all under GPT-2's ids.
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
from tests.stimuli.objective.test_embeddings_clap import released_audio_state

VOCAB, POSITIONS, WIDTH, LAYERS, INNER = 50257, 80, 128, 2, 256
TOLERANCE = 1e-5
# GPT-2's merges that its tokenisation of the strings below applies, in GPT-2's order.
MERGES = """Ġ a|h e|Ġ s|Ġ w|Ġ c|i t|i s|a n|o r|o u|Ġa n|a r|Ġan d|l e|l l|Ġ n|c t|Ġ is|l d|it h
Ġw ith|n d|i f|Ġw or|a ct|Ġa r|ou nd|Ġn o|e ll|Ġwor ld|t he|Ġc le|Ġar t|Ġcle ar|Ġs ound|Ġcle an
act s|ell o|is y|Ġart if|H ello|Ġartif acts|Ġno isy"""
# Their tokens' ids in GPT-2's vocab.json (public: openai-community/gpt2 on Hugging Face).
TOKENS = {
    "Ġa": 257, "he": 258, "Ġs": 264, "Ġw": 266, "Ġc": 269, "it": 270, "is": 271, "an": 272,
    "or": 273, "ou": 280, "Ġan": 281, "ar": 283, "Ġand": 290, "le": 293, "ll": 297, "Ġn": 299,
    "ct": 310, "Ġis": 318, "ld": 335, "ith": 342, "Ġwith": 351, "nd": 358, "if": 361,
    "Ġwor": 476, "act": 529, "Ġar": 610, "ound": 633, "Ġno": 645, "ell": 695, "Ġworld": 995,
    "the": 1169, "Ġcle": 1190, "Ġart": 1242, "Ġclear": 1598, "Ġsound": 2128, "Ġclean": 3424,
    "acts": 8656, "ello": 11109, "isy": 13560, "Ġartif": 14077, "Hello": 15496,
    "Ġartifacts": 20316, "Ġnoisy": 31210, "<|endoftext|>": 50256,
}  # fmt: skip
# GPT-2's ids of PAM's prompts as msclap feeds them (the text, " ", <|endoftext|>).
CLEAN = [1169, 2128, 318, 1598, 290, 3424, 13, 220, 50256]
NOISY = [1169, 2128, 318, 31210, 290, 351, 20316, 13, 220, 50256]


def gpt2_byte_tokens() -> list[str]:
    """GPT-2's byte tokens in id order: printable bytes as themselves, then the rest shifted."""
    kept = [*range(33, 127), *range(161, 173), *range(174, 256)]
    rest = [b for b in range(256) if b not in kept]
    return [chr(b) for b in kept] + [chr(256 + i) for i in range(len(rest))]


def tokenizer_files(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {token: i for i, token in enumerate(gpt2_byte_tokens())}
    vocab.update(TOKENS)
    (folder / "vocab.json").write_text(json.dumps(vocab), "utf-8")
    merges = "#version: 0.2\n" + MERGES.replace("|", "\n").replace("\n\n", "\n") + "\n"
    (folder / "merges.txt").write_text(merges, "utf-8")
    return folder


def released_state(seed: int = 0) -> dict[str, torch.Tensor]:
    """msclap's CLAP state dict in the released names, random but for the audio front end."""
    import librosa

    rng = torch.Generator().manual_seed(seed)

    def rand(*shape: int, scale: float = 0.05, mean: float = 0.0) -> torch.Tensor:
        return mean + scale * torch.randn(shape, generator=rng)

    audio = released_audio_state("htsat-tiny", seed)
    # msclap's HTSAT config builds the mel matrix for 32 kHz, 50-14,000 Hz.
    mel = librosa.filters.mel(sr=32000, n_fft=1024, n_mels=64, fmin=50, fmax=14000).T
    audio["logmel_extractor.melW"] = torch.tensor(mel, dtype=torch.float32)
    state = {f"audio_encoder.base.htsat.{k}": v for k, v in audio.items()}
    for branch, inputs in (("audio_encoder", 768), ("caption_encoder", WIDTH)):
        state[f"{branch}.projection.linear1.weight"] = rand(1024, inputs, scale=0.1)
        state[f"{branch}.projection.linear2.weight"] = rand(1024, 1024, scale=0.03)
        state[f"{branch}.projection.layer_norm.weight"] = rand(1024, scale=0.1, mean=1.0)
        state[f"{branch}.projection.layer_norm.bias"] = rand(1024)
    text = {"wte.weight": rand(VOCAB, WIDTH, scale=0.1), "wpe.weight": rand(POSITIONS, WIDTH)}
    for i in range(LAYERS):
        shapes = {
            "attn.c_attn.weight": (WIDTH, 3 * WIDTH), "attn.c_attn.bias": (3 * WIDTH,),
            "attn.c_proj.weight": (WIDTH, WIDTH), "attn.c_proj.bias": (WIDTH,),
            "mlp.c_fc.weight": (WIDTH, INNER), "mlp.c_fc.bias": (INNER,),
            "mlp.c_proj.weight": (INNER, WIDTH), "mlp.c_proj.bias": (WIDTH,),
        }  # fmt: skip
        text.update({f"h.{i}.{k}": rand(*shape, scale=0.1) for k, shape in shapes.items()})
        for norm in ("ln_1", "ln_2"):
            text[f"h.{i}.{norm}.weight"] = rand(WIDTH, scale=0.1, mean=1.0)
            text[f"h.{i}.{norm}.bias"] = rand(WIDTH)
        # The causal-mask buffers older transformers saved with GPT-2.
        causal = torch.tril(torch.ones(POSITIONS, POSITIONS, dtype=torch.bool))
        text[f"h.{i}.attn.bias"] = causal.view(1, 1, POSITIONS, POSITIONS)
        text[f"h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    text["ln_f.weight"], text["ln_f.bias"] = rand(WIDTH, scale=0.1, mean=1.0), rand(WIDTH)
    state.update({f"caption_encoder.base.{k}": v for k, v in text.items()})
    state["logit_scale"] = torch.tensor(float(np.log(1 / 0.07)))
    return state


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
