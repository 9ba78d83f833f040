"""Minimal pairs with gold trees: two sentences that differ in one feature (the number of a subject, a
determiner or an antecedent) and align word for word, for patching one run into the other.

A pair's ``clean`` sentence carries its ``good`` word at ``target``; the ``corrupt`` sentence flips the feature
and carries the form that agrees with it, which is the clean side's ``bad`` word. A decoder reads the target
from the words before it (``log p(good) - log p(bad)`` through its logits); an encoder sees the whole sentence
with the target masked and a probe reads the feature there. ``roles`` names word positions that patches can be
restricted to: ``target``; ``cue``, the word whose number flips (the subject, the determiner, the antecedent);
``subject``, the target's subject where it is another word; ``attractor``, a noun of its own number between cue
and target. ``label`` is the clean side's feature value.

The kinds (:class:`~probing.config.PairKind`): subject-verb number, simple (``The dog waits``), across a prepositional-phrase
attractor (``The dog near the cars waits``), across an object relative clause (``The dog that the cats saw
waits``); determiner-noun number (``This dog slept`` against ``These dogs slept``); reflexive number (``The man
saw himself``). Verbs inside attractors are past tense, so the only agreeing word is the target.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Sequence

from probing.config import PairKind
from probing.corpus.sentence import Sentence

SINGULAR, PLURAL = "singular", "plural"

# animate nouns (singular, plural) and present-tense intransitive verbs (3rd singular, plural)
SUBJECTS = {"dog": "dogs", "cat": "cats", "bird": "birds", "farmer": "farmers", "doctor": "doctors",
            "teacher": "teachers", "student": "students", "friend": "friends", "man": "men", "woman": "women"}
VERBS = {"waits": "wait", "walks": "walk", "runs": "run", "sings": "sing", "smiles": "smile", "works": "work",
         "eats": "eat", "plays": "play", "talks": "talk", "speaks": "speak"}
ATTRACTORS = {"table": "tables", "house": "houses", "garden": "gardens", "car": "cars", "door": "doors",
              "tree": "trees", "box": "boxes", "window": "windows"}
PREPS = ["near", "behind", "beside", "under"]
PAST = ["saw", "liked", "found", "knew", "met", "helped"]
ADJS = ["old", "young", "happy", "quiet", "small", "tired"]
ADVS = ["quietly", "slowly", "often", "today"]
DETERMINERS = {"this": "these", "that": "those"}
INTRANSITIVE_PAST = ["slept", "waited", "laughed", "arrived", "stayed", "walked"]
GENDERED = {"man": ("men", "himself"), "boy": ("boys", "himself"), "king": ("kings", "himself"),
            "woman": ("women", "herself"), "girl": ("girls", "herself"), "queen": ("queens", "herself")}
REFLEXIVE_VERBS = ["saw", "hurt", "blamed", "helped", "liked", "found"]


@dataclass(frozen=True)
class MinimalPair:
    """Two aligned sentences that differ in one feature (module docstring)."""

    id: str
    kind: str
    clean: Sentence
    corrupt: Sentence
    target: int
    good: str
    bad: str
    label: str = ""
    roles: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.clean) != len(self.corrupt):
            raise ValueError(f"pair {self.id}: clean has {len(self.clean)} words, corrupt {len(self.corrupt)}; "
                             "the two sides must align word for word")
        if not 0 <= self.target < len(self.clean):
            raise ValueError(f"pair {self.id}: target {self.target} is outside its {len(self.clean)} words")
        if self.good == self.bad:
            raise ValueError(f"pair {self.id}: the good and the bad word are both {self.good!r}")


@dataclass(frozen=True)
class _Words:
    """A sentence under construction: words, heads (-1: root), relations, UPOS, and its named positions."""

    words: list[str]
    heads: list[int]
    relations: list[str]
    upos: list[str]
    roles: dict

    def sentence(self, sid: str) -> Sentence:
        words = [self.words[0][0].upper() + self.words[0][1:]] + self.words[1:]
        return Sentence(sid, tuple(words), tuple(self.heads), tuple(self.relations), tuple(self.upos))


def _agreement(r: random.Random, kind: PairKind, plural: bool) -> tuple[_Words, _Words, str, str]:
    """Subject-verb pairs: the clean side has a subject of number ``plural``, the corrupt side the other; the
    attractor's number (a prepositional object or a relative clause's subject) is drawn apart from it."""
    noun, verb = r.choice(list(SUBJECTS)), r.choice(list(VERBS))
    adj = r.choice(ADJS) if r.random() < 0.3 else None
    lexicon = ATTRACTORS if kind is PairKind.agreement_pp else SUBJECTS
    att_noun = r.choice(list(lexicon))
    attractor = lexicon[att_noun] if r.random() < 0.5 else att_noun
    prep, rc_verb = r.choice(PREPS), r.choice(PAST)

    def build(pl: bool) -> _Words:
        words, rels, upos = ["the"], ["det"], ["DET"]
        if adj:
            words, rels, upos = words + [adj], rels + ["amod"], upos + ["ADJ"]
        s = len(words)
        words, rels, upos = words + [SUBJECTS[noun] if pl else noun], rels + ["nsubj"], upos + ["NOUN"]
        heads = [s] * s + [-2]  # the subject's head (the verb) is set below
        roles = {"cue": s, "subject": s}
        if kind is PairKind.agreement_pp:  # prep the attractor
            words += [prep, "the", attractor]
            rels += ["case", "det", "nmod"]
            upos += ["ADP", "DET", "NOUN"]
            heads += [s + 3, s + 3, s]
            roles["attractor"] = s + 3
        elif kind is PairKind.agreement_relative:  # that the attractor saw
            words += ["that", "the", attractor, rc_verb]
            rels += ["obj", "det", "nsubj", "acl:relcl"]
            upos += ["PRON", "DET", "NOUN", "VERB"]
            heads += [s + 4, s + 3, s + 4, s]
            roles["attractor"] = s + 3
        v = len(words)
        heads[s] = v
        words, rels, upos, heads = words + [VERBS[verb] if pl else verb, "."], rels + ["root", "punct"], \
            upos + ["VERB", "PUNCT"], heads + [-1, v]
        roles["target"] = v
        return _Words(words, heads, rels, upos, roles)

    good, bad = (VERBS[verb], verb) if plural else (verb, VERBS[verb])
    return build(plural), build(not plural), good, bad


def _determiner(r: random.Random, plural: bool) -> tuple[_Words, _Words, str, str]:
    """``this dog slept`` / ``these dogs slept``: the determiner's number read at the noun."""
    det = r.choice(list(DETERMINERS))
    noun = r.choice(list(SUBJECTS))
    verb = r.choice(INTRANSITIVE_PAST)

    def build(pl: bool) -> _Words:
        words = [DETERMINERS[det] if pl else det, SUBJECTS[noun] if pl else noun, verb, "."]
        return _Words(words, [1, 2, -1, 2], ["det", "nsubj", "root", "punct"], ["DET", "NOUN", "VERB", "PUNCT"],
                      {"cue": 0, "target": 1})

    good, bad = (SUBJECTS[noun], noun) if plural else (noun, SUBJECTS[noun])
    return build(plural), build(not plural), good, bad


