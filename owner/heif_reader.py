"""The HEIF reader: pi-heif's Pillow plugin, registered once, and the versions it decodes with.

A phone's HEIC photos are read through pi-heif (the decode-only build of pillow-heif:
libheif and libde265). Importing this module registers its plugin with Pillow, so that
``Image.open(..., formats=["HEIF"])`` reads them; where pi-heif cannot be imported,
:data:`HEIF_READ` is False and HEIF files are refused by name.
"""

from __future__ import annotations

from typing import Final


def _register() -> bool:
    """Register pi-heif's HEIF reader with Pillow; return whether it could be imported."""
    try:
        import pi_heif  # noqa: PLC0415 - an import that may fail, once, here
    except ImportError:
        return False
    pi_heif.register_heif_opener()
    return True


#: Whether HEIF files are read here (pi-heif, a dependency, imported and registered).
HEIF_READ: Final = _register()

#: The brands of an ISO base media file's ``ftyp`` box that make it a HEIF image.
HEIF_BRANDS: Final = frozenset(
    {b"heic", b"heix", b"hevc", b"hevx", b"heim", b"heis", b"hevm", b"hevs", b"mif1", b"msf1"}
)


def is_heif(data: bytes | memoryview) -> bool:
    """Tell whether ``data`` starts as a HEIF file does (an ``ftyp`` box of a HEIF brand)."""
    return bytes(data[4:8]) == b"ftyp" and bytes(data[8:12]) in HEIF_BRANDS


def heif_decoder_name() -> str:
    """Return the HEIF decoder's versions (pi-heif, its libheif), or that there is none."""
    if not HEIF_READ:
        return "no HEIF decoder"
    import pi_heif  # noqa: PLC0415 - imported (and registered) above

    return f"pi-heif {pi_heif.__version__}, libheif {pi_heif.libheif_version()}"
