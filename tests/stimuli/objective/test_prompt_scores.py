"""The CLAP score of the text-prompt study: RoBERTa's byte-level BPE from its released files,
CLAP's text branch by the released names (the same embeddings as transformers' RobertaModel
where it imports), scores computed by a worker and stored, and the study's results beside the
judges' answers; without the files, the study says which file would enable it.

A tiny text branch (2 layers, 64 wide) in the released layout stands in for RoBERTa-base; the
audio branch is HTSAT-tiny's full released layout.
"""

from __future__ import annotations

import hashlib
import io
import json

import numpy as np
import pytest
import soundfile as sf
import torch
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage

from stimuli.models import AudioFile, PromptScore
from stimuli.objective.predictors.standins import htsat_state as released_audio_state

WIDTH, LAYERS, INNER, POSITIONS = 64, 2, 128, 80


def byte_chars() -> list[str]:
    """GPT-2's published byte -> character table, in byte order."""
    kept = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    extra = iter(range(256, 512))
    return [chr(b) if b in kept else chr(next(extra)) for b in range(256)]


def tokenizer_files(folder) -> dict[str, int]:
    """vocab.json and merges.txt as RoBERTa's are laid out: specials, bytes, merged pieces."""
    folder.mkdir(parents=True, exist_ok=True)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for char in byte_chars():
        vocab.setdefault(char, len(vocab))
    merges = [("d", "o"), ("do", "g"), ("Ġ", "dog"), ("Ġ", "b"), ("a", "r"), ("Ġb", "ar")]
    for first, second in merges:
        vocab[first + second] = len(vocab)
    (folder / "vocab.json").write_text(json.dumps(vocab), "utf-8")
    lines = ["#version: 0.2"] + [f"{a} {b}" for a, b in merges]
    (folder / "merges.txt").write_text("\n".join(lines) + "\n", "utf-8")
    return vocab