def _reflexive(r: random.Random, plural: bool) -> tuple[_Words, _Words, str, str]:
    """``the man saw himself`` / ``the men saw themselves``: the antecedent's number read at the reflexive."""
    noun = r.choice(list(GENDERED))
    verb = r.choice(REFLEXIVE_VERBS)
    plural_form, singular_reflexive = GENDERED[noun]

    def build(pl: bool) -> _Words:
        words = ["the", plural_form if pl else noun, verb, "themselves" if pl else singular_reflexive, "."]
        return _Words(words, [1, 2, -1, 2, 2], ["det", "nsubj", "root", "obj", "punct"],
                      ["DET", "NOUN", "VERB", "PRON", "PUNCT"], {"cue": 1, "subject": 1, "target": 3})

    good, bad = ("themselves", singular_reflexive) if plural else (singular_reflexive, "themselves")
    return build(plural), build(not plural), good, bad


def generate_pairs(kinds: Sequence[PairKind | str], n_pairs: int, seed: int) -> list[MinimalPair]:
    """``n_pairs`` distinct pairs, the kinds in turn, each clean side's number drawn at random (seeded)."""
    kinds = [PairKind(k) for k in kinds]
    if not kinds:
        raise ValueError("minimal pairs: no kinds given")
    r = random.Random(seed)
    out: list[MinimalPair] = []
    seen: set = set()
    attempts = 0
    while len(out) < n_pairs and attempts < 50 * max(n_pairs, 1):
        kind = kinds[attempts % len(kinds)]
        attempts += 1
        plural = r.random() < 0.5
        if kind is PairKind.determiner:
            clean, corrupt, good, bad = _determiner(r, plural)
        elif kind is PairKind.reflexive:
            clean, corrupt, good, bad = _reflexive(r, plural)
        else:
            clean, corrupt, good, bad = _agreement(r, kind, plural)
        key = tuple(clean.words)
        if key in seen:
            continue
        seen.add(key)
        pid = f"{kind.value}-{len(out):05d}"
        out.append(MinimalPair(pid, kind.value, clean.sentence(f"{pid}-clean"), corrupt.sentence(f"{pid}-corrupt"),
                               clean.roles["target"], good, bad, PLURAL if plural else SINGULAR, dict(clean.roles)))
    return out
