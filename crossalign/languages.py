"""Language codes: ISO 639-1 (``en``), optionally with a region (``zh-CN``); ISO 639-3 mapping."""

from __future__ import annotations

from crossalign.errors import CrossalignError
from crossalign.registry import did_you_mean

_ISO639_1_CODES = """
aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co cr cs cu cv cy da
de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho hr ht hu hy hz
ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la lb lg li ln
lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or os pa pi
pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg th ti
tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu
"""
ISO639_1 = frozenset(_ISO639_1_CODES.split())

DERIVED_LANG = "en-XD"
"""Code of a language derived from English by ``crossalign data derive`` (a private-use
region subtag, so it never clashes with a real language)."""

# ISO 639-3 codes used by FreeDict and other sources, mapped to ISO 639-1.
ISO639_3_TO_1 = {
    "afr": "af", "ara": "ar", "bre": "br", "bul": "bg", "cat": "ca", "ces": "cs", "cym": "cy",
    "dan": "da", "deu": "de", "ell": "el", "eng": "en", "epo": "eo", "est": "et", "eus": "eu",
    "fin": "fi", "fra": "fr", "gla": "gd", "gle": "ga", "hin": "hi", "hrv": "hr", "hun": "hu",
    "ind": "id",
    "isl": "is", "ita": "it", "jpn": "ja", "kur": "ku", "lat": "la", "lit": "lt", "mkd": "mk",
    "nld": "nl", "nno": "nn", "nob": "nb", "nor": "no", "pol": "pl", "por": "pt", "ron": "ro",
    "rus": "ru", "slk": "sk", "slv": "sl", "spa": "es", "srp": "sr", "swe": "sv", "swh": "sw",
    "tur": "tr", "ukr": "uk", "zho": "zh",
}  # fmt: skip


def check_language(code: str, where: str = "") -> str:
    """Return ``code`` if it is a known language code (``en``, ``zh-CN``), else raise.

    ``where`` names the file or config key the code came from, for the error message.
    """
    base = code.split("-")[0].split("_")[0]
    if base in ISO639_1:
        return code
    if base.lower() in ISO639_3_TO_1:
        hint = f" (did you mean '{ISO639_3_TO_1[base.lower()]}'?)"
    else:
        hint = did_you_mean(base, sorted(ISO639_1))
    at = f" in {where}" if where else ""
    raise CrossalignError(
        f"unknown language code '{code}'{at}{hint}; use an ISO 639-1 code such as en, de, zh-CN"
    )


def language_file(item: str, flag: str, example: str, pair: bool = False) -> tuple[str, str]:
    """``(name, path)`` of a command-line ``LANG=FILE`` item (``SRC-TGT=FILE`` with ``pair``),
    its language codes checked; anything else is an error naming ``flag`` and ``example``."""
    name, sep, path = item.partition("=")
    if not sep or not name or not path:
        raise CrossalignError(f"{flag} '{item}' must look like {example}")
    for lang in name.split("-", 1) if pair else [name]:
        check_language(lang, flag)
    return name, path


def to_iso639_1(code3: str) -> str:
    """Map an ISO 639-3 code (``deu``) to ISO 639-1 (``de``); unknown codes raise."""
    if code3 not in ISO639_3_TO_1:
        raise CrossalignError(
            f"unknown ISO 639-3 language code '{code3}'{did_you_mean(code3, sorted(ISO639_3_TO_1))}"
        )
    return ISO639_3_TO_1[code3]
