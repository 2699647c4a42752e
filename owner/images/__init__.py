"""The owner's images: streaming readers, publication writers and a contact sheet.

- :func:`open_source` reads a folder of images (PNG, JPEG, WebP, TIFF, BMP, GIF), an
  ``.npy``, an ``.npz`` or an idx(.gz) file as :class:`ImageBatch` objects, in bounded memory.
- :func:`open_writer` publishes one version of each image in the input's format,
  atomically.
- :func:`write_contact_sheet` draws rows of images (raw, published, hidden…) into a PNG;
  :func:`write_fitted_contact_sheet` does so for images of any sizes.
"""

from .sheet import amplified_difference, write_contact_sheet, write_fitted_contact_sheet
from .sources import ImageBatch, ImageSource, open_source
from .writers import PublicationWriter, open_writer, published_name

__all__ = [
    "ImageBatch",
    "ImageSource",
    "PublicationWriter",
    "amplified_difference",
    "open_source",
    "open_writer",
    "published_name",
    "write_contact_sheet",
    "write_fitted_contact_sheet",
]
