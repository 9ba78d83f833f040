"""The embedded default corpus: seeded English sentences with gold UD trees from a small grammar.

Every phrase builder returns its words in order and its head word; attaching a phrase sets the UD
relation on that head. The first two sentences are always the seed sentences
"The cat sat on the mat." and "I am going to deposit my money at the bank.".
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Optional

from probing.corpus.sentence import Corpus, Sentence


@dataclass(eq=False)
class _Tok:
    word: str
    upos: str
    head: Optional["_Tok"] = None
    rel: str = "root"


@dataclass
class _Phrase:
    toks: list[_Tok]
    head: _Tok
    plural: bool = False
    person: int = 3
    extra: dict = field(default_factory=dict)


def _attach(dep: _Phrase | _Tok, head: _Tok, rel: str) -> None:
    tok = dep.head if isinstance(dep, _Phrase) else dep
    tok.head, tok.rel = head, rel


NOUNS = {
    "cat": "cats", "dog": "dogs", "man": "men", "woman": "women", "child": "children", "teacher": "teachers",
    "student": "students", "bird": "birds", "farmer": "farmers", "doctor": "doctors", "friend": "friends",
}
THINGS = {
    "book": "books", "letter": "letters", "ball": "balls", "apple": "apples", "gift": "gifts", "car": "cars",
    "key": "keys", "picture": "pictures", "money": "money", "box": "boxes",
}
PLACES = ["mat", "table", "park", "garden", "house", "bank", "river", "station", "kitchen", "market"]
COMPOUND_MODIFIERS = {"bank": "account", "train": "station", "apple": "tree", "school": "bus", "coffee": "cup"}
ADJS = ["big", "small", "old", "young", "happy", "red", "quiet", "clever", "tired", "green"]
INTRANSITIVE = ["sat", "slept", "waited", "laughed", "arrived", "stayed", "walked"]
TRANSITIVE = ["saw", "found", "liked", "took", "wanted", "cleaned", "bought"]
DITRANSITIVE = ["gave", "sent", "showed", "handed"]
BASE_TRANSITIVE = ["see", "find", "take", "buy", "clean", "deposit", "read"]
PREPS = ["on", "in", "at", "near", "under", "behind"]
ADVS = ["quickly", "slowly", "often", "quietly", "yesterday"]
INTENSIFIERS = ["very", "really", "quite"]
MODALS = ["will", "can", "might", "should"]
POSSESSIVES = ["my", "his", "her", "their", "our", "your"]
NUMBERS = ["two", "three", "four"]
SUBJ_PRONOUNS = [("I", 1, False), ("you", 2, False), ("we", 1, True), ("they", 3, True), ("she", 3, False),
                 ("he", 3, False)]


class GrammarGenerator:
    """Seeded generator of sentences with gold trees; the same seed gives the same corpus."""

    def __init__(self, seed: int = 0):
        self.rng = random.Random(seed)

    # ---- noun phrases -------------------------------------------------------------------------
    def np(self, noun: Optional[str] = None, det: Optional[str] = None, adjs: tuple[str, ...] = (),
           plural: bool = False, things: bool = False, depth: int = 0) -> _Phrase:
        r = self.rng
        lexicon = THINGS if things else NOUNS
        if noun is None:
            noun = r.choice(list(lexicon))
            plural = r.random() < 0.25
            form = lexicon[noun] if plural else noun
        else:
            form = noun
        head = _Tok(form, "NOUN")
        toks: list[_Tok] = []
        if det is None:
            det = self._random_determiner(plural, depth)
        if det.startswith("POSS:"):
            owner = self.np(depth=depth + 1, det="the")
            s = _Tok("'s", "PART")
            _attach(s, owner.head, "case")
            _attach(owner, head, "nmod:poss")
            toks += owner.toks + [s]
        elif det in POSSESSIVES:
            d = _Tok(det, "PRON")
            _attach(d, head, "nmod:poss")
            toks.append(d)
        elif det in NUMBERS:
            d = _Tok(det, "NUM")
            _attach(d, head, "nummod")
            toks.append(d)
        elif det:
            d = _Tok(det, "DET")
            _attach(d, head, "det")
            toks.append(d)
        if not adjs and depth == 0 and r.random() < 0.35:
            adjs = (r.choice(ADJS),)
        for a in adjs:
            if r.random() < 0.2 and depth == 0:
                intens = _Tok(r.choice(INTENSIFIERS), "ADV")
                at = _Tok(a, "ADJ")
                _attach(intens, at, "advmod")
                _attach(at, head, "amod")
                toks += [intens, at]
            else:
                at = _Tok(a, "ADJ")
                _attach(at, head, "amod")
                toks.append(at)
        if not things and depth == 0 and r.random() < 0.1:
            mod, noun2 = r.choice(list(COMPOUND_MODIFIERS.items()))
            head.word = noun2 + ("s" if plural else "")
            c = _Tok(mod, "NOUN")
            _attach(c, head, "compound")
            toks.append(c)
        toks.append(head)
        phrase = _Phrase(toks, head, plural=plural)
        if depth == 0 and r.random() < 0.12:
            self._add_pp(phrase, head, "nmod", depth)
        if depth == 0 and not things and r.random() < 0.1:
            self._add_relative_clause(phrase)
        return phrase

    def _random_determiner(self, plural: bool, depth: int) -> str:
        r = self.rng.random()
        if plural:
            return "the" if r < 0.5 else (self.rng.choice(NUMBERS) if r < 0.75 else self.rng.choice(POSSESSIVES))
        if r < 0.45:
            return "the"
        if r < 0.65:
            return "a"
        if r < 0.8 or depth > 0:
            return self.rng.choice(POSSESSIVES)
        if r < 0.9:
            return "this"
        return "POSS:"

    def pp(self, prep: Optional[str] = None, obj: Optional[_Phrase] = None, depth: int = 1) -> _Phrase:
        p = _Tok(prep or self.rng.choice(PREPS), "ADP")
        obj = obj or self.np(noun=self.rng.choice(PLACES), det="the", depth=depth)
        _attach(p, obj.head, "case")
        return _Phrase([p] + obj.toks, obj.head)

    def _add_pp(self, phrase: _Phrase, head: _Tok, rel: str, depth: int) -> None:
        pp = self.pp(depth=depth + 1)
        _attach(pp, head, rel)
        phrase.toks += pp.toks

    def _add_relative_clause(self, phrase: _Phrase) -> None:
        who = _Tok("who" if phrase.head.word in NOUNS or phrase.head.word in NOUNS.values() else "that", "PRON")
        verb = _Tok(self.rng.choice(TRANSITIVE), "VERB")
        obj = self.np(things=True, depth=1)
        _attach(who, verb, "nsubj")
        _attach(obj, verb, "obj")
        _attach(verb, phrase.head, "acl:relcl")
        phrase.toks += [who, verb] + obj.toks

    def subject(self) -> _Phrase:
        if self.rng.random() < 0.3:
            word, person, plural = self.rng.choice(SUBJ_PRONOUNS)
            t = _Tok(word, "PRON")
            return _Phrase([t], t, plural=plural, person=person)
        if self.rng.random() < 0.1:
            first, second = self.np(depth=1), self.np(depth=1)
            cc = _Tok(self.rng.choice(["and", "or"]), "CCONJ")
            _attach(cc, second.head, "cc")
            _attach(second, first.head, "conj")
            return _Phrase(first.toks + [cc] + second.toks, first.head, plural=True)
        return self.np()

    # ---- clauses ------------------------------------------------------------------------------
    def clause(self) -> tuple[list[_Tok], _Tok]:
        """A main clause: (words in order, its root word)."""
        r = self.rng
        subj = self.subject()
        kind = r.choices(["intr", "tr", "ditr", "cop", "modal", "going", "coord"], [3, 4, 2, 2, 2, 1, 1])[0]
        if kind == "cop":
            return self._copular_clause(subj)
        if kind == "going":
            return self._going_to_clause(subj)
        before_verb, verb, after = self._verb_phrase(kind)
        _attach(subj, verb, "nsubj")
        toks = subj.toks + before_verb + [verb] + after
        if r.random() < 0.25:
            adv = _Tok(r.choice(ADVS), "ADV")
            _attach(adv, verb, "advmod")
            toks.append(adv)
        return toks, verb

    def _copular_clause(self, subj: _Phrase) -> tuple[list[_Tok], _Tok]:
        """A copular clause ("the cat is very happy"): the adjective is its root, as in UD."""
        r = self.rng
        be = self._be(subj, past=r.random() < 0.5)
        adj = _Tok(r.choice(ADJS), "ADJ")
        cop = _Tok(be, "AUX")
        _attach(cop, adj, "cop")
        _attach(subj, adj, "nsubj")
        toks = subj.toks + [cop]
        if r.random() < 0.3:
            intens = _Tok(r.choice(INTENSIFIERS), "ADV")
            _attach(intens, adj, "advmod")
            toks.append(intens)
        return toks + [adj], adj

    def _going_to_clause(self, subj: _Phrase) -> tuple[list[_Tok], _Tok]:
        """A "be going to" clause: rooted at "going", the verb after "to" its xcomp."""
        r = self.rng
        be = _Tok(self._be(subj, past=False), "AUX")
        going = _Tok("going", "VERB")
        to = _Tok("to", "PART")
        verb = _Tok(r.choice(BASE_TRANSITIVE), "VERB")
        obj = self.np(things=True)
        _attach(subj, going, "nsubj")
        _attach(be, going, "aux")
        _attach(to, verb, "mark")
        _attach(verb, going, "xcomp")
        _attach(obj, verb, "obj")
        toks = subj.toks + [be, going, to, verb] + obj.toks
        if r.random() < 0.5:
            pp = self.pp()
            _attach(pp, verb, "obl")
            toks += pp.toks
        return toks, going

    def _verb_phrase(self, kind: str) -> tuple[list[_Tok], _Tok, list[_Tok]]:
        """The main verb of a clause of ``kind`` with its dependents before and after it (the subject
        and any adverb are the caller's): (words before the verb, the verb, words after it)."""
        r = self.rng
        if kind == "modal":
            aux = _Tok(r.choice(MODALS), "AUX")
            verb = _Tok(r.choice(BASE_TRANSITIVE), "VERB")
            _attach(aux, verb, "aux")
            return [aux], verb, self._object_of(verb)
        if kind == "intr":
            verb = _Tok(r.choice(INTRANSITIVE), "VERB")
            after: list[_Tok] = []
            if r.random() < 0.7:
                pp = self.pp()
                _attach(pp, verb, "obl")
                after = pp.toks
            return [], verb, after
        if kind == "tr":
            verb = _Tok(r.choice(TRANSITIVE), "VERB")
            return [], verb, self._object_of(verb)
        if kind == "ditr":
            verb = _Tok(r.choice(DITRANSITIVE), "VERB")
            iobj = self.np(depth=1)
            obj = self.np(things=True, depth=1)
            _attach(iobj, verb, "iobj")
            _attach(obj, verb, "obj")
            return [], verb, iobj.toks + obj.toks
        # coordinated verbs: "sat and laughed"
        verb = _Tok(r.choice(INTRANSITIVE), "VERB")
        cc = _Tok("and", "CCONJ")
        verb2 = _Tok(r.choice([v for v in INTRANSITIVE if v != verb.word]), "VERB")
        _attach(cc, verb2, "cc")
        _attach(verb2, verb, "conj")
        return [], verb, [cc, verb2]

    def _object_of(self, verb: _Tok) -> list[_Tok]:
        """A thing as ``verb``'s direct object: its words."""
        obj = self.np(things=True)
        _attach(obj, verb, "obj")
        return obj.toks

    @staticmethod
    def _be(subj: _Phrase, past: bool) -> str:
        if past:
            return "were" if subj.plural or subj.person == 2 else "was"
        if subj.person == 1 and not subj.plural:
            return "am"
        return "are" if subj.plural or subj.person == 2 else "is"

    def sentence(self, index: int) -> Sentence:
        toks, root = self.clause()
        return _finish(toks, root, f"grammar-{index:05d}")


def _finish(toks: list[_Tok], root: _Tok, sid: str) -> Sentence:
    """Append the final period and turn token objects into a :class:`Sentence`."""
    stop = _Tok(".", "PUNCT")
    _attach(stop, root, "punct")
    toks = toks + [stop]
    root.head, root.rel = None, "root"
    pos = {id(t): i for i, t in enumerate(toks)}
    words = [t.word for t in toks]
    words[0] = words[0][0].upper() + words[0][1:]
    heads = tuple(-1 if t.head is None else pos[id(t.head)] for t in toks)
    return Sentence(sid, tuple(words), heads, tuple(t.rel for t in toks), tuple(t.upos for t in toks))


def seed_sentences() -> list[Sentence]:
    """The two sentences every grammar corpus starts with, built by the same phrase builders."""
    g = GrammarGenerator(0)
    # The cat sat on the mat.
    subj = _Phrase([_Tok("the", "DET"), _Tok("cat", "NOUN")], None)  # type: ignore[arg-type]
    subj.head = subj.toks[1]
    _attach(subj.toks[0], subj.head, "det")
    sat = _Tok("sat", "VERB")
    _attach(subj, sat, "nsubj")
    mat = _Phrase([_Tok("the", "DET"), _Tok("mat", "NOUN")], None)  # type: ignore[arg-type]
    mat.head = mat.toks[1]
    _attach(mat.toks[0], mat.head, "det")
    on = g.pp("on", mat)
    _attach(on, sat, "obl")
    first = _finish(subj.toks + [sat] + on.toks, sat, "grammar-seed-1")
    # I am going to deposit my money at the bank.
    i, am, going, to, deposit = (_Tok("I", "PRON"), _Tok("am", "AUX"), _Tok("going", "VERB"),
                                 _Tok("to", "PART"), _Tok("deposit", "VERB"))
    my, money = _Tok("my", "PRON"), _Tok("money", "NOUN")
    _attach(my, money, "nmod:poss")
    bank = _Phrase([_Tok("the", "DET"), _Tok("bank", "NOUN")], None)  # type: ignore[arg-type]
    bank.head = bank.toks[1]
    _attach(bank.toks[0], bank.head, "det")
    at = g.pp("at", bank)
    for dep, head, rel in [(i, going, "nsubj"), (am, going, "aux"), (to, deposit, "mark"),
                           (deposit, going, "xcomp"), (money, deposit, "obj")]:
        _attach(dep, head, rel)
    _attach(at, deposit, "obl")
    second = _finish([i, am, going, to, deposit, my, money] + at.toks, going, "grammar-seed-2")
    return [first, second]


def generate_corpus(n_sentences: int, seed: int) -> Corpus:
    """The seed sentences followed by ``n_sentences - 2`` generated ones (deduplicated)."""
    gen = GrammarGenerator(seed)
    sentences = seed_sentences()[:n_sentences]
    seen = {s.words for s in sentences}
    attempts = 0
    while len(sentences) < n_sentences and attempts < 50 * n_sentences:
        attempts += 1
        s = gen.sentence(len(sentences))
        if s.words not in seen:
            seen.add(s.words)
            sentences.append(s)
    return Corpus("grammar", f"seed{seed}", tuple(sentences))
