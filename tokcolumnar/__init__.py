"""tokcolumnar: BPE and WordPiece tokenizer training as columnar passes over Arrow tables.

The public names below load on first use (PEP 562), so `import tokcolumnar` and the command
line start without Polars: the CLI installs its signal handlers before the heavy libraries
load, and a Ctrl-C during start-up is then handled like any other."""

import os as _os
from importlib import import_module as _import_module

from . import malloc as _malloc

# Polars' allocator (jemalloc) keeps freed pages for reuse; returning them at once keeps the
# peak RSS of a training run ~25 MiB lower at no measurable cost. Only effective when polars
# has not been imported yet; an explicit setting by the user wins (`malloc.USER_JEMALLOC_CONF`,
# noted when `malloc` loads, just above; a command line's work may choose another before Polars
# loads: `malloc.configure_for_command`).
_os.environ.setdefault("_RJEM_MALLOC_CONF", _malloc.DEFAULT_JEMALLOC_CONF)

from .version import __version__ as __version__  # noqa: E402 - (after the setting above)

_PUBLIC = {
    "Encoding": "tokenizer", "Tokenizer": "tokenizer", "TokcolumnarError": "errors",
    "TokcolumnarTypeError": "errors", "TokcolumnarValueError": "errors",
    "TokcolumnarWarning": "errors", "TrainConfig": "config",
    "TrainResult": "export", "train": "training.pipeline",
    "count_words": "training.pipeline",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> object:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'tokcolumnar' has no attribute {name!r}")
    value = getattr(_import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
