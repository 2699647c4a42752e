"""The files the documents' commands assume exist, made tiny (tests/cli/test_docs_sessions.py).

The documents' commands read the owner's photos (``photos/``, ``labels.csv``), labelled
public images (``public/``, ``public.csv``), a practitioner's model file in each format
``oracle serve`` loads (``model.ts``, ``model.pt2``, ``weights.safetensors``…), Hugging
Face model folders, JSON Lines texts, captioned pictures and TLS certificates. Each
function here writes one of them, seeded, in seconds; nothing is downloaded.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import torch
from cryptography.hazmat.primitives.asymmetric import ec
from torch import nn

from tests.support import format_models as fm
from tests.support import pki
from tests.support.foundation import WORDS
from tests.support.models import TinyCNN, train_classifier

#: The side of the owner's grey photos: the tiny CNN's input (28×28×1).
SIDE = 28


def grey_photos(folder: Path, labels: Path | None, n: int = 40, seed: int = 24) -> None:
    """Write ``n`` random grey ``SIDE``×``SIDE`` PNGs into ``folder``, and their labels CSV."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = [("filename", "label")]
    for index in range(n):
        name = f"photo-{index:02d}.png"
        Image.fromarray(rng.integers(0, 256, (SIDE, SIDE), dtype=np.uint8), "L").save(folder / name)
        rows.append((name, str(index % 3)))
    if labels is not None:
        with labels.open("w", newline="") as stream:
            csv.writer(stream).writerows(rows)


def used_model(published: Path, path: Path) -> Path:
    """Train the tiny CNN on the photos published in ``published`` (PNGs and labels.csv).

    A model that used the owner's data: it learns the published twins of her photos by
    heart, so a claim against it detects them, after opening only some pairs. Saved as
    TorchScript to ``path``.
    """
    from PIL import Image

    with (published / "labels.csv").open(newline="") as stream:
        rows = list(csv.reader(stream))[1:]
    images = np.stack([np.asarray(Image.open(published / name))[..., None] for name, _ in rows])
    labels = np.array([int(label) for _, label in rows])
    with torch.random.fork_rng(devices=[]):
        model = train_classifier(images, labels, epochs=60, seed=0, width=16)
    torch.jit.script(model.eval()).save(str(path))
    return path


def captioned_pictures(folder: Path, captions: Path, n: int = 6, seed: int = 5) -> None:
    """Write ``n`` RGB pictures into ``folder`` and their ``filename,caption`` CSV."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    rows = [("filename", "caption")]
    for index in range(n):
        name = f"picture-{index}.png"
        Image.fromarray(rng.integers(0, 256, (16, 16, 3), dtype=np.uint8), "RGB").save(
            folder / name
        )
        rows.append((name, " ".join(WORDS[index : index + 4])))
    with captions.open("w", newline="") as stream:
        csv.writer(stream).writerows(rows)


def reviews(path: Path, n: int = 6) -> None:
    """Write ``n`` JSON Lines reviews (``id``, ``text``, ``rating``) of words markers swap."""
    lines = []
    for index in range(n):
        words = [WORDS[(index * 3 + j) % len(WORDS)] for j in range(12)]
        text = f"The {' '.join(words)} was a good day and a big house."
        lines.append(json.dumps({"id": index, "text": text, "rating": 1 + index % 5}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


class AnyImageCNN(TinyCNN):
    """The tiny CNN, fed any image: channels averaged to grey, resized to 28×28 first.

    Its state dict is the tiny CNN's, so the one set of weights serves the documents'
    28×28×1 examples and arbiter.md's 32×32×3 one.
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] != 1:
            x = x.mean(dim=1, keepdim=True)
        if x.shape[-2:] != (SIDE, SIDE):
            x = torch.nn.functional.interpolate(x, size=(SIDE, SIDE), mode="bilinear")
        return super().forward(x)


def make_net() -> nn.Module:
    """The documents' ``mypackage.models:make_net``: :class:`AnyImageCNN`."""
    return AnyImageCNN()


def model_files(folder: Path, *, pickle_as_model_pt: bool = False) -> dict[str, Path]:
    """Write the tiny CNN in every format, under the names the documents give them.

    ``model.pt`` is the TorchScript archive (``--n-classes 10`` serves it), or the pickled
    module where ``pickle_as_model_pt`` (the formats table's ``--trust-pickle`` row).
    """
    folder.mkdir(parents=True, exist_ok=True)
    model = fm.tiny_cnn(seed=3)
    files = fm.write_formats(folder, model)
    if pickle_as_model_pt:
        files["pickle"].replace(folder / "model.pt")
    else:
        (folder / "model.pt").write_bytes(files["torchscript"].read_bytes())
    return {**files, "model.pt": folder / "model.pt"}


def encoder_file(path: Path) -> Path:
    """Write a tiny TorchScript image encoder (28×28×1 → 8 features) to ``path``."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(6)
        net = nn.Sequential(nn.Flatten(), nn.Linear(SIDE * SIDE, 8)).eval()
    torch.jit.trace(net, torch.zeros(1, 1, SIDE, SIDE)).save(str(path))
    return path


# -- TLS ----------------------------------------------------------------------------------


def tls_files(folder: Path) -> None:
    """Write the documents' PEM files: one CA signs the servers' and the owner's certificates.

    ``server.pem``/``server.key`` and ``oracle.pem``/``oracle.key`` (for 127.0.0.1),
    ``owner.pem``/``owner.key`` (a client), and the CA as ``arbiter-ca.pem``,
    ``clients.pem`` and ``oracles.pem``. The keys are mode 0600, as the servers require.
    """
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = pki.certificate("twinaudit docs CA", ca_key, None, ca=True)
    for name in ("arbiter-ca.pem", "clients.pem", "oracles.pem"):
        (folder / name).write_bytes(pki.certificate_pem(ca))
    for name, server in (("server", True), ("oracle", True), ("owner", False)):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = pki.certificate(f"twinaudit docs {name}", key, (ca.subject, ca_key), server=server)
        (folder / f"{name}.pem").write_bytes(pki.certificate_pem(cert))
        (folder / f"{name}.key").write_bytes(pki.key_pem(key))
        (folder / f"{name}.key").chmod(0o600)  # as a server requires of its TLS key
