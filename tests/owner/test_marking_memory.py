"""Issue #39 part 2: marking within a memory setting, whatever the photos' size and number.

Batches are cut by bytes as well as by count (``owner mark --memory``, default 2 GiB),
images that cannot fit are refused before any work, an interrupted run says that it
resumes and does, and 30 photos of 4 MP marked with the CLI's defaults stay under the
default setting, measured as the child process's peak resident memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.support.cli_processes import cli
from tests.support.interrupt import stop_at_append
from tests.support.photos import photo, write_photos
from twinaudit.owner.images.sources import _check_pixel_bytes, open_source
from twinaudit.owner.mark import mark
from twinaudit.owner.marking import MarkingConfig, make_marker
from twinaudit.owner.marking.memory import (
    BASE_BYTES,
    DEFAULT_MEMORY,
    MIN_MEMORY,
    batch_budget,
    image_cost,
    images_per_batch,
    parse_memory,
    proxy_training_bytes,
)
from twinaudit.owner.vault import Vault
from twinaudit.owner.vault.writer import VaultWriter
from twinaudit.protocol.errors import LimitExceededError, ParameterError

SEED = bytes(range(32))


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("2G", 2 * 2**30),
        ("2GiB", 2 * 2**30),
        ("1536M", 1536 * 2**20),
        ("1.5g", 1536 * 2**20),
        (" 900MB ", 900 * 2**20),
        (str(2**30), 2**30),
    ],
)
def test_memory_settings_read_with_their_units(text, size):
    assert parse_memory(text) == size


@pytest.mark.parametrize("text", ["", "two", "2X", "-1G", "1G2", "100M", "1K"])
def test_a_bad_or_too_small_memory_setting_is_refused(text):
    with pytest.raises(ParameterError):
        parse_memory(text)


def test_batches_are_cut_by_bytes_and_never_mix_shapes(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    for index, (height, width) in enumerate([(40, 60)] * 5 + [(80, 120)] * 5):
        Image.fromarray(photo(height, width, index)).save(folder / f"p{index}.png")
    source = open_source(folder)
    assert source.shape_at(0) == (40, 60, 3) and source.shape_at(9) == (80, 120, 3)

    def fits(shape):  # two small or one large image per batch
        return 4800 // (shape[0] * shape[1])

    spans = [(batch.start, batch.stop) for batch in source.batches(64, fits=fits)]
    assert spans == [(0, 2), (2, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 9), (9, 10)]
    assert [(b.start, b.stop) for b in source.batches_at(spans[2:4])] == spans[2:4]
    with pytest.raises(ParameterError):
        source.batches_at([(3, 7)])  # mixes shapes
    with pytest.raises(ParameterError):
        source.batches_at([(2, 4), (0, 2)])  # out of order


def test_a_photo_costs_its_bytes_held_and_pgd_at_full_size_costs_more():
    config = MarkingConfig(input_size=16, steps=1)
    marker = make_marker(config, SEED, device="cpu")
    large, small = (1728, 2304, 3), (24, 32, 3)
    assert marker.memory_per_image(large) == image_cost(large, full_size_pgd=False)
    assert marker.memory_per_image(small) == image_cost(small, full_size_pgd=True)
    assert image_cost(large, full_size_pgd=False) == 6 * 1728 * 2304 * 3
    budget = batch_budget(DEFAULT_MEMORY, [large])
    assert budget == DEFAULT_MEMORY - BASE_BYTES - 4 * 1728 * 2304 * 3
    per_batch = budget // image_cost(large, full_size_pgd=False)
    assert images_per_batch(image_cost(large, full_size_pgd=False), budget, 64) == per_batch
    assert images_per_batch(image_cost(large, full_size_pgd=False), budget, 5) == 5
    with pytest.raises(ParameterError, match="raise --memory"):
        images_per_batch(budget + 1, budget, 64)
    with pytest.raises(ParameterError, match="give --memory"):
        batch_budget(MIN_MEMORY, [(4096, 4096, 3)] * 2 + [(2**15, 2**15, 3)])


@pytest.mark.slow
def test_images_that_cannot_fit_are_refused_before_any_work(tmp_path):
    folder = tmp_path / "photos"
    write_photos(folder, 2, 1024, 1024)
    vault = tmp_path / "vault"
    config = MarkingConfig(marker="pgd", work_scale=0, input_size=16)  # PGD at full size
    with pytest.raises(ParameterError, match="memory"):
        mark(open_source(folder), vault, config, memory=MIN_MEMORY, show_progress=False)
    assert not vault.exists()
    for memory in ("64M", "800M"):  # too small a setting; too small for PGD at full size
        result = cli(
            "owner", "mark", str(folder), "--out", str(vault), "--memory", memory,
            "--work-scale", "0", check=False,
        )  # fmt: skip
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert "memory" in result.stderr and not vault.exists()


def test_an_interrupted_run_says_it_resumes_and_resumes_to_the_same_vault(
    tmp_path, monkeypatch, capsys
):
    folder = tmp_path / "photos"
    write_photos(folder, 5, 48, 64)
    config = MarkingConfig(marker="bernoulli", batch_size=2)
    whole = mark(open_source(folder), tmp_path / "whole", config, secret=SEED)
    real_append = stop_at_append(monkeypatch, 2)
    vault = tmp_path / "vault"
    with pytest.raises(KeyboardInterrupt):
        mark(open_source(folder), vault, config, secret=SEED)
    assert "holds 2 of 5 marked images" in capsys.readouterr().err
    monkeypatch.setattr(VaultWriter, "append", real_append)
    again = mark(open_source(folder), vault, config, secret=SEED, show_progress=False)
    assert again.resumed_from == 2 and again.vault.root == whole.vault.root


#: Runs ``twinaudit ARGV`` as ``python -m twinaudit`` does, then writes its own peak RSS
#: (``VmHWM``, in KiB) to the file named first. ``ru_maxrss`` from ``wait4`` would not do:
#: the kernel carries the parent's high-water mark over ``exec``, so a child of a large
#: test process reports that process's peak (a whole shuffled suite's pytest, 3.7 GiB).
_REPORT_PEAK = """\
import sys
from pathlib import Path
from twinaudit.cli.main import main
code = main(sys.argv[2:])
status = Path("/proc/self/status").read_text().splitlines()
Path(sys.argv[1]).write_text(next(s for s in status if s.startswith("VmHWM:")).split()[1])
sys.exit(code)
"""


def _peak_rss_of(args: list[str], tmp_path: Path) -> tuple[int, int, str]:
    """Run ``twinaudit ARGS`` in a child; return its exit code, its peak RSS (bytes), stderr."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    report = tmp_path / "peak-kib"
    child = subprocess.run(
        [sys.executable, "-c", _REPORT_PEAK, str(report), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        check=False,
    )
    peak = int(report.read_text()) * 1024 if report.exists() else 0
    return child.returncode, peak, child.stderr.decode()


@pytest.mark.slow
def test_thirty_4mp_photos_mark_with_the_defaults_within_the_memory_setting(tmp_path):
    folder = tmp_path / "photos"
    write_photos(folder, 30, 1728, 2304)
    vault = tmp_path / "vault"
    code, peak, stderr = _peak_rss_of(
        ["owner", "mark", str(folder), "--out", str(vault), "-q"], tmp_path
    )
    assert code == 0, stderr
    assert 0 < peak < DEFAULT_MEMORY, f"peak RSS {peak / 2**20:.0f} MiB"
    opened = Vault.open(vault)
    assert opened.n_pairs == 30 and len(opened.chunk_spans()) >= 2  # cut by bytes, not 64
    original = np.asarray(Image.open(folder / "photo-0000.jpg"))
    _, version0, version1, _, _ = next(opened.chunks())
    assert np.abs(version0[0].astype(int) - original).max() <= 10
    assert (version0[0] != version1[0]).mean() > 0.5


def test_a_12mp_phone_photo_is_an_item_and_the_pixel_cap_refuses_what_sides_allow(tmp_path):
    """A 12 MP colour photo (36 MB) fits the 48 MiB item cap (spec §2.3, issue #39 part 1).

    With every side at most 4096, a colour image holds at most 48 MiB: the cap refuses an
    array whose pixels exceed it (here, one built past the sides' rule by hand).
    """
    folder = tmp_path / "photos"
    write_photos(folder, 1, 48, 64)
    Image.new("RGB", (4000, 3000), (90, 120, 200)).save(folder / "phone-12mp.png")
    Image.new("L", (4000, 3000), 128).save(folder / "grey-12mp.png")
    source = open_source(folder)  # no refusal: both are items
    assert source is not None
    with pytest.raises(LimitExceededError, match="megapixels"):
        _check_pixel_bytes((4100, 4100, 3), "too-large.png")


def test_a_proxy_training_set_too_large_for_the_setting_is_refused_before_any_work(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (3000, 8, 8), dtype=np.uint8)
    np.save(tmp_path / "many.npy", images)
    (tmp_path / "labels.json").write_text(json.dumps([i % 3 for i in range(3000)]))
    source = open_source(tmp_path / "many.npy", labels=tmp_path / "labels.json")
    config = MarkingConfig(extractor="proxy-own", input_size=64, steps=1)
    vault = tmp_path / "vault"
    with pytest.raises(ParameterError, match="training the proxy-own extractor on 3000"):
        mark(source, vault, config, memory=MIN_MEMORY, show_progress=False)
    assert not vault.exists()
    assert proxy_training_bytes(3000, 64) == 3000 * 64 * 64 * 3 * 5
