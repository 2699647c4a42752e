"""The owner's vault: what it writes, what it opens, and every way a vault can be wrong."""

from __future__ import annotations

import hashlib
import os
import stat
import tracemalloc
from itertools import chain
from pathlib import Path

import numpy as np
import pytest

from twinaudit.owner.vault import (
    Vault,
    VaultWriter,
    write_vault,
)
from twinaudit.owner.vault.chunks import pair_commitment
from twinaudit.owner.vault.journal import frame, read_header, read_journal
from twinaudit.owner.vault.secret import pair_salt
from twinaudit.protocol.commitment import commit_pair, verify_opening
from twinaudit.protocol.encoding import decode, encode
from twinaudit.protocol.errors import (
    InputError,
    ParameterError,
    StateError,
    VaultIntegrityError,
    VersionError,
)
from twinaudit.protocol.items import CaptionedImageItem, ImageItem, decode_pair, encode_item
from twinaudit.protocol.merkle import MerkleTree, verify_inclusion

SECRET = bytes(range(32))
SOURCE = {"dataset": "synthetic", "split": "train"}
CONFIG = {"marker": "bernoulli", "epsilon": 10, "batch": 4}
N = 10


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    """Skip the disk flushes (97% of the run time); test_fsync_order checks where they go."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def make_items(n=N, seed=0, shape=(6, 5, 1)):
    rng = np.random.default_rng(seed)
    v0 = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
    v1 = (v0.astype(np.int16) + 7).clip(0, 255).astype(np.uint8)
    labels = [int(x) for x in rng.integers(0, 10, n)]
    labels[1] = None  # an item without a label
    names = [f"img/{i:03d}.png" for i in range(n)]
    return v0, v1, labels, names


def make_vault(path, n=N, secret=SECRET, batch_items=4, **kwargs):
    v0, v1, labels, names = make_items(n)
    return write_vault(
        path,
        "image",
        v0,
        v1,
        labels,
        names,
        source=kwargs.get("source", SOURCE),
        config=kwargs.get("config", CONFIG),
        secret=secret,
        batch_items=batch_items,
    )


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file of a directory tree and its bytes."""
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


# --- Writing and reading back ------------------------------------------------------------


def test_round_trip_commits_to_every_pair(tmp_path):
    vault = make_vault(tmp_path / "v")
    v0, v1, labels, names = make_items()
    opened = Vault.open(tmp_path / "v")
    assert (opened.n_pairs, opened.item_kind, len(opened)) == (N, "image", N)
    assert opened.root == vault.root
    assert opened.source == SOURCE and opened.config == CONFIG
    assert opened.names() == names and opened.labels() == labels
    # The root is the RFC 6962 root over the spec §6.1 commitments, with the vault's salts.
    commitments = []
    for i in range(N):
        versions = (encode_item(ImageItem(v, labels[i])) for v in (v0[i], v1[i]))
        commitments.append(commit_pair(*versions, opened.salt(i))[0])
    assert MerkleTree(commitments).root() == opened.root
    for i in range(N):
        first, second = opened.pair(i)
        assert np.array_equal(first.pixels, v0[i]) and np.array_equal(second.pixels, v1[i])
        assert first.label == second.label == labels[i]
        opening = opened.opening(i)
        assert opening.index == i and opening.salt == opened.salt(i)
        verify_opening(commitments[i], opened.pair_opening(i))
        decode_pair(opening.version0, opening.version1, "image")
        verify_inclusion(
            leaf_data=commitments[i], index=i, size=N, proof=opening.proof, root=opened.root
        )
        assert opened.commitment(i) == commitments[i]
    # Salts are distinct, and the marking seed is neither a salt nor the secret.
    salts = {opened.salt(i) for i in range(N)}
    assert len(salts) == N and opened.marking_seed not in salts | {SECRET}


