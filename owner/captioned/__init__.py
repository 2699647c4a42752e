"""Captioned images (paper §6.3): each image marked into twins, the caption kept as is.

A captioned image's two versions are the image's two marked versions (any image
marker) with the same, unmarked caption; both are committed as captioned-image items
(spec §6.3), and the publication keeps each caption with its published image. The
source (:mod:`twinaudit.owner.captioned.sources`) pairs an image input with a captions file; the
marking run is :func:`twinaudit.owner.mark.mark`, the publication
:func:`twinaudit.owner.publish.publish`.
"""
