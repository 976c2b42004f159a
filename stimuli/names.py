"""Team names as people read them. A name is stored normalised (Unicode NFKC, invisible
characters dropped, whitespace collapsed and trimmed), and two teams of a challenge may not have
names that look alike: its key, the name's *skeleton*, folds case, accents, separators and the
letters of other scripts that look Latin (a Cyrillic o, a Greek capital alpha), so "Barkers",
"barkers ", "B a r k e r s" and "Barkers" with a Cyrillic a are one name. The table is small and
written by hand: the look-alikes an impersonator reaches for, not Unicode's whole list."""

from __future__ import annotations

import unicodedata

# Case matters here: an upper-case letter and its lower case can look like different Latin
# letters (Greek capital nu is N, its small letter v), so this is applied before case is
# folded. Written as escapes: in the source the two scripts would look the same.
LOOK_ALIKES = str.maketrans(
    {
        # Cyrillic
        "\u0410": "A", "\u0412": "B", "\u0415": "E", "\u0405": "S", "\u0406": "I", "\u0408": "J",
        "\u041a": "K", "\u041c": "M", "\u041d": "H", "\u041e": "O", "\u0420": "P", "\u0421": "C",
        "\u0422": "T", "\u0425": "X", "\u0423": "Y", "\u04ae": "Y", "\u051a": "Q", "\u051c": "W",
        "\u04c0": "l", "\u0430": "a", "\u0432": "b", "\u0435": "e", "\u0455": "s", "\u0456": "i",
        "\u0458": "j", "\u043a": "k", "\u043c": "m", "\u043d": "h", "\u043e": "o", "\u0440": "p",
        "\u0441": "c", "\u0442": "t", "\u0445": "x", "\u0443": "y", "\u04af": "y", "\u0501": "d",
        "\u051b": "q", "\u051d": "w", "\u04bb": "h", "\u04cf": "l",
        # Greek
        "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u0396": "Z", "\u0397": "H", "\u0399": "I",
        "\u039a": "K", "\u039c": "M", "\u039d": "N", "\u039f": "O", "\u03a1": "P", "\u03a4": "T",
        "\u03a5": "Y", "\u03a7": "X", "\u03b1": "a", "\u03b9": "i", "\u03ba": "k", "\u03bd": "v",
        "\u03bf": "o", "\u03c1": "p", "\u03c4": "t", "\u03c5": "u", "\u03c7": "x", "\u03b3": "y",
        # Latin letters with a stroke or without a dot, which NFD does not take apart
        "\u0131": "i", "\u0142": "l", "\u0141": "L", "\u00f8": "o", "\u00d8": "O", "\u0111": "d",
        "\u0110": "D",
    }
)  # fmt: skip
# After case folding: digits and pairs that read as letters.
READS_AS = (("rn", "m"), ("vv", "w"), ("0", "o"), ("1", "l"), ("|", "l"), ("i", "l"))


def normalise_name(name: str) -> str:
    """The name as stored: NFKC (full-width letters, ligatures), no control or invisible
    characters (a zero-width space), one space between words, none around."""
    text = unicodedata.normalize("NFKC", name)
    text = "".join(c for c in text if unicodedata.category(c) not in ("Cc", "Cf"))
    return " ".join(text.split())


def name_key(name: str) -> str:
    """The skeleton two names that look alike share."""
    text = unicodedata.normalize("NFD", normalise_name(name))
    text = "".join(c for c in text if unicodedata.category(c) != "Mn")  # accents
    text = text.translate(LOOK_ALIKES).casefold()
    # Spaces and punctuation do not tell names apart ("Team-A", "Team A", "TeamA").
    key = "".join(c for c in text if unicodedata.category(c)[0] not in "PZ")
    for pair, letter in READS_AS:
        key = key.replace(pair, letter)
    return key or text
