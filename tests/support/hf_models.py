"""Tiny Hugging Face models, built from configs with seeded random weights (tests only).

Each builder writes a directory as a practitioner's ``save_pretrained`` would: the
model's ``config.json`` and ``model.safetensors``, and beside them the image processor
(``preprocessor_config.json``) or the tokenizer it needs. Nothing is downloaded: the
configs are written here, the tokenizer is a byte-level BPE trained with the
``tokenizers`` library on a few words, and the image processors are constructed with
their parameters. ``transformers`` is imported through
:func:`twinaudit.practitioner.hf.import_transformers` (the torchvision shim first).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tests.support.foundation import SWAPS, WORDS
from twinaudit.practitioner.hf import import_transformers

#: The image side of the tiny vision models (their processors resize to it).
SIDE = 16
#: Classes of the tiny classifier.
CLASSES = 4
#: The tokenizer's special tokens.
BOS, EOS, PAD = "<bos>", "<eos>", "<pad>"


def _seeded(seed: int, build: Any) -> Any:
    """Return ``build()`` with torch's RNG at ``seed`` (the global RNG untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


def tokenizer(directory: Path) -> Any:
    """Train a byte-level BPE on the test words, save it in ``directory``; return it.

    Every text tokenises (the 256 byte symbols are in the vocabulary); a tokenisation
    with special tokens is ``<bos> … <eos>``.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    transformers = import_transformers()
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=320,
        special_tokens=[PAD, BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    corpus = [" ".join(WORDS), " ".join(SWAPS.values()), "a probe of the words"]
    bpe.train_from_iterator(corpus * 4, trainer=trainer)
    bos, eos = bpe.token_to_id(BOS), bpe.token_to_id(EOS)
    bpe.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A {EOS}", special_tokens=[(BOS, bos), (EOS, eos)]
    )
    wrapped = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token=BOS, eos_token=EOS, pad_token=PAD
    )
    wrapped.save_pretrained(str(directory))
    return wrapped


def image_classifier(directory: Path, seed: int = 0) -> Path:
    """Save a tiny ViT image classifier (``CLASSES`` labels) and its processor; return the dir."""
    transformers = import_transformers()
    config = transformers.ViTConfig(
        image_size=SIDE,
        patch_size=8,
        num_channels=3,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=CLASSES,
    )
    model = _seeded(seed, lambda: transformers.ViTForImageClassification(config))
    model.save_pretrained(str(directory))
    processor = transformers.ViTImageProcessor(
        size={"height": SIDE, "width": SIDE},
        image_mean=[0.5, 0.4, 0.3],
        image_std=[0.25, 0.2, 0.3],
    )
    processor.save_pretrained(str(directory))
    return directory


def causal_lm(directory: Path, seed: int = 0, positions: int = 64) -> Path:
    """Save a one-layer GPT-2 and its tokenizer; return the directory."""
    transformers = import_transformers()
    tok = tokenizer(directory)
    config = transformers.GPT2Config(
        vocab_size=len(tok),
        n_positions=positions,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = _seeded(seed, lambda: transformers.GPT2LMHeadModel(config))
    model.save_pretrained(str(directory))
    return directory


def clip(directory: Path, seed: int = 0) -> Path:
    """Save a tiny CLIP model, its image processor and its tokenizer; return the directory."""
    transformers = import_transformers()
    tok = tokenizer(directory)
    config = transformers.CLIPConfig(
        text_config={
            "vocab_size": len(tok),
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
            "max_position_embeddings": 32,
            "bos_token_id": tok.bos_token_id,
            "eos_token_id": tok.eos_token_id,
            "pad_token_id": tok.pad_token_id,
        },
        vision_config={
            "image_size": SIDE,
            "patch_size": 8,
            "num_channels": 3,
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
        },
        projection_dim=8,
    )
    model = _seeded(seed, lambda: transformers.CLIPModel(config))
    model.save_pretrained(str(directory))
    processor = transformers.CLIPImageProcessor(
        size={"shortest_edge": SIDE},
        crop_size={"height": SIDE, "width": SIDE},
        image_mean=[0.5, 0.5, 0.5],
        image_std=[0.25, 0.25, 0.25],
    )
    processor.save_pretrained(str(directory))
    return directory


def train_causal_lm(source: Path, directory: Path, texts: list[str], steps: int = 60) -> Path:
    """Fine-tune the causal LM saved in ``source`` on ``texts``; save it in ``directory``.

    Full-batch AdamW on the texts' next-token loss (each text led by the BOS token, as
    the oracle scores it), seeded; the tokenizer is saved beside the model.
    """
    transformers = import_transformers()
    tok = transformers.AutoTokenizer.from_pretrained(str(source), local_files_only=True)
    model = transformers.AutoModelForCausalLM.from_pretrained(str(source), local_files_only=True)
    model = model.float().train()
    batch = [
        torch.tensor([tok.bos_token_id, *tok(text, add_special_tokens=False)["input_ids"]])
        for text in texts
    ]
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        for _ in range(steps):
            optimiser.zero_grad()
            losses = [
                torch.nn.functional.cross_entropy(
                    model(input_ids=ids[None]).logits[0, :-1], ids[1:]
                )
                for ids in batch
            ]
            loss = torch.stack(losses).mean()
            loss.backward()
            optimiser.step()
    model.eval().save_pretrained(str(directory))
    tok.save_pretrained(str(directory))
    return directory
