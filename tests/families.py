"""Tiny random checkpoints of every model family with a layout entry, built from each family's config class
(transformers' own test practice): 2 layers, 4 heads of width 8 (Llama-style models: 2 key/value heads)."""

from __future__ import annotations

import torch

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=64)


def configs(vocab: int = 100) -> dict:
    """``{family: config}`` for :func:`build`."""
    import transformers as T

    small = {**SMALL, "vocab_size": vocab}
    ids = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return {
        "bert": T.BertConfig(**small),
        "electra": T.ElectraConfig(embedding_size=16, **small),
        "roberta": T.RobertaConfig(**small, pad_token_id=1),
        "xlm-roberta": T.XLMRobertaConfig(**small, pad_token_id=1),
        "distilbert": T.DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64, vocab_size=vocab,
                                         max_position_embeddings=64),
        "albert": T.AlbertConfig(embedding_size=16, **small),
        "deberta-v2": T.DebertaV2Config(**small),
        "mpnet": T.MPNetConfig(**small),
        "modernbert": T.ModernBertConfig(**small, global_attn_every_n_layers=2, local_attention=8, cls_token_id=1,
                                         sep_token_id=2, **ids),
        "gpt2": T.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=vocab, n_positions=64, bos_token_id=1,
                             eos_token_id=2),
        "gpt-neox": T.GPTNeoXConfig(**small, **ids),
        "llama": T.LlamaConfig(**small, num_key_value_heads=2, **ids),
        "qwen2": T.Qwen2Config(**small, num_key_value_heads=2, **ids),
        "mistral": T.MistralConfig(**small, num_key_value_heads=2, **ids),
    }


# the family entry each config's model belongs to (ELECTRA shares BERT's layout)
FAMILY = {"electra": "bert"}


def build(name: str, seed: int = 0, vocab: int = 100) -> torch.nn.Module:
    """The family's base model with random weights (biases and norm gains too), eager attention, eval mode."""
    from mixing_oracle import randomise
    from transformers import AutoModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModel.from_config(configs(vocab)[name], attn_implementation="eager")
    return randomise(model, seed=seed + 1)


def batch(lengths=(7, 5), vocab: int = 100, seed: int = 3) -> dict:
    """Random ids for sentences of these lengths, right-padded, with their mask."""
    g = torch.Generator().manual_seed(seed)
    t = max(lengths)
    ids = torch.full((len(lengths), t), 0, dtype=torch.long)
    mask = torch.zeros((len(lengths), t), dtype=torch.long)
    for b, n in enumerate(lengths):
        ids[b, :n] = torch.randint(5, vocab, (n,), generator=g)
        mask[b, :n] = 1
    return {"input_ids": ids, "attention_mask": mask}


CAPABILITIES = (
    ("attention weights", None),
    ("`hidden` vectors", None),
    ("`heads` vectors, gates, `task=importance`", "heads"),
    ("`norm`, `norm_layer`", "norm"),
    ("ALTI, value zeroing", "block"),
    ("GlobEnc", "globenc"),
)
START, END = "<!-- support matrix: python tests/families.py --write -->", "<!-- end of support matrix -->"


def support_matrix() -> str:
    """docs/models.md's family x capability table, from what each family's tiny checkpoint can do: a capability
    is supported where its parts resolve (:func:`probing.mixing.layout.layer_parts`), refused otherwise."""
    from probing.mixing import layer_parts
    from probing.mixing.families import LayoutError, family_of

    rows = ["| family | models (layer class) | wiring | " + " | ".join(c for c, _ in CAPABILITIES) + " |",
            "|---|---|---|" + "---|" * len(CAPABILITIES)]
    done = set()
    for name in configs():
        model = build(name)
        fam = family_of(model)[0]
        if fam.name in done:
            continue
        done.add(fam.name)
        cells = []
        for _, need in CAPABILITIES:
            try:
                if need is not None:
                    layer_parts(model, need)
                cells.append("yes")
            except LayoutError:
                cells.append("no")
        wiring = str(fam.wiring).replace("_", "-") + (", causal" if fam.causal else "")
        rows.append(f"| {fam.name} | {', '.join(fam.layer_classes)} | {wiring} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def readme_block(readme: str) -> str:
    return readme[readme.index(START) + len(START):readme.index(END)].strip()


if __name__ == "__main__":
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    path = Path(__file__).resolve().parents[1] / "docs" / "models.md"
    text = path.read_text()
    if "--write" in sys.argv:
        head, tail = text[:text.index(START) + len(START)], text[text.index(END):]
        path.write_text(f"{head}\n{support_matrix()}\n{tail}")
    print(support_matrix())
