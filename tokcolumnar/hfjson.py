"""Reading the objects of a `tokenizer.json`: typed fields with one-line errors.

Every component's `from_hf` reads its fields through `HFObject`, so a field of the wrong type
(`"suffix": 3`), a missing required field or a component that is not a JSON object is refused
with a `TokcolumnarValueError` naming the component and the field (`decoder BPEDecoder: 'suffix'
must be a string, got an integer`), instead of surfacing later as a Python or Polars error;
`Tokenizer.from_file` puts the file's path in front. Types follow HF's own deserializer
(serde): an integer field takes a JSON integer (not a float, not a boolean), a boolean field a
JSON boolean, and so on."""

from __future__ import annotations

import math
from typing import Any

from .errors import TokcolumnarValueError

REQUIRED: Any = object()  # marker: the field has no default


def json_kind(value: Any) -> str:
    """The JSON name of a Python value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def is_json_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class HFObject:
    """A JSON object of a `tokenizer.json` (`where` names it in errors, e.g. `decoder
    BPEDecoder`)."""

    def __init__(self, d: Any, where: str) -> None:
        if not isinstance(d, dict):
            raise TokcolumnarValueError(f"{where} must be a JSON object, got {json_kind(d)}")
        self.d = d
        self.where = where

    def error(self, message: str) -> TokcolumnarValueError:
        return TokcolumnarValueError(f"{self.where}: {message}")

    def has(self, key: str) -> bool:
        return key in self.d

    def _get(self, key: str, default: Any) -> tuple[Any, bool]:
        """(value, given): the default when the field is absent."""
        if key in self.d:
            return self.d[key], True
        if default is REQUIRED:
            raise self.error(f"missing field {key!r}")
        return default, False

    def _bad(self, key: str, want: str, value: Any) -> TokcolumnarValueError:
        return self.error(f"{key!r} must be {want}, got {json_kind(value)}")

    def raw(self, key: str, default: Any = REQUIRED) -> Any:
        return self._get(key, default)[0]

    def str(self, key: str, default: Any = REQUIRED, nullable: bool = False) -> Any:
        value, given = self._get(key, default)
        if given and not (isinstance(value, str) or (nullable and value is None)):
            raise self._bad(key, "a string" + (" or null" if nullable else ""), value)
        return value

    def bool(self, key: str, default: Any = REQUIRED, nullable: bool = False) -> Any:
        value, given = self._get(key, default)
        if given and not (isinstance(value, bool) or (nullable and value is None)):
            raise self._bad(key, "true or false" + (" or null" if nullable else ""), value)
        return value

    def int(self, key: str, default: Any = REQUIRED, minimum: int = 0,
            maximum: int | None = None) -> Any:
        value, given = self._get(key, default)
        if given:
            if not is_json_int(value):
                raise self._bad(key, "an integer", value)
            if value < minimum or (maximum is not None and value > maximum):
                top = f" and <= {maximum}" if maximum is not None else ""
                raise self.error(f"{key!r} must be >= {minimum}{top}, got {value}")
        return value

    def number(self, key: str, default: Any = REQUIRED, nullable: bool = False) -> Any:
        value, given = self._get(key, default)
        if given and not (nullable and value is None):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                    not math.isfinite(value)):
                raise self._bad(key, "a number" + (" or null" if nullable else ""), value)
        return value

    def list(self, key: str, default: Any = REQUIRED) -> Any:
        value, given = self._get(key, default)
        if given and not isinstance(value, list):
            raise self._bad(key, "an array", value)
        return value

    def obj(self, key: str, default: Any = REQUIRED, nullable: bool = False) -> Any:
        value, given = self._get(key, default)
        if given and not (isinstance(value, dict) or (nullable and value is None)):
            raise self._bad(key, "an object" + (" or null" if nullable else ""), value)
        return value

    def str_list(self, key: str, default: Any = REQUIRED) -> Any:
        value = self.list(key, default)
        for x in value if isinstance(value, list) else ():
            if not isinstance(x, str):
                raise self.error(f"{key!r} must hold strings, got {json_kind(x)}")
        return value


#: The deepest a `tokenizer.json` may nest arrays and objects (the top-level object is level
#: 1): HF's reader (serde_json) refuses a 128th level.
MAX_DEPTH = 127
#: Fields of the model that its reader checks entry by entry without recursing (`check_depth`
#: does not walk their entries: a file's 50,000 merges would cost ~50 ms to walk).
_FLAT_MODEL_FIELDS = ("vocab", "merges")


def too_deep() -> TokcolumnarValueError:
    return TokcolumnarValueError(f"arrays and objects nested more than {MAX_DEPTH} levels deep "
                                 "(HF's tokenizers refuses them too)")


def check_depth(d: Any) -> None:
    """Refuse a parsed `tokenizer.json` nesting arrays and objects more than `MAX_DEPTH`
    levels deep, as HF does, before its components are read: their readers recurse into
    `Sequence`s, and a file nested thousands deep ended in a RecursionError. Walked level by
    level, without recursion; the entries of the model's vocabulary and merges are left to
    its reader, which refuses an entry that is not a string, number or pair of strings."""
    model = d.get("model") if isinstance(d, dict) else None
    level = [d] if isinstance(d, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            raise too_deep()
        below: list[Any] = []
        for node in level:
            if node is model:
                values: Any = [v for k, v in node.items() if k not in _FLAT_MODEL_FIELDS]
            else:
                values = node.values() if isinstance(node, dict) else node
            below.extend(v for v in values if isinstance(v, (dict, list)))
        level = below


def component_type(d: Any, where: str) -> tuple[HFObject, str]:
    """A component object (`normalizer`, `decoder`, ...) and its `type` string."""
    obj = HFObject(d, where)
    kind = obj.str("type", "")
    return obj, kind
