"""The running tokcolumnar's version (`tokcolumnar --version`, `run.json`). Loaded with the
package: `importlib.metadata` only when the version is asked for (it costs start-up time)."""

from __future__ import annotations

#: This copy's version (pyproject.toml's `version`).
__version__ = "0.1.0"


def package_version() -> str:
    """The installed distribution's version when it is the copy running, else `__version__`
    (a checkout run with `python -m tokcolumnar`, an editable install, or another copy
    installed beside it, whose version would not be this one's)."""
    from importlib import metadata
    from pathlib import Path

    try:
        dist = metadata.distribution("tokcolumnar")
    except metadata.PackageNotFoundError:
        return __version__
    here = Path(__file__).resolve()
    try:
        installed = Path(str(dist.locate_file("tokcolumnar/version.py"))).resolve()
    except (OSError, ValueError):
        return __version__
    return dist.version if installed == here else __version__
