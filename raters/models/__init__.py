"""The raters' models: the DCASE listening test's (`listening`), its A/B trials (`pairs`), its
screening stage's (`screening`), the crowd platform's record of the participants (`crowd`) and the
text-prompt protocol's (`text_prompts`), one app."""

from .crowd import PlatformSubmission  # noqa: F401
from .listening import (  # noqa: F401
    ANCHOR_KINDS,
    DESIGNS,
    GOLD_VOTES,
    PAIRS,
    SLIDERS,
    TRIAL_ROLES,
    Anchor,
    CategorySession,
    DeliveredAudio,
    DiversityItem,
    DiversityRating,
    DiversityTrial,
    FamiliarizationClip,
    GoldSound,
    Heard,
    HeardAtAnswer,
    ListeningTest,
    Rater,
    Rating,
    Stimulus,
    Trial,
    default_misrating,
    new_completion_code,
    new_rater_code,
    new_seed,
    new_token,
)
from .pairs import VOTE_CHOICES, VOTE_QUESTIONS, Pair, Vote  # noqa: F401
from .screening import Screening, ScreeningAttempt, ScreeningTrial  # noqa: F401
from .text_prompts import (  # noqa: F401
    MATCH_ANSWERS,
    DescriptionAnswer,
    DescriptionMark,
    PromptAnswer,
    PromptClip,
    PromptSet,
    RealismAnswer,
    TextAnswer,
    TextJudge,
    TextPromptStudy,
    TextTrial,
)
