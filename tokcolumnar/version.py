"""The running tokcolumnar's version (`tokcolumnar --version`, `run.json`)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from . import __file__ as _package_init
from . import __version__


def package_version() -> str:
    """The installed distribution's version when it is the copy running, else the package's
    `__version__` (a checkout run with `python -m tokcolumnar`, an editable install, or another
    copy installed beside it, whose version would not be this one's)."""
    try:
        dist = metadata.distribution("tokcolumnar")
    except metadata.PackageNotFoundError:
        return __version__
    try:
        installed = Path(str(dist.locate_file("tokcolumnar/__init__.py"))).resolve()
    except (OSError, ValueError):
        return __version__
    return dist.version if installed == Path(_package_init).resolve() else __version__
