"""Tokenizers trained in-process on the built-in grammar's sentences (no network), saved as a hub checkpoint's
are: a byte-level BPE (GPT-2, RoBERTa and Qwen2 style: no special tokens around a sentence) and SentencePiece
style Metaspace ones (Llama style: BOS only)."""

from __future__ import annotations

from pathlib import Path

from probing.corpus.grammar import generate_corpus

# words with punctuation and non-ASCII letters, beside the grammar's (NFC, as Qwen2's normaliser leaves them)
ODD_WORDS = ("zebra!", "café", "naïve", "Zürich", "don't", "(well)", "U.S.", "Ελλάδα", "3.5%", "co-op", "—", "«oui»")


def grammar_sentences(n: int = 300, seed: int = 0) -> list[tuple[str, ...]]:
    """The grammar's first ``n`` sentences, and :data:`ODD_WORDS` four to a sentence, in two orders."""
    odd = [ODD_WORDS[k:k + 4] for k in range(0, len(ODD_WORDS), 4)]
    return [s.words for s in generate_corpus(n, seed)] + odd + [w[::-1] for w in odd]


def _texts(sentences: list[tuple[str, ...]]) -> list[str]:
    return [" ".join(s) for s in sentences] * 3


def byte_level_bpe(sentences: list[tuple[str, ...]], vocab_size: int = 420):
    """A GPT-2 style byte-level BPE (every byte in its alphabet) with ``<|endoftext|>`` as id 0."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(_texts(sentences), trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def metaspace(sentences: list[tuple[str, ...]], kind: str = "unigram", vocab_size: int = 300):
    """A SentencePiece style tokenizer (``Metaspace``: ``▁`` starts a word), a Unigram or a BPE model, that puts
    ``<s>`` before a sentence and nothing after it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    specials = ["<unk>", "<s>", "</s>"]
    if kind == "unigram":
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, unk_token="<unk>")
    else:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials)
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tok.train_from_iterator(_texts(sentences), trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


def save(tok, directory: Path, cls: str = "PreTrainedTokenizerFast") -> int:
    """Save ``tok`` in ``directory`` through the transformers class ``cls`` (its special tokens: ``<|endoftext|>``
    or ``<unk>``, ``<s>``, ``</s>``, whichever it has); returns its vocabulary size."""
    import transformers

    if tok.token_to_id("<s>") is not None:
        specials = dict(unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    else:
        specials = dict(unk_token="<|endoftext|>", eos_token="<|endoftext|>")
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **specials).save_pretrained(str(directory))
    if cls != "PreTrainedTokenizerFast":
        getattr(transformers, cls).from_pretrained(str(directory)).save_pretrained(str(directory))
    return tok.get_vocab_size()
