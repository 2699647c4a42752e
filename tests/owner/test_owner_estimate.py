"""``twinaudit owner estimate``: the owner's measured q before publishing (issue #19, item 5)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

import twinaudit.cli.estimate as estimate_module
from tests.support.data import synthetic_images
from tests.support.threads import one_thread  # noqa: F401 - the fixture
from twinaudit.cli.estimate import EstimateConfig, Tally, control_mask, estimate
from twinaudit.cli.main import main as cli_main
from twinaudit.owner.images.sources import open_source
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.vault import Vault
from twinaudit.protocol.errors import InputError

EPSILON = 32


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def vault_dir(tmp_path_factory):
    """A labelled vault of 60 synthetic pairs, bernoulli ε = 32 marks."""
    root = tmp_path_factory.mktemp("estimate")
    images, labels = synthetic_images(60, seed=31)
    np.savez(root / "mine.npz", images=images, labels=labels)
    source = open_source(root / "mine.npz", npz_key="images")
    config = MarkingConfig(marker="bernoulli", epsilon=EPSILON)
    mark(source, root / "vault", config, secret=b"e" * 32, show_progress=False)
    public, public_labels = synthetic_images(80, seed=32)
    np.savez(root / "public.npz", images=public, labels=public_labels)
    return root


class Memoriser(nn.Module):
    """A model that recalls its training images: confident near one, unsure away from all.

    The logit of the nearest training image's label is 8 minus an eighth of its L∞
    distance in intensity levels, so a copy within a level of a learnt image is answered with
    near certainty and its twin, ε levels away, much less so.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
        super().__init__()
        self.register_buffer("seen", torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255)
        self.register_buffer("labels", torch.from_numpy(np.asarray(labels)).long())

    def forward(self, x):
        gaps = (x[:, None] - self.seen[None]).abs().flatten(2).amax(dim=2) * 255
        distance, nearest = gaps.min(dim=1)
        logits = torch.zeros(len(x), 10)
        logits[torch.arange(len(x)), self.labels[nearest]] = 8.0 - distance / 8
        return logits


def _memorising_practitioner(images, labels, *, epochs, seed, progress=None):
    del epochs, seed
    if progress is not None:
        progress(1, 0.0, 1.0)
    return Memoriser(images, labels).eval()


def _public(vault_dir):
    with np.load(vault_dir / "public.npz") as data:
        return data["images"], data["labels"].astype(np.int64)


def test_a_model_that_recalls_the_published_twins_is_measured_as_such(vault_dir, monkeypatch):
    monkeypatch.setattr(estimate_module, "train_proxy", _memorising_practitioner)
    lines: list[str] = []
    result = estimate(
        Vault.open(vault_dir / "vault"),
        *_public(vault_dir),
        EstimateConfig(conditions=("C1", "C2", "C3")),
        say=lines.append,
    )
    assert (result.pairs, result.used_pairs, result.control_pairs) == (60, 48, 12)
    assert result.owner_accuracy == 1.0
    for cond in result.conditions:
        # Every published twin it learnt is answered closer to certainty than its hidden twin
        # (the published twin's orientation is right: a swap would read 0.0).
        assert cond.used.q_hat == 1.0 and cond.used.ties == 0, cond
        assert cond.used.wins + cond.used.losses + cond.used.ties == 48
        assert cond.control.wins + cond.control.losses + cond.control.ties == 12
        assert cond.power is not None and cond.power["detection_probability"] > 0.99
        assert cond.power["expected_pairs"] < 30
        assert cond.power_low is not None and cond.power_low["q"] < 1.0
    assert any("48 published twins" in line and "12 pairs held out" in line for line in lines)
    # The control pairs were never learnt: no twin is recalled, so neither wins every time.
    control = result.conditions[0].control
    assert control.wins < 12 and control.losses > 0