def test_chunks_stream_the_batches_in_order(tmp_path):
    make_vault(tmp_path / "v", batch_items=4)
    v0, v1, labels, names = make_items()
    chunks = list(Vault.open(tmp_path / "v").chunks())
    assert [(start, len(c0)) for start, c0, *_ in chunks] == [(0, 4), (4, 4), (8, 2)]
    assert np.array_equal(np.concatenate([c[1] for c in chunks]), v0)
    assert np.array_equal(np.concatenate([c[2] for c in chunks]), v1)
    assert list(chain.from_iterable(c[3] for c in chunks)) == labels
    assert list(chain.from_iterable(c[4] for c in chunks)) == names


def test_layout_and_permissions(tmp_path):
    make_vault(tmp_path / "v")
    files = snapshot(tmp_path / "v")
    assert set(files) == {
        "secret.key",
        "journal",
        "manifest.msgpack",
        "chunks/000000.pairs",
        "chunks/000001.pairs",
        "chunks/000002.pairs",
    }
    assert files["secret.key"] == SECRET
    for path in [tmp_path / "v", *(tmp_path / "v").rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), path
    manifest = decode(files["manifest.msgpack"])
    assert isinstance(manifest, dict)
    assert manifest["format"] == "twinaudit-vault" and manifest["spec"] == "0.2"
    assert manifest["receipt"] is None


def test_same_inputs_and_secret_give_identical_files(tmp_path):
    first = make_vault(tmp_path / "a")
    second = make_vault(tmp_path / "b")
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")
    assert first.root == second.root
    other = make_vault(tmp_path / "c", secret=bytes(32))
    assert other.root != first.root
    # Other batch sizes give other chunk files, but the same commitments and root.
    rebatched = make_vault(tmp_path / "f", batch_items=3)
    assert rebatched.root == first.root
    assert [rebatched.opening(i) for i in range(N)] == [first.opening(i) for i in range(N)]
    # Without a given secret each vault draws its own: same pixels, different commitments.
    assert make_vault(tmp_path / "d", secret=None).root != make_vault(tmp_path / "e").root


def test_writer_exposes_secret_and_marking_seed(tmp_path):
    writer = VaultWriter.create_or_resume(
        tmp_path / "v", item_kind="image", source=SOURCE, config=CONFIG, n_items=N
    )
    assert len(writer.secret) == 32 and writer.completed == 0
    seed = writer.marking_seed
    assert len(seed) == 32 and seed != writer.secret
    writer.close()
    resumed = VaultWriter.create_or_resume(
        tmp_path / "v", item_kind="image", source=SOURCE, config=CONFIG, n_items=N
    )
    assert resumed.marking_seed == seed and resumed.config == CONFIG
    resumed.close()


def test_an_existing_empty_directory_becomes_the_vault(tmp_path):
    (tmp_path / "v").mkdir(mode=0o755)
    make_vault(tmp_path / "v")
    assert stat.S_IMODE((tmp_path / "v").stat().st_mode) == 0o700
    Vault.open(tmp_path / "v")


def test_open_never_holds_all_pixels(tmp_path):
    rng = np.random.default_rng(1)
    v0 = rng.integers(0, 256, (800, 56, 56, 1), dtype=np.uint8)
    names = [f"{i}" for i in range(800)]
    # 16 chunks of 50 items: one chunk is 1/16 of the pixels.
    write_vault(
        tmp_path / "w",
        "image",
        v0,
        255 - v0,
        [0] * 800,
        names,
        source={},
        config={},
        batch_items=50,
    )
    pixel_bytes = 2 * v0.nbytes
    del v0
    tracemalloc.start()
    try:
        Vault.open(tmp_path / "w")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < pixel_bytes / 3, (peak, pixel_bytes)


