"""UD treebank names: a code (``en_ewt``) or a release folder (``UD_English-EWT``) -> one :class:`Treebank`.

A treebank's files are named by its code, ``<lang>_<name>-ud-<split>.conllu``, where ``<lang>`` is the language's
UD code and ``<name>`` the folder's treebank name in lower case; its repository is named by the folder, whose
spelling (``ParTUT``, ``GSDSimp``) a code does not give back. So a code is looked up in a table of common
treebanks, and any folder whose language is in :data:`LANGUAGES` gives its own code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from probing.errors import CorpusError

# Folder-name language (spaces as underscores) -> the UD language code that starts the file names.
LANGUAGES: dict[str, str] = {
    "Afrikaans": "af", "Amharic": "am", "Ancient_Greek": "grc", "Arabic": "ar", "Armenian": "hy", "Basque": "eu",
    "Belarusian": "be", "Bengali": "bn", "Breton": "br", "Bulgarian": "bg", "Cantonese": "yue", "Catalan": "ca",
    "Chinese": "zh", "Classical_Chinese": "lzh", "Coptic": "cop", "Croatian": "hr", "Czech": "cs", "Danish": "da",
    "Dutch": "nl", "English": "en", "Estonian": "et", "Faroese": "fo", "Finnish": "fi", "French": "fr",
    "Galician": "gl", "Georgian": "ka", "German": "de", "Gothic": "got", "Greek": "el", "Hebrew": "he",
    "Hindi": "hi", "Hungarian": "hu", "Icelandic": "is", "Indonesian": "id", "Irish": "ga", "Italian": "it",
    "Japanese": "ja", "Kazakh": "kk", "Korean": "ko", "Kurmanji": "kmr", "Latin": "la", "Latvian": "lv",
    "Lithuanian": "lt", "Maltese": "mt", "Marathi": "mr", "Naija": "pcm", "North_Sami": "sme", "Norwegian": "no",
    "Old_Church_Slavonic": "cu", "Old_French": "fro", "Persian": "fa", "Polish": "pl", "Portuguese": "pt",
    "Romanian": "ro", "Russian": "ru", "Sanskrit": "sa", "Scottish_Gaelic": "gd", "Serbian": "sr", "Slovak": "sk",
    "Slovenian": "sl", "Spanish": "es", "Swedish": "sv", "Tagalog": "tl", "Tamil": "ta", "Telugu": "te",
    "Thai": "th", "Turkish": "tr", "Ukrainian": "uk", "Upper_Sorbian": "hsb", "Urdu": "ur", "Uyghur": "ug",
    "Vietnamese": "vi", "Welsh": "cy", "Wolof": "wo", "Yoruba": "yo",
}

# Common treebanks by release folder (= repository) name; their codes follow from :func:`folder_code`.
TREEBANKS: tuple[str, ...] = (
    "UD_English-EWT", "UD_English-GUM", "UD_English-LinES", "UD_English-ParTUT", "UD_English-PUD",
    "UD_German-GSD", "UD_German-HDT", "UD_German-PUD", "UD_French-GSD", "UD_French-Sequoia", "UD_French-ParTUT",
    "UD_French-PUD", "UD_Spanish-AnCora", "UD_Spanish-GSD", "UD_Catalan-AnCora", "UD_Italian-ISDT",
    "UD_Italian-VIT", "UD_Portuguese-Bosque", "UD_Portuguese-GSD", "UD_Dutch-Alpino", "UD_Dutch-LassySmall",
    "UD_Russian-SynTagRus", "UD_Russian-GSD", "UD_Russian-Taiga", "UD_Czech-PDT", "UD_Czech-CAC",
    "UD_Czech-FicTree", "UD_Polish-PDB", "UD_Polish-LFG", "UD_Ukrainian-IU", "UD_Bulgarian-BTB",
    "UD_Croatian-SET", "UD_Serbian-SET", "UD_Slovenian-SSJ", "UD_Slovak-SNK", "UD_Chinese-GSD",
    "UD_Chinese-GSDSimp", "UD_Japanese-GSD", "UD_Korean-GSD", "UD_Korean-Kaist", "UD_Arabic-PADT",
    "UD_Hebrew-HTB", "UD_Persian-Seraji", "UD_Hindi-HDTB", "UD_Urdu-UDTB", "UD_Turkish-IMST", "UD_Turkish-BOUN",
    "UD_Finnish-TDT", "UD_Finnish-FTB", "UD_Estonian-EDT", "UD_Hungarian-Szeged", "UD_Swedish-Talbanken",
    "UD_Swedish-LinES", "UD_Danish-DDT", "UD_Norwegian-Bokmaal", "UD_Norwegian-Nynorsk", "UD_Icelandic-IcePaHC",
    "UD_Indonesian-GSD", "UD_Vietnamese-VTB", "UD_Greek-GDT", "UD_Ancient_Greek-PROIEL", "UD_Ancient_Greek-Perseus",
    "UD_Latin-ITTB", "UD_Latin-PROIEL", "UD_Basque-BDT", "UD_Irish-IDT", "UD_Latvian-LVTB", "UD_Lithuanian-ALKSNIS",
    "UD_Romanian-RRT", "UD_Armenian-ArmTDP", "UD_Tamil-TTB", "UD_Wolof-WTB",
)

_FOLDER = re.compile(r"UD_([A-Za-z_]+)-([A-Za-z0-9]+)")
_CODE = re.compile(r"[a-z]{2,3}_[a-z0-9]+")
GITHUB = "https://github.com/UniversalDependencies"


@dataclass(frozen=True)
class Treebank:
    """One UD treebank: ``code`` names its files and its corpus, ``folder`` its repository and cache folder."""

    code: str
    folder: str

    def file(self, split: str) -> str:
        """The file name of one split (``en_ewt-ud-dev.conllu``)."""
        return f"{self.code}-ud-{split}.conllu"


def folder_code(folder: str) -> str:
    """``UD_English-EWT`` -> ``en_ewt``: the language's code and the treebank name in lower case."""
    match = _FOLDER.fullmatch(folder)
    if not match:
        raise CorpusError(f"data.treebank={folder!r}: a UD folder name is UD_<Language>-<Name> (UD_English-EWT)")
    language, name = match.groups()
    if language not in LANGUAGES:
        raise CorpusError(f"data.treebank={folder!r}: language {language!r} is not in the table of UD language "
                          "codes, so its file names are unknown; read its files with data=conllu data.path=FILE")
    return f"{LANGUAGES[language]}_{name.lower()}"


KNOWN: dict[str, str] = {folder_code(f): f for f in TREEBANKS}


def treebank(name: str) -> Treebank:
    """The treebank a code (``en_ewt``, from the table) or a release folder name (``UD_English-EWT``) names."""
    name = name.strip()
    if name.startswith("UD_"):
        folder = next((f for f in TREEBANKS if f.lower() == name.lower()), name)
        return Treebank(folder_code(folder), folder)
    code = name.lower()
    if code in KNOWN:
        return Treebank(code, KNOWN[code])
    what = "is not in the table of common UD treebanks" if _CODE.fullmatch(code) else "is not a UD treebank code"
    raise CorpusError(f"data.treebank={name!r} {what}: give its release folder name instead (UD_<Language>-<Name>, "
                      f"e.g. data.treebank=UD_German-GSD; the folders are the repositories at {GITHUB})")
