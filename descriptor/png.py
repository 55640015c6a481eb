"""Small PNGs: a matplotlib drawing re-encoded with a colour palette.

Pictures and plots are flat line art on white: a palette of a few dozen
colours keeps them visually the same (anti-aliased edges included) at about
a quarter of the bytes of matplotlib's 32-bit RGBA output (a 4-system sweep's
topology pictures: 371 KB -> ~100 KB), which matters because every experiment
directory carries them.
"""

from __future__ import annotations

import io

from PIL import Image

PALETTE_COLOURS = 64
"""Colours kept: enough for the plots' system colours and their anti-aliased edges."""


def palette_png(png: bytes, colours: int = PALETTE_COLOURS) -> bytes:
    """``png`` (any mode) re-encoded as an optimised palette PNG of at most ``colours`` colours, no dithering."""
    with Image.open(io.BytesIO(png)) as im:
        rgb = im.convert("RGB")  # the figures are opaque on white: the alpha channel holds nothing
    out = io.BytesIO()
    rgb.quantize(colors=colours, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(
        out, format="PNG", optimize=True)
    return out.getvalue()