def test_open_keeps_little_in_memory_and_reads_chunk_by_chunk(tmp_path, monkeypatch):
    make_vault(tmp_path / "v", n=12, batch_items=3)
    import twinaudit.owner.vault.chunks as chunks_module

    sizes = []
    original = chunks_module.read_stored_chunk

    def spy(*args, **kwargs):
        chunk = original(*args, **kwargs)
        sizes.append(chunk.count)
        return chunk

    monkeypatch.setattr(chunks_module, "read_stored_chunk", spy)
    Vault.open(tmp_path / "v")
    assert sizes == [3, 3, 3, 3]


# --- Writer: bad arguments ---------------------------------------------------------------

GOOD = make_items(4)


def _replace(index, value):
    args = list(GOOD)
    args[index] = value
    return args


BAD_BATCHES = [
    ("float pixels", _replace(0, GOOD[0].astype(np.float32)), InputError),
    ("3-d batch", _replace(0, GOOD[0][..., 0]), InputError),
    ("shapes differ", _replace(1, GOOD[1][:, :5]), InputError),
    ("two channels", _replace(0, np.zeros((4, 6, 5, 2), np.uint8)), InputError),
    ("not an array", _replace(1, GOOD[1].tolist()), InputError),
    ("empty batch", [GOOD[0][:0], GOOD[1][:0], [], []], ParameterError),
    ("too few labels", _replace(2, GOOD[2][:3]), ParameterError),
    ("too many names", _replace(3, [*GOOD[3], "x"]), ParameterError),
    ("label too large", _replace(2, [1, 2, 3, 1 << 16]), InputError),
    ("label is a bool", _replace(2, [1, True, 3, 4]), InputError),
    ("label is a string", _replace(2, [1, "2", 3, 4]), InputError),
    ("name not a string", _replace(3, ["a", "b", 3, "d"]), InputError),
    ("empty name", _replace(3, ["a", "", "c", "d"]), InputError),
    ("labels as a string", _replace(2, "1234"), InputError),
]


@pytest.mark.parametrize(("case", "args", "error"), BAD_BATCHES, ids=[c[0] for c in BAD_BATCHES])
def test_append_refuses_bad_batches_and_writes_nothing(tmp_path, case, args, error):
    writer = VaultWriter.create_or_resume(
        tmp_path / "v", item_kind="image", source=SOURCE, config=CONFIG, n_items=6, secret=SECRET
    )
    before = snapshot(tmp_path / "v")
    with pytest.raises(error):
        writer.append(*args)
    assert snapshot(tmp_path / "v") == before and writer.completed == 0
    writer.close()


def test_append_refuses_items_beyond_n_items(tmp_path):
    writer = VaultWriter.create_or_resume(
        tmp_path / "v", item_kind="image", source=SOURCE, config=CONFIG, n_items=6, secret=SECRET
    )
    writer.append(*GOOD)
    before = snapshot(tmp_path / "v")
    with pytest.raises(ParameterError, match="past the run's 6 items"):
        writer.append(*GOOD)
    assert snapshot(tmp_path / "v") == before and writer.completed == 4
    with pytest.raises(StateError, match="4 of 6"):
        writer.finish()
    writer.append(*(part[:2] for part in GOOD))
    writer.finish()
    with pytest.raises(StateError, match="finished or closed"):
        writer.append(*GOOD)


BAD_STARTS = [
    ("unknown kind", {"item_kind": "video"}, ParameterError, "video"),
    ("no items", {"n_items": 0}, ParameterError, "at least 1"),
    ("n_items a bool", {"n_items": True}, ParameterError, "integer"),
    ("too many items", {"n_items": 1 << 25}, InputError, "limit"),
    ("source not a map", {"source": ["a"]}, InputError, "source"),
    ("config not encodable", {"config": {"f": float("nan")}}, InputError, "finite"),
    ("short secret", {"secret": b"x" * 31}, InputError, "32 bytes"),
]