def text_state(vocab_size: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """The text side of a released checkpoint (Hugging Face RoBERTa names), random."""
    rng = torch.Generator().manual_seed(seed)
    shapes = {
        "embeddings.word_embeddings.weight": (vocab_size, WIDTH),
        "embeddings.position_embeddings.weight": (POSITIONS, WIDTH),
        "embeddings.token_type_embeddings.weight": (1, WIDTH),
        "embeddings.LayerNorm.weight": (WIDTH,), "embeddings.LayerNorm.bias": (WIDTH,),
        "pooler.dense.weight": (WIDTH, WIDTH), "pooler.dense.bias": (WIDTH,),
    }  # fmt: skip
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            shapes[f"{p}attention.self.{name}.weight"] = (WIDTH, WIDTH)
            shapes[f"{p}attention.self.{name}.bias"] = (WIDTH,)
        shapes[f"{p}attention.output.dense.weight"] = (WIDTH, WIDTH)
        shapes[f"{p}attention.output.dense.bias"] = (WIDTH,)
        shapes[f"{p}intermediate.dense.weight"] = (INNER, WIDTH)
        shapes[f"{p}intermediate.dense.bias"] = (INNER,)
        shapes[f"{p}output.dense.weight"] = (WIDTH, INNER)
        shapes[f"{p}output.dense.bias"] = (WIDTH,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"{p}{norm}.weight"] = shapes[f"{p}{norm}.bias"] = (WIDTH,)
    state = {}
    for name, shape in shapes.items():
        scale = 1.0 if "LayerNorm.weight" in name else 0.0
        state[f"text_branch.{name}"] = scale + 0.1 * torch.randn(shape, generator=rng)
    state["text_branch.embeddings.position_ids"] = torch.arange(POSITIONS)[None]
    state["text_projection.0.weight"] = 0.1 * torch.randn(512, WIDTH, generator=rng)
    state["text_projection.0.bias"] = 0.1 * torch.randn(512, generator=rng)
    state["text_projection.2.weight"] = 0.05 * torch.randn(512, 512, generator=rng)
    state["text_projection.2.bias"] = 0.05 * torch.randn(512, generator=rng)
    return state


@pytest.fixture(scope="module")
def clap_files(tmp_path_factory):
    return write_clap_files(tmp_path_factory.mktemp("clap"))


def write_clap_files(root):
    """A released-layout CLAP checkpoint of both branches, and the tokenizer's files."""
    vocab = tokenizer_files(root / "roberta-base")
    state = {f"module.audio_branch.{k}": v for k, v in released_audio_state("htsat-tiny").items()}
    rng = torch.Generator().manual_seed(5)
    for name, shape in (("0.weight", (512, 768)), ("0.bias", (512,)), ("2.weight", (512, 512)),
                        ("2.bias", (512,))):  # fmt: skip
        state[f"module.audio_projection.{name}"] = 0.05 * torch.randn(shape, generator=rng)
    state.update({f"module.{k}": v for k, v in text_state(len(vocab)).items()})
    state["module.logit_scale_a"] = state["module.logit_scale_t"] = torch.tensor(2.66)
    torch.save({"epoch": 1, "state_dict": state}, root / "630k-audioset-best.pt")
    return root


def test_prompts_are_tokenised_as_robertas_byte_level_bpe(tmp_path):
    from stimuli.objective.embeddings.clap_text import BpeTokenizer

    vocab = tokenizer_files(tmp_path)
    tokenizer = BpeTokenizer(tmp_path)
    # "a", " dog" (Ġ d o g merged by rank: do, dog, Ġdog), " bar", " barks" (Ġbar + k + s), "!"
    assert tokenizer.ids("a dog bar barks!") == [
        vocab["a"], vocab["Ġdog"], vocab["Ġbar"], vocab["Ġbar"], vocab["k"], vocab["s"], vocab["!"]
    ]  # fmt: skip
    ids, mask = tokenizer(["a dog", "dog " * 100])
    assert ids.shape == mask.shape == (2, 77)
    assert ids[0, :4].tolist() == [0, vocab["a"], vocab["Ġdog"], 2] and ids[0, 4:].eq(1).all()
    assert mask[0].sum() == 4 and mask[1].all() and ids[1, -1] == 2  # truncated, </s> kept
    try:
        from tokenizers import ByteLevelBPETokenizer
    except ImportError:
        return
    reference = ByteLevelBPETokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
    for text in ("a dog bar barks!", "Rain on a tin roof; thunder at 3 km.", "it's  café\tnight"):
        assert tokenizer.ids(text) == reference.encode(text).ids


def test_both_branches_load_from_one_checkpoint_and_score_prompts_against_clips(clap_files):
    from stimuli.objective.embeddings import load_embedding_model
    from stimuli.objective.embeddings.clap_text import ClapScorer, cosine

    scorer = ClapScorer(
        clap_files / "630k-audioset-best.pt", clap_files / "roberta-base", "htsat-tiny", "cpu"
    )
    text = scorer.text_embeddings(["a dog barks", "rain on a roof", "a dog barks"])
    assert text.shape == (3, 512)
    np.testing.assert_allclose(text.norm(dim=-1), 1.0, rtol=1e-5)
    assert torch.allclose(text[0], text[2]) and not torch.allclose(text[0], text[1])
    audio = np.random.default_rng(0).normal(0, 0.1, (3, 4 * 48000)).astype(np.float32)
    clips = scorer.audio_embeddings(audio, 48000)
    model = load_embedding_model("clap", {}, str(clap_files / "630k-audioset-best.pt"), "cpu")
    np.testing.assert_allclose(clips.numpy(), model.embed(audio, 48000)[:, 0], atol=1e-6)
    scores = cosine(clips, text)
    np.testing.assert_allclose(scores, (clips * text).sum(-1), atol=1e-6)
    assert scores.abs().max() <= 1.0


def test_the_text_branch_gives_transformers_robertamodel_embeddings(clap_files):
    try:
        from transformers import RobertaConfig, RobertaModel
    except Exception as exc:
        pytest.skip(f"transformers does not import here ({type(exc).__name__}: {exc})")
    from stimuli.objective.embeddings.clap_text import BpeTokenizer, ClapText

    vocab = json.loads((clap_files / "roberta-base" / "vocab.json").read_text("utf-8"))
    state = text_state(len(vocab))
    config = RobertaConfig(
        vocab_size=len(vocab), hidden_size=WIDTH, num_hidden_layers=LAYERS, num_attention_heads=1,
        intermediate_size=INNER, max_position_embeddings=POSITIONS, type_vocab_size=1,
        pad_token_id=1,
    )  # fmt: skip
    reference = RobertaModel(config).eval()
    branch = {k.removeprefix("text_branch."): v for k, v in state.items()}
    reference.load_state_dict({k: branch[k] for k in reference.state_dict()})
    ours = ClapText(len(vocab), POSITIONS, WIDTH, LAYERS, INNER).eval()
    ours.load_state_dict({k: v for k, v in state.items() if "position_ids" not in k})
    ids, mask = BpeTokenizer(clap_files / "roberta-base")(["a dog barks", "bar"])
    with torch.no_grad():
        expected = reference(input_ids=ids, attention_mask=mask)["pooler_output"]
        expected = torch.nn.functional.normalize(ours.text_projection(expected), dim=-1)
        np.testing.assert_allclose(ours(ids, mask), expected, atol=1e-5)


def _audio_file(seed: int) -> AudioFile:
    samples = np.random.default_rng(seed).normal(0, 0.1, 2 * 16000).astype(np.float32)
    buffer = io.BytesIO()
    sf.write(buffer, samples, 16000, format="WAV", subtype="PCM_16")
    data = buffer.getvalue()
    sha = hashlib.sha256(data).hexdigest()
    name = default_storage.save(f"audio/{sha}.wav", ContentFile(data))
    return AudioFile.objects.create(
        sha256=sha, file=name, size_bytes=len(data), sample_rate=16000, channels=1,
        bit_depth=16, frames=len(samples), duration_s=2.0,
    )  # fmt: skip


@pytest.mark.django_db
def test_without_the_files_the_setup_names_each_and_where_it_is_published(tmp_path, settings):
    from stimuli.objective.prompt_scores import clap_setup, compute_scores

    settings.FOLEY_MODEL_DIR = str(tmp_path)
    setup = clap_setup()
    assert not setup.enabled
    assert "630k-audioset-best.pt as published on Hugging Face, lukewys/laion_clap" in setup.needs
    assert "tokenizer vocab.json and merges.txt" in setup.needs
    assert "FacebookAI/roberta-base" in setup.needs and "FOLEY_CLAP_CHECKPOINT" in setup.needs
    assert setup.needs_files == (
        "Not computed: the CLAP score needs the LAION-CLAP checkpoint 630k-audioset-best.pt "
        "(Hugging Face, lukewys/laion_clap) and RoBERTa-base's vocab.json and merges.txt "
        "(Hugging Face, FacebookAI/roberta-base) on the workers."
    )
    settings.FOLEY_CLAP_VARIANT = "htsat-base"
    assert "music_audioset_epoch_15_esc_90.14.pt" in clap_setup().needs
    with pytest.raises(FileNotFoundError, match="CLAP score needs"):
        compute_scores([1])


@pytest.mark.django_db
def test_scores_are_asked_for_queued_computed_once_and_read_back(
    clap_files, settings, challenge, django_capture_on_commit_callbacks, monkeypatch
):
    from stimuli.objective import prompt_scores
    from stimuli.objective.embeddings.clap_text import ClapScorer

    settings.FOLEY_MODEL_DIR = str(clap_files)
    assert prompt_scores.clap_setup().enabled
    clips = [_audio_file(i) for i in range(3)]
    pairs = [(clips[0].pk, "a dog barks"), (clips[1].pk, "a dog barks"), (clips[2].pk, "rain")]
    from foley_platform.celery import app

    monkeypatch.setitem(app.conf, "task_always_eager", False)  # queued, as with a broker
    with django_capture_on_commit_callbacks() as callbacks:
        job = prompt_scores.request_scores(challenge, pairs)
    assert len(callbacks) == 1  # one job for the three rows, queued once they are committed
    assert job.kind == "clap_prompt_scores" and len(job.params["score_ids"]) == 3
    assert prompt_scores.stored_scores(pairs) == ({}, "")
    job = prompt_scores.run_scores(job.pk)
    assert job.state == "succeeded" and job.result == {"computed": 3, "asked": 3}, job.error
    ids = job.params["score_ids"]
    assert prompt_scores.compute_scores(ids) == 0  # done by this model: left as they are
    scores, model_id = prompt_scores.stored_scores(pairs)
    assert model_id.startswith("clap-score:htsat-tiny@") and set(scores) == set(pairs)
    scorer = ClapScorer(
        clap_files / "630k-audioset-best.pt", clap_files / "roberta-base", "htsat-tiny", "cpu"
    )
    audio = np.stack([sf.read(io.BytesIO(default_storage.open(c.file).read()))[0] for c in clips])
    expected = (
        scorer.audio_embeddings(audio.astype(np.float32), 16000)
        * scorer.text_embeddings([p for _, p in pairs])
    ).sum(-1)
    np.testing.assert_allclose([scores[p] for p in pairs], expected, atol=1e-5)
    assert prompt_scores.request_scores(challenge, pairs) is None  # nothing left to ask for
    assert PromptScore.objects.count() == 3


def test_the_study_reports_each_systems_clap_score_and_its_rank_correlation_with_the_judges():
    from scoring.tables import clap_tables
    from scoring.text_prompts import score_text_prompts

    prompts, sets = [], []
    for system, bests in (("A", [0.5, 0.4, 0.1, 0.2]), ("B", [0.05, 0.1, 0.3, 0.35])):
        for i, best in enumerate(bests):
            match = "yes" if best > 0.3 else "maybe" if best > 0.15 else "no"
            judge = f"J{i % 2}"
            prompts.append({"judge": judge, "system": system, "prompt": f"p{i}", "match": match,
                            "quality": 3, "diversity": 3})  # fmt: skip
            sets.append({"judge": judge, "system": system, "match": match, "best": best})
    sets.append({"judge": "J0", "system": "B", "match": "no", "best": None})  # not scored yet
    study = score_text_prompts({"prompts": prompts}, {"sets": sets, "needs": "", "model_id": "m"})
    from scipy import stats

    def rho(rows):
        order = {"no": 0, "maybe": 1, "yes": 2}
        return stats.spearmanr([r["best"] for r in rows], [order[r["match"]] for r in rows])

    a, b = study["systems"]
    assert a["clap"]["score"] == pytest.approx(0.3) and a["clap"]["n"] == 4
    assert b["clap"]["score"] == pytest.approx(0.2) and b["clap"]["n"] == 4
    assert a["clap"]["rho"] == pytest.approx(rho(sets[:4]).statistic, abs=1e-4)
    assert a["clap"]["rho"] > 0.9
    pooled = rho(sets[:8])
    assert study["clap"] == {
        "enabled": True, "needs": "", "model_id": "m", "sets": 9, "scored_sets": 8,
        "rho": pytest.approx(pooled.statistic, abs=1e-4),
        "rho_p": pytest.approx(pooled.pvalue, abs=1e-6), "n": 8,
    }  # fmt: skip
    (table,) = clap_tables(study)
    assert [r["system"] for r in table.rows] == ["A", "B"]
    assert "8 of 9 answered prompt sets scored with m" in table.note
    off = score_text_prompts({"prompts": prompts}, {"sets": [], "needs": "Needs X."})
    (table,) = clap_tables(off)
    assert table.note == "Needs X." and not table.rows


@pytest.mark.sandbox
@pytest.mark.django_db
def test_an_organizer_has_the_clips_scored_and_the_results_show_each_systems_score(
    clap_files, settings, tmp_path, organizer, organizer_client, client
):
    from scoring import services
    from tests.text_prompt_setup import build_text_study

    settings.FOLEY_MODEL_DIR = str(clap_files)
    challenge, study, system = build_text_study(tmp_path, slug="text-clap-results")
    answer_the_study(study)
    url = f"/organize/{challenge.slug}/text-prompts/"
    # No broker in the tests: the job runs as it is queued, as a GPU worker would run it.
    response = organizer_client.post(f"{url}clap-scores/", follow=True)
    assert "clips queued for a CLAP score" in response.content.decode()
    clips = PromptScore.objects.count()
    assert clips >= 2 and not PromptScore.objects.filter(cosine__isnull=True).exists()
    assert (
        f"{clips} of {clips} generated clips scored" in organizer_client.get(url).content.decode()
    )
    snapshot = services.publish(challenge, organizer)
    clap = snapshot.result["text_prompt"]["clap"]
    assert clap["enabled"] and clap["scored_sets"] == clap["sets"] == 2
    [row] = snapshot.result["text_prompt"]["systems"]
    assert -1.0 <= row["clap"]["score"] <= 1.0 and row["clap"]["n"] == 2
    assert "text_prompt_clap" in snapshot.input_hashes
    base = f"/results/{challenge.slug}/{snapshot.number}"
    [line] = client.get(f"{base}/download/text-prompt-clap.json").json()["rows"]
    assert line["system"] == system.name and line["clap_score"] == row["clap"]["score"]


def answer_the_study(study) -> None:
    """One judge through the whole study, answering Yes and No to the prompt sets in turn."""
    from raters import text_prompts
    from tests.text_prompt_setup import take_study

    judge = text_prompts.invite_judge(study)
    text_prompts.start(judge)
    take_study(judge, correct=lambda trial: "no", match=lambda n: "yes" if n % 2 else "no")
