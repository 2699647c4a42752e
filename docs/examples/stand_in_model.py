"""Turn a proxy from ``twinaudit owner proxy`` into a model ``twinaudit oracle serve`` serves.

A stand-in practitioner, for trying a claim on your own images (the README's quick
start) when you have no model of your own to audit: ``twinaudit owner proxy`` trains
its small CNN on the published images and their labels, and this script wraps that
CNN so that it takes images of any size, grey or colour (resized to the proxy's
side as ``owner proxy`` resized them, and converted to its number of channels), and
saves it as TorchScript, which ``twinaudit oracle serve --model FILE`` loads without
``--arch``::

    python docs/examples/stand_in_model.py runs/try/model.proxy --out runs/try/model.pt

Not part of the tool: any classifier a practitioner serves will do.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F  # noqa: N812 - the usual torch alias
from torch import nn

from twinaudit.owner.marking.proxy import load_proxy_state


class AnySize(nn.Module):
    """The proxy behind a resize to its side and a conversion to its channels."""

    def __init__(self, proxy: nn.Module, side: int, channels: int) -> None:
        """Wrap ``proxy``, which takes (N, ``channels``, ``side``, ``side``) in [0, 1]."""
        super().__init__()
        self.proxy = proxy
        self.side = side
        self.channels = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return the proxy's logits for images (N, C, H, W) in [0, 1] of any H, W and C."""
        if x.shape[1] != self.channels:
            if self.channels == 1:
                x = x.mean(dim=1, keepdim=True)
            else:
                x = x[:, :1].expand(-1, self.channels, -1, -1)
        if x.shape[2] != self.side or x.shape[3] != self.side:
            shrinking = x.shape[2] > self.side or x.shape[3] > self.side
            x = F.interpolate(x, size=(self.side, self.side), mode="bilinear", antialias=shrinking)
        out: torch.Tensor = self.proxy(x)
        return out


def main(argv: list[str] | None = None) -> int:
    """Read the proxy, wrap it, and write it as TorchScript."""
    parser = argparse.ArgumentParser(
        prog="python docs/examples/stand_in_model.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("proxy", type=Path, help="a file written by twinaudit owner proxy")
    parser.add_argument("--out", type=Path, required=True, help="the TorchScript file (new)")
    args = parser.parse_args(argv)
    if args.out.exists():
        parser.error(f"{args.out} exists; the model is written to a new file")
    proxy, side = load_proxy_state(str(args.proxy))
    conv = proxy.features[0]
    assert isinstance(conv, nn.Conv2d)
    model = torch.jit.script(AnySize(proxy, side, conv.in_channels).eval())
    model.save(str(args.out))  # type: ignore[no-untyped-call]
    print(f"wrote {args.out}; next: twinaudit oracle serve --model {args.out} ...")
    return 0


if __name__ == "__main__":
    sys.exit(main())