@pytest.mark.parametrize(
    ("case", "change", "error", "match"), BAD_STARTS, ids=[c[0] for c in BAD_STARTS]
)
def test_create_refuses_bad_parameters(tmp_path, case, change, error, match):
    arguments = {"item_kind": "image", "source": SOURCE, "config": CONFIG, "n_items": 6}
    with pytest.raises(error, match=match):
        VaultWriter.create_or_resume(tmp_path / "v", **(arguments | change))
    assert not (tmp_path / "v").exists()
    assert list(tmp_path.iterdir()) == []  # no staging directory left behind


RESUME_MISMATCHES = [
    ("config", {"config": CONFIG | {"epsilon": 12}}, "config.*'epsilon': 10 there, 12 here"),
    ("config key", {"config": {**CONFIG, "seed": 1}}, "config.*'seed': '<absent>' there"),
    ("source", {"source": {"dataset": "other"}}, "source.*'dataset'"),
    # The refusal says how to go on either way.
    ("how to go on", {"source": {"dataset": "other"}}, "to continue it.*to start over, remove"),
    ("n_items", {"n_items": N + 1}, f"n_items={N}, not {N + 1}"),
    ("int vs float", {"config": CONFIG | {"epsilon": 10.0}}, "epsilon"),
    ("secret", {"secret": bytes(32)}, "another secret"),
]


@pytest.mark.parametrize(
    ("case", "change", "match"), RESUME_MISMATCHES, ids=[c[0] for c in RESUME_MISMATCHES]
)
def test_resume_refuses_another_run(tmp_path, case, change, match):
    arguments = {
        "item_kind": "image",
        "source": SOURCE,
        "config": CONFIG,
        "n_items": N,
        "secret": SECRET,
    }
    writer = VaultWriter.create_or_resume(tmp_path / "v", **arguments)
    writer.append(*make_items(4))
    writer.close()
    before = snapshot(tmp_path / "v")
    with pytest.raises(ParameterError, match=match):
        VaultWriter.create_or_resume(tmp_path / "v", **(arguments | change))
    assert snapshot(tmp_path / "v") == before


def test_create_or_resume_refuses_other_paths(tmp_path):
    arguments = {"item_kind": "image", "source": SOURCE, "config": CONFIG, "n_items": N}
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(InputError, match="is a file"):
        VaultWriter.create_or_resume(tmp_path / "file", **arguments)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "photo.png").write_bytes(b"x")
    with pytest.raises(InputError, match="neither empty nor a vault"):
        VaultWriter.create_or_resume(tmp_path / "full", **arguments)
    make_vault(tmp_path / "done")
    with pytest.raises(StateError, match="already complete"):
        VaultWriter.create_or_resume(tmp_path / "done", **(arguments | {"secret": SECRET}))


def test_one_writer_at_a_time(tmp_path):
    arguments = {"item_kind": "image", "source": SOURCE, "config": CONFIG, "n_items": N}
    with (
        VaultWriter.create_or_resume(tmp_path / "v", **arguments),
        pytest.raises(StateError, match="another writer"),
    ):
        VaultWriter.create_or_resume(tmp_path / "v", **arguments)
    VaultWriter.create_or_resume(tmp_path / "v", **arguments).close()


# --- Opening: every modification is named ----------------------------------------------


def _flip_byte(path: Path, offset: int = -1) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _edit_manifest(vault: Path, **changes) -> None:
    """Change manifest fields, with a matching checksum (a deliberate, consistent edit)."""
    manifest = decode((vault / "manifest.msgpack").read_bytes())
    assert isinstance(manifest, dict)
    body = {key: value for key, value in (manifest | changes).items() if key != "checksum"}
    checksum = hashlib.sha256(encode(body)).digest()
    (vault / "manifest.msgpack").write_bytes(encode(body | {"checksum": checksum}))


def _rehash(vault: Path, name: str) -> None:
    """Record a file's new SHA-256 in the manifest (a consistent forgery of one file)."""
    manifest = decode((vault / "manifest.msgpack").read_bytes())
    assert isinstance(manifest, dict) and isinstance(manifest["files"], dict)
    files = manifest["files"] | {name: hashlib.sha256((vault / name).read_bytes()).digest()}
    _edit_manifest(vault, files=files)