def test_the_estimate_is_a_function_of_its_seed(vault_dir, monkeypatch):
    monkeypatch.setattr(estimate_module, "train_proxy", _memorising_practitioner)
    vault = Vault.open(vault_dir / "vault")
    first = estimate(vault, *_public(vault_dir), EstimateConfig(seed=3)).to_json()
    again = estimate(vault, *_public(vault_dir), EstimateConfig(seed=3)).to_json()
    other = estimate(vault, *_public(vault_dir), EstimateConfig(seed=4)).to_json()
    assert first == again
    assert first["conditions"] != other["conditions"]  # other bits, control pairs and draws
    assert json.loads(json.dumps(first)) == first
    # Her twins are the share asked of the practitioner's set: 48 twins, 48 public images.
    assert estimate(vault, *_public(vault_dir), EstimateConfig(share=0.5)).public_images == 48


def test_the_control_share_is_exact_and_seeded():
    mask = control_mask(1000, 0.2, seed=5)
    assert mask.sum() == 200
    assert np.array_equal(mask, control_mask(1000, 0.2, seed=5))
    assert not np.array_equal(mask, control_mask(1000, 0.2, seed=6))


def test_tally_rates_and_wilson_interval():
    tally = Tally(wins=60, losses=40, ties=100)
    assert tally.q_hat == 0.6 and tally.tie_share == 0.5
    low, high = tally.interval()
    assert 0.50 < low < 0.6 < high < 0.70
    assert Tally(0, 0, 5).q_hat is None and Tally(0, 0, 5).interval() is None


def test_settings_no_estimate_can_use_are_refused():
    with pytest.raises(InputError, match="steps"):
        EstimateConfig(steps=0)
    with pytest.raises(InputError, match="share"):
        EstimateConfig(share=1.0)
    with pytest.raises(InputError, match="control-share"):
        EstimateConfig(control_share=0.9)
    with pytest.raises(InputError, match="knowledge"):
        EstimateConfig(conditions=())


def test_images_the_practitioner_cannot_learn_with_hers_are_refused(vault_dir):
    vault = Vault.open(vault_dir / "vault")
    public, labels = _public(vault_dir)
    with pytest.raises(InputError, match="channels"):
        estimate(vault, np.repeat(public, 3, axis=3), labels, EstimateConfig())
    with pytest.raises(InputError, match="multiple of 4"):
        estimate(vault, public[:, :27, :27], labels, EstimateConfig())
    with pytest.raises(InputError, match=r"C1\.\.C4"):
        estimate(vault, public, labels, EstimateConfig(conditions=("C5",)))


def test_the_cli_prints_the_estimate_and_writes_it_once(vault_dir, tmp_path, capsys):
    out = tmp_path / "estimate.json"
    args = [
        "owner", "estimate", str(vault_dir / "vault"),
        "--public", str(vault_dir / "public.npz"), "--npz-key", "images",
        "--steps", "4", "--out", str(out),
    ]  # fmt: skip
    assert cli_main(args) == 0
    printed = capsys.readouterr().out
    assert "proxy practitioner: 80 public images + 48 published twins" in printed
    assert "control q̂" in printed and "P(detect)" in printed
    record = json.loads(out.read_text())
    assert [c["knowledge"] for c in record["conditions"]] == ["C1", "C3"]
    assert record["conditions"][0]["score"]["perturbation"] == "dither"
    # A second run would overwrite it: refused before any training, the file kept.
    before = out.read_bytes()
    assert cli_main(args) != 0
    assert "exists" in capsys.readouterr().err and out.read_bytes() == before


def test_the_cli_refuses_unlabelled_public_images_and_text_vaults(vault_dir, tmp_path, capsys):
    public, _ = _public(vault_dir)
    np.save(tmp_path / "bare.npy", public)
    args = ["owner", "estimate", str(vault_dir / "vault"), "--public", str(tmp_path / "bare.npy")]
    assert cli_main(args) != 0
    assert "no labels" in capsys.readouterr().err
    assert cli_main(["owner", "estimate", str(tmp_path / "nowhere"), "--public", "x"]) != 0
    assert "Traceback" not in capsys.readouterr().err
