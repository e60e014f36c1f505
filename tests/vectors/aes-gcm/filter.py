#!/usr/bin/env python3
"""Keeps, of NIST CAVP's GCM response files, only the sections the service supports: a 96-bit
IV and a 128-bit tag (docs/ALGORITHM.md §15.4).

    python3 tests/vectors/aes-gcm/filter.py SOURCE_DIR tests/vectors/aes-gcm

reads gcmEncryptExtIV{128,192,256}.rsp and gcmDecrypt{128,192,256}.rsp from SOURCE_DIR and writes
the filtered files, records unchanged, to the destination. The file header gains one comment line
saying what was kept.
"""
import re
import sys
from pathlib import Path

FILES = [f"gcm{kind}{bits}.rsp" for kind in ("EncryptExtIV", "Decrypt") for bits in (128, 192, 256)]


def filter_text(text: str) -> tuple[str, int]:
    # Sections start at "[Keylen = ..]"; everything before the first is the file header.
    parts = re.split(r"\n(?=\[Keylen = )", text)
    header, sections = parts[0].rstrip("\n"), parts[1:]
    kept = []
    for section in sections:
        params = dict(re.findall(r"^\[(\w+) = (\d+)\]", section, re.M))
        if params.get("IVlen") == "96" and params.get("Taglen") == "128":
            kept.append(section.rstrip("\n"))
    records = sum(s.count("\nCount = ") for s in kept)
    note = "# Filtered for cryptodispatch: only [IVlen = 96] and [Taglen = 128] sections kept."
    return "\n".join([header, note, ""] + [s + "\n" for s in kept]), records


def main() -> None:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    for name in FILES:
        text, records = filter_text((src / name).read_text())
        (dst / name).write_text(text)
        print(f"{name}: {records} records")


if __name__ == "__main__":
    main()