def _forge_journal(vault: Path) -> None:
    """Rewrite the header with another config, consistently framed and hashed."""
    from twinaudit.owner.vault.journal import read_journal

    journal = read_journal(vault)
    header = journal.parameters.to_value() | {"config": {"marker": "forged"}}
    records = [frame(header)] + [frame(record.to_value()) for record in journal.chunks]
    (vault / "journal").write_bytes(b"".join(records))
    _rehash(vault, "journal")


MODIFICATIONS = [
    ("chunk pixel", lambda v: _flip_byte(v / "chunks/000001.pairs"), "chunks/000001.pairs"),
    ("chunk header", lambda v: _flip_byte(v / "chunks/000000.pairs", 20), "chunks/000000.pairs"),
    ("chunk truncated", lambda v: (v / "chunks/000002.pairs").write_bytes(b""), "000002.pairs"),
    ("manifest byte", lambda v: _flip_byte(v / "manifest.msgpack", 200), "manifest.msgpack"),
    ("manifest spec byte", lambda v: _flip_byte(v / "manifest.msgpack", -40), "manifest"),
    ("manifest root", lambda v: _edit_manifest(v, root=bytes(32)), "manifest.msgpack"),
    ("manifest key", lambda v: _edit_manifest(v, note="x"), "manifest.msgpack"),
    ("manifest n_pairs", lambda v: _edit_manifest(v, n_pairs=9), "manifest.msgpack"),
    ("manifest config", lambda v: _edit_manifest(v, config={}), "manifest.msgpack"),
    ("manifest garbage", lambda v: (v / "manifest.msgpack").write_bytes(b"\xc1"), "manifest"),
    ("secret", lambda v: _flip_byte(v / "secret.key"), "secret.key"),
    (
        "secret rehashed",
        lambda v: (_flip_byte(v / "secret.key"), _rehash(v, "secret.key")),
        "secret.key",
    ),
    ("journal", lambda v: _flip_byte(v / "journal", 10), "journal"),
    ("journal appended", lambda v: (v / "journal").open("ab").write(b"\0"), "journal"),
    ("journal forged", _forge_journal, "manifest.msgpack"),
    (
        "chunk rehashed",
        lambda v: (_flip_byte(v / "chunks/000001.pairs"), _rehash(v, "chunks/000001.pairs")),
        "chunks/000001.pairs",
    ),
    ("extra file", lambda v: (v / "notes.txt").write_text("hi"), "notes.txt"),
    ("extra chunk", lambda v: (v / "chunks/000003.pairs").write_bytes(b"x"), "chunks/000003.pairs"),
    ("extra directory", lambda v: (v / "extra").mkdir(), "extra"),
    ("symlink", lambda v: (v / "link").symlink_to(v / "journal"), "link"),
    ("temp leftover", lambda v: (v / ".tmp-manifest.msgpack").write_bytes(b""), "temporary"),
    ("stray receipt", lambda v: (v / "receipt.json").write_bytes(b"{}"), "interrupted"),
    ("missing chunk", lambda v: (v / "chunks/000001.pairs").unlink(), "chunks/000001.pairs"),
    ("missing journal", lambda v: (v / "journal").unlink(), "journal"),
]


@pytest.mark.parametrize(
    ("case", "modify", "named"), MODIFICATIONS, ids=[c[0] for c in MODIFICATIONS]
)
def test_open_names_every_modification(tmp_path, case, modify, named):
    make_vault(tmp_path / "v")
    modify(tmp_path / "v")
    with pytest.raises(VaultIntegrityError, match=named) as caught:
        Vault.open(tmp_path / "v")
    assert named in caught.value.file or named in str(caught.value)


