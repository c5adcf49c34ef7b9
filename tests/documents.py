"""Test documents built in code (no binary fixtures in the repository)."""

from __future__ import annotations

import zlib


def flate_bomb(expanded_bytes: int) -> bytes:
    """A zlib stream of ``expanded_bytes`` spaces, compressed without holding them in memory at once."""
    packer, block = zlib.compressobj(9), b" " * (1 << 20)
    parts = [packer.compress(block) for _ in range(expanded_bytes >> 20)]
    return b"".join(parts) + packer.flush()


def make_pdf(text: str, *, flate_content: bytes | None = None) -> bytes:
    """A minimal valid one-page PDF showing ``text``, with a correct xref table; ``flate_content`` replaces the
    page's content stream with that FlateDecode stream (e.g. a :func:`flate_bomb`)."""
    content = b"BT /F1 24 Tf 72 700 Td (" + text.encode("latin-1") + b") Tj ET"
    stream_head = b"<< /Length " + str(len(content)).encode() + b" >>"
    if flate_content is not None:
        content = flate_content
        stream_head = b"<< /Length " + str(len(content)).encode() + b" /Filter /FlateDecode >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        stream_head + b"\nstream\n" + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n".encode() + b"0000000000 65535 f \n"
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
