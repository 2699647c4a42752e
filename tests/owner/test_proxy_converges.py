"""The proxy of the owner's own items trains until it fits them (issue #39, part 3)."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

import twinaudit.owner.marking.proxy as proxy_module
from tests.support.extractors import proxy_config
from tests.support.threads import one_thread  # noqa: F401 - the fixture
from twinaudit.cli.main import main as cli_main
from twinaudit.owner.images.sources import open_source
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig
from twinaudit.owner.marking.config import OWN_PROXY, OWN_PROXY_STEPS
from twinaudit.owner.marking.proxy import (
    BATCH,
    CONVERGED_LOSS,
    CONVERGED_WINDOW,
    OWN_EPOCHS,
    FitCheck,
    own_proxy_epochs,
    train_own_proxy,
    weights_digest,
)
from twinaudit.owner.vault import Vault
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.errors import InputError, ParameterError

pytestmark = pytest.mark.usefixtures("one_thread")

SECRET = bytes(range(32))
#: Steps of the schedule in these tests: enough for two classes of flat images to fit.
CAP = 600


@pytest.fixture(autouse=True)
def short_schedule(monkeypatch):
    """A schedule of hundreds of steps, not thousands: the stopping rule is tested."""
    monkeypatch.setattr(proxy_module, "OWN_STEPS", CAP)


def _easy(n=16, side=8):
    """Return ``n`` images of two classes anyone fits: dark and light, a little noise."""
    rng = np.random.default_rng(1)
    labels = np.arange(n) % 2
    images = rng.integers(0, 40, (n, side, side, 1)) + 200 * labels[:, None, None, None]
    return images.astype(np.uint8), labels


def test_the_window_is_whole_epochs_of_at_least_64_steps():
    assert OWN_PROXY_STEPS == 3160  # 40 epochs over 10,000 images in batches of 128
    assert FitCheck(200).window == 32  # two batches an epoch
    assert FitCheck(64).window == CONVERGED_WINDOW  # one batch an epoch
    assert FitCheck(128 * 64).window == 1
    assert FitCheck(10_000).window == 1
    check = FitCheck(BATCH * 32)  # 32 steps an epoch: two epochs
    assert not check(1, 0.0, 1.0)  # one epoch is not a window yet
    assert check(2, 2 * CONVERGED_LOSS * 0.99, 1.0) and check.stopped == 2
    check = FitCheck(BATCH * 32)
    assert not check(1, 0.001, 1.0)
    assert not check(2, 2 * CONVERGED_LOSS, 1.0)  # the mean is at the bound, not below
    assert not check(3, 1.5 * CONVERGED_LOSS, 1.0)  # (2 + 1.5) / 2 above it
    assert check(4, 0.0, 1.0)  # only the last two epochs count: (1.5 + 0) / 2 below

    assert check.stopped == 4


@pytest.mark.slow
def test_the_proxy_stops_once_it_fits_and_trains_every_step_without():
    images, labels = _easy()
    epochs_seen: list[int] = []
    check = FitCheck(len(images))
    fitted = train_own_proxy(
        images, labels, check=check, progress=lambda epoch, *_: epochs_seen.append(epoch)
    )
    cap = own_proxy_epochs(len(images))
    assert cap == CAP  # one batch an epoch
    assert check.stopped is not None and check.window <= check.stopped < cap
    assert epochs_seen == list(range(1, check.stopped + 1))
    every: list[int] = []
    full = train_own_proxy(
        images, labels, converge=False, progress=lambda epoch, *_: every.append(epoch)
    )
    assert every == list(range(1, cap + 1))
    assert weights_digest(full) != weights_digest(fitted)
    # Stopping is part of what retrains bit for bit.
    assert weights_digest(train_own_proxy(images, labels)) == weights_digest(fitted)


def test_the_schedule_is_the_steps_for_a_few_items_and_the_epochs_for_many(monkeypatch):
    """3,160 steps or 40 epochs, whichever is more: unchanged up to 10,368 items."""
    monkeypatch.setattr(proxy_module, "OWN_STEPS", OWN_PROXY_STEPS)  # the real schedule
    assert OWN_EPOCHS == 40
    for n in range(1, 10_369):
        per_epoch = -(-n // BATCH)
        # What it was when the schedule counted steps only: the same weights are retrained.
        assert own_proxy_epochs(n) == -(-OWN_PROXY_STEPS // per_epoch), n
    assert own_proxy_epochs(200) == 1_580  # two batches an epoch
    assert own_proxy_epochs(10_000) == 40  # 79 batches: 3,160 steps
    assert own_proxy_epochs(10_369) == 40  # 82 batches: 3,280 steps, not 39 epochs' 3,198
    assert own_proxy_epochs(20_000) == 40  # 157 batches: 6,280 steps, not 21 epochs' 3,297
    assert own_proxy_epochs(1_000_000) == 40
    # Steps asked for (smoke runs) are whole epochs of at least that many, nothing more.
    assert own_proxy_epochs(20_000, OWN_PROXY_STEPS) == 21
    assert own_proxy_epochs(16, 24) == 24
    with pytest.raises(InputError):
        own_proxy_epochs(0)


def test_a_proxy_that_never_fits_trains_every_step(monkeypatch):
    monkeypatch.setattr(proxy_module, "OWN_STEPS", 40)  # too few steps to fit noise
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (16, 8, 8, 1), dtype=np.uint8)
    labels = rng.integers(0, 2, 16)
    check = FitCheck(16)
    train_own_proxy(images, labels, check=check)
    assert check.stopped is None


@pytest.mark.parametrize("name", ["neutral_mark", "proxy_converge"])
def test_a_boolean_added_later_reads_as_false_when_a_record_lacks_it(name):
    """``neutral_mark`` and ``proxy_converge`` default true; a record without one is false."""
    current = MarkingConfig()
    assert getattr(current, name) is True and current.to_value()[name] is True
    assert MarkingConfig.from_value(decode(encode(current.to_value()))) == current
    legacy = replace(current, **{name: False})
    assert name not in legacy.to_value()
    assert MarkingConfig.from_value(decode(encode(legacy.to_value()))) == legacy
    with pytest.raises(ParameterError):
        MarkingConfig(**{name: 1})  # type: ignore[arg-type]
    record = current.to_value()
    record[name] = False  # the legacy value is written by omission only
    with pytest.raises(InputError):
        MarkingConfig.from_value(record)


def _source(tmp_path):
    images, labels = _easy(24)
    np.save(tmp_path / "photos.npy", images)
    (tmp_path / "labels.json").write_text(json.dumps([int(y) for y in labels]))
    return open_source(tmp_path / "photos.npy", labels=tmp_path / "labels.json")


@pytest.mark.slow
def test_marking_records_the_rule_and_the_proxy_it_made(tmp_path):
    source = _source(tmp_path)
    fitted = mark(
        source, tmp_path / "fit", proxy_config(OWN_PROXY, 8), secret=SECRET, show_progress=False
    ).vault
    every = mark(
        source,
        tmp_path / "every",
        proxy_config(OWN_PROXY, 8, proxy_converge=False),
        secret=SECRET,
        show_progress=False,
    ).vault
    fitted_config = MarkingConfig.from_value(fitted.config)
    every_config = MarkingConfig.from_value(every.config)
    assert fitted_config.proxy_converge and not every_config.proxy_converge
    assert fitted_config.extractor_weights != every_config.extractor_weights
    assert fitted.root != every.root
    # Each resumes (or reopens) only under its own rule.
    again = mark(
        source, tmp_path / "fit", proxy_config(OWN_PROXY, 8), secret=SECRET, show_progress=False
    )
    assert again.marked_now == 0 and again.vault.root == fitted.root
    with pytest.raises(ParameterError, match="another config"):
        mark(
            source,
            tmp_path / "every",
            proxy_config(OWN_PROXY, 8),
            secret=SECRET,
            show_progress=False,
        )


@pytest.mark.slow
def test_the_cli_trains_until_fit_by_default_and_says_where_it_stopped(tmp_path, capsys):
    _source(tmp_path)
    args = [
        "owner",
        "mark",
        str(tmp_path / "photos.npy"),
        "--labels",
        str(tmp_path / "labels.json"),
    ]
    assert cli_main([*args, "--out", str(tmp_path / "a")]) == 0
    out, err = capsys.readouterr()
    assert "until it fits them, at most 600 steps" in out
    # Its progress counts the unit the line above states (issue #44: it said epochs).
    assert "/600 steps" in err and "epochs" not in err
    assert "the proxy fits its 24 images after" in out
    assert (
        cli_main([*args, "--out", str(tmp_path / "b"), "--seed", "s", "--no-proxy-converge"]) == 0
    )
    out = capsys.readouterr().out
    assert "until it fits" not in out and "fits its" not in out
    assert MarkingConfig.from_value(Vault.open(tmp_path / "a").config).proxy_converge
    assert not MarkingConfig.from_value(Vault.open(tmp_path / "b").config).proxy_converge
