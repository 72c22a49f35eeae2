"""tokcolumnar: BPE and WordPiece tokenizer training as columnar passes over Arrow tables."""

from .config import TrainConfig
from .errors import TokcolumnarError
from .tokenizer import Encoding, Tokenizer
from .training import TrainResult, train

__version__ = "0.1.0"

__all__ = ["Encoding", "Tokenizer", "TokcolumnarError", "TrainConfig", "TrainResult", "train",
           "count_words"]


def count_words(inputs, **options):  # noqa: ANN001, ANN201
    """The counting stage alone: the `words` table (word, count, first_seen)."""
    from .training import words_from_inputs

    return words_from_inputs(inputs, TrainConfig(**options))
