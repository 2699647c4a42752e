"""The owner's vault: the private directory behind an escrow record.

A vault holds both versions of every pair, the secret the salts derive from, the
marking configuration, the escrow receipt, and a manifest with the SHA-256 of every
file. A resumable marking run writes it (:class:`VaultWriter`); every later command
(escrow, publish, inspect, claim) opens it (:meth:`Vault.open`), which checks all of it.

Layout (every file mode 0600, every directory 0700)::

    <vault>/
        secret.key         32 random bytes; salts and the marking seed derive from it
        journal            append-only: a header record (format and spec versions,
                           item kind, n_items, source, config, secret check value),
                           then one record per durable chunk (file, start, count,
                           item shape, SHA-256, labels, names); each record framed as
                           length ‖ canonical msgpack ‖ SHA-256
        chunks/000000.pairs  one per batch: both versions of its B images, H × W × C,
        chunks/000001.pairs  ...  exactly: a photo read from a JPEG as that JPEG plus a
                             correction, or as its midpoint coded losslessly, then the
                             mark and the parity (:mod:`twinaudit.owner.vault.jpeg_pairs`)
                             (image and captioned-image vaults)
        chunks/000000.msgpack    text vaults: canonical map of the batch's originals
                                 and both versions (:mod:`twinaudit.owner.vault.text_chunks`)
        manifest.msgpack   written by finish: canonical msgpack with the format and spec
                           versions, item kind, n_pairs, source, config, Merkle root,
                           the SHA-256 of every other file, the receipt's inclusion proof
        receipt.json       the arbiter's signed escrow receipt, exactly as received
        arbiter.pub        the arbiter's public key (PEM) the receipt verifies under

Derived values: the salt of pair ``i`` is ``HMAC-SHA256(secret,
"twinaudit/vault/v1/pair-salt" ‖ 0x00 ‖ uint64be(i))`` and the marking seed
``HMAC-SHA256(secret, "twinaudit/vault/v1/marking-seed")`` (:mod:`twinaudit.owner.vault.secret`).
Pair ``i`` is committed as spec §6.1 over ``encode_item(ImageItem(v_k, label_i))``
(image vaults), ``encode_item(CaptionedImageItem(ImageItem(v_k, label_i), caption_i))``
(captioned-image vaults: the caption, the same for both versions, is kept in the chunk's
journal record) or ``encode_item(TextItem(v_k))`` (text vaults; the originals kept in the
chunk are never committed); the root is the RFC 6962 root of the commitments in pair
order. Nothing holds a time, so the same inputs, secret and batch sizes give
byte-identical files (the root and every opening do not depend on the batch sizes).

Formats: this is format 5. Each item of an image chunk is stored one of two ways, the
smaller: format 2's midpoint, mark and parity planes
(:mod:`twinaudit.owner.vault.pair_codec`), or, where the photo was read from a JPEG or
HEIF file, that file's bytes, a correction plane (the midpoint less its guess from the
decoded file: zero but where that guess misses) and the mark and parity planes
(:mod:`twinaudit.owner.vault.jpeg_pairs`). An item whose mark was carried back from a
working-resolution field keeps that field instead, and the three planes hold only what
the field's prediction misses (:mod:`twinaudit.owner.vault.mark_fields`,
:mod:`twinaudit.owner.vault.field_items`). Reading a file-kept item decodes its file
with Pillow or pi-heif, so the vault depends on the decoder giving the same pixels:
each chunk records the decoder that wrote it and the SHA-256 of every item's midpoint,
and an item that decodes otherwise raises :class:`VaultIntegrityError` naming it, both
decoders and the remedy. Format 4 stored every mark as planes; format 3 held no colour
profiles or HEIF files; format 2 stored every midpoint losslessly; format 1 stored each
image chunk as a raw ``.npy`` array ``(2, B, H, W, C)`` (``chunks/000000.npy``), about
four times the bytes of format 2 for photos; everything else was alike. All are read; a
marking run continues in the format it was started in, and
:func:`twinaudit.owner.vault.migration.migrate_vault` (``owner vault-migrate``) rewrites
a vault atomically, keeping the root, every opening and the receipt: in format 2
(self-contained, no decoder dependence), or in format 5 (or 3, 4) given the photos it
was marked from.

Resume: a chunk counts as written once its journal record is durable. The chunk file
is made durable first (temp file, fsync, rename, fsync directory), so a crash leaves at
worst an unjournaled chunk file or a torn last journal record; a resumed run checks the
header against its parameters and every journaled chunk against its SHA-256, removes
such leftovers, cuts the torn record, and continues at the next item.

Integrity: :meth:`Vault.open` parses the manifest strictly, requires exactly the listed
files, checks every SHA-256 (chunks are read one at a time), recomputes every commitment
and the root, and re-verifies the stored receipt; any difference raises
:class:`VaultIntegrityError` naming the file. The hashes guard against corruption and
careless edits; they are not keyed, and the vault's confidentiality rests on the
directory's permissions.
"""

from twinaudit.protocol.errors import VaultIntegrityError, VaultStorageError

from .vault import Vault
from .writer import VaultWriter, write_vault

__all__ = ["Vault", "VaultIntegrityError", "VaultStorageError", "VaultWriter", "write_vault"]