def test_a_chunk_modified_after_open_is_caught_on_read(tmp_path):
    make_vault(tmp_path / "v")
    vault = Vault.open(tmp_path / "v")
    _flip_byte(tmp_path / "v" / "chunks/000002.pairs")
    with pytest.raises(VaultIntegrityError, match=r"chunks/000002.pairs"):
        vault.opening(9)
    with pytest.raises(VaultIntegrityError, match=r"chunks/000002.pairs"):
        list(vault.chunks())
    vault.opening(0)  # other chunks still read


@pytest.mark.parametrize(
    ("change", "match"),
    [({"format_version": 6}, "version 6"), ({"spec": "9.9"}, "9.9"), ({"format": "x"}, "'x'")],
)
def test_open_refuses_other_versions(tmp_path, change, match):
    make_vault(tmp_path / "v")
    _edit_manifest(tmp_path / "v", **change)
    with pytest.raises(VersionError, match=match):
        Vault.open(tmp_path / "v")


def test_open_refuses_what_is_not_a_finished_vault(tmp_path):
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(InputError, match="is a file"):
        Vault.open(tmp_path / "file")
    with pytest.raises(InputError, match="no vault"):
        Vault.open(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="not a vault"):
        Vault.open(tmp_path / "empty")
    writer = VaultWriter.create_or_resume(
        tmp_path / "v", item_kind="image", source=SOURCE, config=CONFIG, n_items=N
    )
    writer.close()
    with pytest.raises(StateError, match="not finished"):
        Vault.open(tmp_path / "v")


def test_open_refuses_a_secret_others_can_read(tmp_path):
    make_vault(tmp_path / "v")
    os.chmod(tmp_path / "v" / "secret.key", 0o644)
    with pytest.raises(InputError, match="other users"):
        Vault.open(tmp_path / "v")


@pytest.mark.parametrize("index", [-1, N, True, "1", 2.0])
def test_pair_index_out_of_range(tmp_path, index):
    vault = make_vault(tmp_path / "v")
    for method in (vault.pair, vault.opening, vault.pair_opening, vault.salt, vault.commitment):
        with pytest.raises(ParameterError):
            method(index)


@pytest.mark.parametrize(
    ("shape", "label", "caption"),
    [((2, 28, 28, 1), 3, None), ((2, 300, 400, 3), None, None), ((2, 200, 160, 3), 1, "a cap")],
)
def test_a_pairs_commitment_hashed_in_pieces_is_the_protocols(shape, label, caption):
    pair = np.random.default_rng(shape[1]).integers(0, 256, size=shape, dtype=np.uint8)
    secret = bytes(range(32))

    def item(k: int) -> bytes:
        image = ImageItem(pair[k], label)
        return encode_item(image if caption is None else CaptionedImageItem(image, caption))

    expected, _ = commit_pair(item(0), item(1), pair_salt(secret, 9))
    assert pair_commitment(secret, 9, pair, label, caption) == expected


def test_the_journal_header_is_read_without_the_chunk_records(tmp_path):
    vault = make_vault(tmp_path / "v")
    journal = tmp_path / "v" / "journal"
    whole = read_journal(tmp_path / "v")
    assert read_header(tmp_path / "v") == whole.parameters
    # A damaged chunk record fails the whole journal, not its header.
    data = bytearray(journal.read_bytes())
    data[-40] ^= 0xFF
    journal.write_bytes(bytes(data) + frame({"record": "chunk"}))
    with pytest.raises(VaultIntegrityError):
        read_journal(tmp_path / "v")
    assert read_header(tmp_path / "v").source == vault.source
    data[8] ^= 0xFF  # inside the header record
    journal.write_bytes(bytes(data))
    with pytest.raises(VaultIntegrityError, match="journal"):
        read_header(tmp_path / "v")
    journal.write_bytes(b"")
    with pytest.raises(VaultIntegrityError, match="no header"):
        read_header(tmp_path / "v")
