"""The policy model's files, shared by generation and the learner: loading a tokenizer, and a
tiny local causal LM with a character-level tokenizer for CPU tests, demos and the main job.

``init_tiny_model`` writes a randomly initialised Qwen2 checkpoint (~1 M parameters at the
defaults) and a character-level tokenizer built with the ``tokenizers`` library into one
``save_pretrained`` folder, so every backend loads it like any Hugging Face checkpoint. Nothing
is downloaded.

``build_bpe_tokenizer`` trains a real byte-level BPE tokenizer (GPT-2/Qwen style: bytes mapped
to printable characters, merges learned from text) on given text, with Qwen's special tokens
(``<|endoftext|>`` as EOS and pad, ``<|im_start|>``, ``<|im_end|>``) and a ChatML chat template
(``grpo.chat.CHATML_TEMPLATE``) saved in ``tokenizer_config.json``: passed to
``init_tiny_model``, the folder looks to every loader like a small Qwen base model with a chat
template, whose turns end with ``<|im_end|>``, not with its EOS.

Tokenizer: one token per character of printable ASCII plus ``"\\n"`` and ``"\\t"``, and the
special tokens ``<pad>`` (id 0), ``<eos>`` (id 1) and ``<unk>`` (id 2). Decoding concatenates
tokens with no separator, so spaces and newlines round-trip exactly.

Pitfall (why ``load_tokenizer`` exists): ``AutoTokenizer.from_pretrained`` on a folder whose
config says ``qwen2`` builds the Qwen2 tokenizer class around this vocabulary and silently drops
spaces and newlines. ``PreTrainedTokenizerFast.from_pretrained`` loads ``tokenizer.json`` as is;
a hub id (or a folder without ``tokenizer.json``) goes through ``AutoTokenizer``.
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from grpo.errors import InvalidArgumentError, NotFoundError

__all__ = [
    "BPE_SPECIALS",
    "EOS_TOKEN",
    "PAD_TOKEN",
    "UNK_TOKEN",
    "build_bpe_tokenizer",
    "build_char_tokenizer",
    "init_tiny_model",
    "load_tokenizer",
]

PAD_TOKEN = "<pad>"
EOS_TOKEN = "<eos>"
UNK_TOKEN = "<unk>"
_SPECIALS = (PAD_TOKEN, EOS_TOKEN, UNK_TOKEN)
# Printable ASCII (space..~) plus newline and tab; string.printable also has \r \x0b \x0c.
_CHARS = "".join(sorted(set(string.printable) - {"\r", "\x0b", "\x0c"}))


def build_char_tokenizer() -> PreTrainedTokenizerFast:
    """Build the character-level tokenizer (vocabulary: specials, then one id per character).

    Returns:
        A ``PreTrainedTokenizerFast`` with ``pad_token``/``eos_token``/``unk_token`` set; ids
        0, 1, 2 are ``<pad>``, ``<eos>``, ``<unk>``; no BOS is added on encode.
    """
    vocab = {tok: i for i, tok in enumerate(_SPECIALS)}
    for ch in _CHARS:
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK_TOKEN))
    # Every code point is its own pre-token ([\s\S] also matches "\n").
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens(list(_SPECIALS))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD_TOKEN,
        eos_token=EOS_TOKEN,
        unk_token=UNK_TOKEN,
        clean_up_tokenization_spaces=False,
        model_max_length=1 << 20,
    )


BPE_SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Special tokens of ``build_bpe_tokenizer`` (ids 0, 1, 2): EOS and pad, then ChatML's turn
markers."""


