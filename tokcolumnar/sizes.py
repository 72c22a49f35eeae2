"""Sizes of memory, read before Polars loads (`malloc` decides a command line's allocator
settings from its `--memory-limit`; `memory` checks the run against it): `parse_size` reads a
size (`400MB`, `1.5GB`, `512MiB`, plain bytes), `default_limit` is `DEFAULT_FRACTION` of the
physical RAM.

>>> parse_size("1.5GB"), parse_size("512MiB")
(1500000000, 536870912)
"""

from __future__ import annotations

import os
import re

from .errors import TokcolumnarValueError

#: The default --memory-limit: this fraction of the physical RAM (the rest is left to the
#: page cache, which reading the corpus needs, and to other processes).
DEFAULT_FRACTION = 0.5

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 1 << 10, "mib": 1 << 20,
          "gib": 1 << 30, "tib": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*$")


def parse_size(text: str | int, what: str = "--memory-limit") -> int:
    """`400MB`, `1.5GB`, `512MiB`, plain bytes (`1000000`) -> bytes. Decimal units
    (kB, MB, GB, TB = powers of 1000) and binary ones (KiB, MiB, GiB, TiB = powers of 1024),
    case-insensitive."""
    if isinstance(text, bool):
        raise TokcolumnarValueError(f"{what} must be a size such as 400MB, 1.5GB or 512MiB")
    if isinstance(text, int):
        value = text
    else:
        m = _SIZE.match(str(text).lower())
        if m is None or m.group(2) not in _UNITS:
            raise TokcolumnarValueError(f"{what} {text!r} is not a size (write e.g. 400MB, "
                                        "1.5GB, 512MiB or a number of bytes)")
        value = int(float(m.group(1)) * _UNITS[m.group(2)])
    if value < 1:
        raise TokcolumnarValueError(f"{what} must be positive, got {text!r}")
    return value


def physical_memory() -> int | None:
    """The machine's RAM in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def default_limit() -> int:
    """`DEFAULT_FRACTION` of the physical RAM (8 GB where it cannot be read)."""
    ram = physical_memory()
    return int(ram * DEFAULT_FRACTION) if ram else 8 * 10**9