def build_bpe_tokenizer(
    texts: Iterable[str], *, vocab_size: int = 1024, max_length: int = 1 << 20
) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on ``texts`` (module docstring).

    Byte-level pre-tokenization (every byte is in the alphabet, so any text encodes and
    decodes exactly), merges learned by ``tokenizers``' ``BpeTrainer`` up to ``vocab_size``
    tokens, the special tokens :data:`BPE_SPECIALS` first.

    Args:
        texts: the training text (e.g. GSM8K's questions and worked answers).
        vocab_size: tokens in all, specials and the 256 byte tokens included (>= 512).
        max_length: ``model_max_length`` recorded with the tokenizer (tokens).

    Returns:
        A ``PreTrainedTokenizerFast`` with ``eos_token`` = ``pad_token`` = ``<|endoftext|>``
        and ``chat_template`` = ``grpo.chat.CHATML_TEMPLATE``; no BOS is added on encode.

    Raises:
        InvalidArgumentError: ``vocab_size`` below 512.
    """
    from tokenizers import trainers

    from grpo.chat import CHATML_TEMPLATE

    if vocab_size < 512:
        raise InvalidArgumentError(
            f"vocab_size must be >= 512 (256 bytes + merges), got {vocab_size}"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(BPE_SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=BPE_SPECIALS[0],
        pad_token=BPE_SPECIALS[0],
        additional_special_tokens=list(BPE_SPECIALS[1:]),
        chat_template=CHATML_TEMPLATE,
        clean_up_tokenization_spaces=False,
        model_max_length=max_length,
    )


def load_tokenizer(path: str | Path) -> Any:
    """Load the tokenizer of a model folder or hub id, keeping spaces and newlines.

    A folder holding ``tokenizer.json`` is loaded with ``PreTrainedTokenizerFast`` (not
    ``AutoTokenizer``, see the module docstring); anything else that is not a folder (a hub id
    such as ``Qwen/Qwen2.5-0.5B``, resolved by ``from_pretrained`` where the machine has
    network or a cache) goes through ``AutoTokenizer``. A tokenizer without a pad token pads
    with EOS.

    Raises:
        NotFoundError: ``path`` is an existing folder without ``tokenizer.json``.
        OSError: a hub id that ``from_pretrained`` cannot resolve.
    """
    folder = Path(path)
    if (folder / "tokenizer.json").is_file():
        tok: Any = PreTrainedTokenizerFast.from_pretrained(str(folder))
    elif folder.is_dir():
        raise NotFoundError(f"no tokenizer.json in model folder {folder}")
    else:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def init_tiny_model(
    out_dir: str | Path,
    *,
    seed: int = 0,
    hidden: int = 128,
    layers: int = 4,
    heads: int = 4,
    kv_heads: int = 2,
    intermediate: int = 512,
    max_positions: int = 512,
    vocab_size: int | None = None,
    dtype: torch.dtype | None = None,
    tokenizer: PreTrainedTokenizerFast | None = None,
) -> Path:
    """Write a randomly initialised tiny Qwen2 causal LM and its tokenizer to ``out_dir``.

    At the defaults the model has about 1.0 M parameters (tied input/output embeddings) and a
    context of ``max_positions`` tokens.

    Args:
        out_dir: Folder to create (parents too); existing files of the same name are replaced.
        seed: Seed of the weight initialisation (same seed -> identical weights).
        hidden: Hidden size; must be a multiple of ``heads``.
        layers: Number of decoder layers.
        heads: Attention heads; must be a multiple of ``kv_heads``.
        kv_heads: Key/value heads (grouped-query attention).
        intermediate: MLP inner size.
        max_positions: Maximum prompt + generated tokens.
        vocab_size: The model's vocabulary (embedding rows); None = the tokenizer's. A larger
            one pads the embedding past the tokenizer's ids, as released checkpoints do
            (Qwen2.5's 151,936 rows for 151,665 tokens); ids past the tokenizer decode to "".
        dtype: Parameter dtype of the saved weights; None = float32.
        tokenizer: the tokenizer to save with it (``build_bpe_tokenizer``); None = the
            character tokenizer (``build_char_tokenizer``). Its chat template, if any, is
            written into ``tokenizer_config.json``.

    Returns:
        The folder written (``config.json``, ``model.safetensors``, ``tokenizer.json``, ...).

    Raises:
        InvalidArgumentError: a size is not positive, the head counts do not divide or
            ``vocab_size`` is below the tokenizer's size.
    """
    # Importing the model classes loads sympy (via the torch code they use): only when building.
    from transformers import Qwen2Config, Qwen2ForCausalLM

    sizes = {"hidden": hidden, "layers": layers, "heads": heads, "kv_heads": kv_heads}
    sizes |= {"intermediate": intermediate, "max_positions": max_positions}
    for name, value in sizes.items():
        if value < 1:
            raise InvalidArgumentError(f"{name} must be >= 1, got {value}")
    if hidden % heads or heads % kv_heads:
        raise InvalidArgumentError(
            f"hidden ({hidden}) must be a multiple of heads ({heads}) and heads a multiple of "
            f"kv_heads ({kv_heads})"
        )
    tok = build_char_tokenizer() if tokenizer is None else tokenizer
    if vocab_size is not None and vocab_size < len(tok):
        raise InvalidArgumentError(
            f"vocab_size ({vocab_size}) must be at least the tokenizer's {len(tok)} tokens"
        )
    config = Qwen2Config(
        vocab_size=vocab_size or len(tok),
        hidden_size=hidden,
        intermediate_size=intermediate,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=tok.eos_token_id,
        use_cache=True,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    if dtype is not None:
        torch.nn.Module.to(model, dtype)  # in place (transformers' typed ``to`` misleads mypy)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out, save_jinja_files=False)  # the template in tokenizer_config.json
    return out
