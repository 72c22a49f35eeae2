"""Extending a trained tokenizer (`train(..., extend=BASE)`, `--extend BASE`; docs/extend.md):
every token and id of the base is kept, and the merge loop continues on a new corpus until the
new vocabulary size. The base is one of our output directories, an HF `tokenizer.json`
(`load_hf_base`) or a tiktoken vocabulary with its pattern and special tokens
(`load_tiktoken_base`).

The new corpus is counted with the base's settings (its normalizer and pre-tokenizer), then the
loop's state "after the base's merges" is made in one of two ways:

- *replay*: when the corpus's initial vocabulary is the base's (same special tokens, alphabet
  and variants, same ids), the model's own loop runs from the initial symbols with the base's
  merge count as its limit, and each merge it makes is checked against the base's. When all
  match, the loop's state is exactly the state a fresh run has after those merges — queue,
  pair counts, tie-break state and HF's quirks included — so continuing it gives what a
  fresh run to the new size gives (the exactness oracle, tests/training/test_extend.py).
- *rebuild*: otherwise (another corpus, or the replay's first differing merge), each word's
  characters are mapped to the base's ids, the base's merges are applied as the encoder applies
  them (`BPEModel.apply_merges`, in columnar rounds), and the loop starts from that
  segmentation with the base's vocabulary. New tokens get ids after the base's largest:
  first the characters (and their prefixed/suffixed variants) of the new corpus that the
  base has no token for, then the new merges' tokens.

Either way the merges table lists the base's merges first, in their ranks, with `origin`
"base" (their `count` and `words` are those of the new corpus on the rebuild path), then the
new ones with `origin` "extend"."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ..config import TrainConfig, _show, _string_list
from ..errors import TokcolumnarError, TokcolumnarValueError
from ..layout import Layout
from ..models.bpe import BPEModel
from ..progress import StageTimer
from ..text.bytelevel import BYTE_ALPHABET, byte_map_bytes
from ..text.decoders import ByteLevelDecoder
from ..text.normalizers import NORMALIZER_NAMES, build_normalizer
from ..text.patterns import pattern_name_or_regex
from ..text.pretokenizers import PRETOKENIZER_NAMES, build_pretokenizer
from ..tiktoken_format import read_tiktoken, trained_merges_of_ranks
from ..tokenizer import AddedToken, Tokenizer
from .bpe import BpeTrainer
from .checkpoint import MergeCheckpoint, Trainer
from .polars_engine import initial_symbols, make_trainer, merge_loop
from .symbols import Initial, Vocab, build_initial
from .tables import TrainTables, result_tables

#: Options an extension may set freely (they shape the run, not the base's tokenizer).
FREE = ("vocab_size", "max_merges", "engine", "format", "column", "show_progress", "max_words",
        "max_word_chars", "extend")
#: Options of the merge loop: the base's value unless given.
LOOP = ("min_frequency", "tie_break", "max_token_length", "min_score", "wordpiece_scoring")
#: The engines that extend (the DuckDB one: `duckdb.extend`).
ENGINES = ("polars", "duckdb")
#: The `origin` of each merge in an extension's merges table.
BASE_ORIGIN, NEW_ORIGIN = "base", "extend"
#: A base file in tiktoken's format (`load_tiktoken_base`).
TIKTOKEN_SUFFIX = ".tiktoken"


@dataclass
class Base:
    """A base tokenizer: its settings, its vocabulary (token and kind by id) and its merges in
    rank order (`left_id`, `right_id`, `id` and the strings)."""

    path: str
    settings: dict[str, Any]
    tokens: list[str]
    kinds: list[str]
    merges: pl.DataFrame

    @property
    def model(self) -> str:
        return str(self.settings.get("model"))


def load_base(path: str | Path, pattern: str | None = None,
              special_tokens: list[str] | None = None) -> Base:
    """Read a base: one of our output directories (run.json, vocab.parquet, merges.parquet),
    an HF `tokenizer.json` with a BPE model (`load_hf_base`) or a tiktoken vocabulary with its
    split `pattern` and `special_tokens` (`load_tiktoken_base`)."""
    p = Path(path)
    if not p.exists():
        raise TokcolumnarError(f"--extend {path}: no such file or directory")
    if p.is_file() and p.suffix == ".json":
        return load_hf_base(p)
    if p.is_file() and p.suffix == TIKTOKEN_SUFFIX:
        return load_tiktoken_base(p, pattern, special_tokens)
    if not p.is_dir():
        raise TokcolumnarError(f"--extend {path}: not a tokcolumnar output directory, a "
                               "tokenizer.json or a .tiktoken file")
    try:
        run = json.loads((p / "run.json").read_text(encoding="utf-8"))
        vocab = pl.read_parquet(p / "vocab.parquet", columns=["id", "token", "kind"])
        merges = pl.read_parquet(p / "merges.parquet")
    except (OSError, ValueError, pl.exceptions.PolarsError) as e:
        raise TokcolumnarError(f"--extend {path}: not a readable tokcolumnar output directory "
                               f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else e})"
                               ) from None
    if not isinstance(run, dict) or run.get("tool") != "tokcolumnar" \
            or not isinstance(run.get("settings"), dict):
        raise TokcolumnarError(f"--extend {path}: its run.json is not a tokcolumnar run's")
    vocab = vocab.sort("id")
    if vocab.get_column("id").to_list() != list(range(vocab.height)):
        raise TokcolumnarError(f"--extend {path}: its vocab.parquet ids are not "
                               f"0..{vocab.height - 1}")
    base = Base(str(path), run["settings"], vocab.get_column("token").to_list(),
                vocab.get_column("kind").to_list(),
                merges.sort("rank").drop("origin", strict=False))
    check_base(base)
    return base


def _named(component: Any, names: list[tuple[dict[str, Any], Any]], what: str,
           path: Path) -> dict[str, Any]:
    """The settings naming a component tokcolumnar builds, equal to the base's."""
    for settings, built in names:
        if built == component:
            return settings
    raise TokcolumnarError(f"--extend {path}: its {what} ({component!r}) is not one tokcolumnar "
                           "counts with, so the new corpus could not be split as the base "
                           "splits text")


def base_merges_table(rows: list[tuple[int, str, str, str, int, int, int]]) -> pl.DataFrame:
    """A base's merges (rank, left, right, token and their ids) as a merges table, with the
    columns a training run fills (count, score, words) empty: a base read from a file has no
    counts."""
    merges = pl.DataFrame(rows, schema={"rank": pl.UInt32, "left": pl.String,
                                        "right": pl.String, "token": pl.String,
                                        "left_id": pl.Int64, "right_id": pl.Int64,
                                        "id": pl.Int64}, orient="row")
    return merges.with_columns(pl.lit(0, dtype=pl.UInt64).alias("count"),
                               pl.lit(None, dtype=pl.Float64).alias("score"),
                               pl.lit(0, dtype=pl.UInt64).alias("words"))


def load_hf_base(path: Path) -> Base:
    """An HF `tokenizer.json` as a base: its BPE model's vocabulary (ids 0..n-1) and merges,
    with the settings that count text as its normalizer and pre-tokenizer do. Its added
    tokens are the special tokens; a token no merge makes is a character (or a character
    with the model's prefix or suffix: a variant)."""
    tok = Tokenizer.from_file(path)
    model = tok.model
    if not isinstance(model, BPEModel):
        raise TokcolumnarError(f"--extend {path}: a {getattr(model, 'hf_type', '?')} model "
                               "cannot be extended from a tokenizer.json (BPE can)")
    if sorted(model.vocab.values()) != list(range(len(model.vocab))):
        raise TokcolumnarError(f"--extend {path}: its vocabulary's ids are not "
                               f"0..{len(model.vocab) - 1}")
    tokens = [""] * len(model.vocab)
    for t, i in model.vocab.items():
        tokens[i] = t
    prefix, suffix = model.continuing_subword_prefix, model.end_of_word_suffix
    rows = []
    for rank, (a, b) in enumerate(model.merges):
        joined = a + (b[len(prefix):] if prefix and b.startswith(prefix) else b)
        rows.append((rank, a, b, joined, model.vocab.get(a, -1), model.vocab.get(b, -1),
                     model.vocab.get(joined, -1)))
    merges = base_merges_table(rows)
    made = set(merges.get_column("id").to_list())
    added = [t.content for t in sorted(tok.added_tokens, key=lambda t: t.id)
             if model.vocab.get(t.content) == t.id]

    def kind(i: int, t: str) -> str:
        if t in added:
            return "special"
        if i in made:
            return "merge"
        core = t[len(prefix):] if prefix and t.startswith(prefix) else t
        core = core[:-len(suffix)] if suffix and core.endswith(suffix) else core
        return "merge" if len(core) != 1 else "alphabet" if core == t else "variant"

    settings: dict[str, Any] = {
        "model": "bpe", "special_tokens": added, "continuing_subword_prefix": prefix,
        "end_of_word_suffix": suffix, "tie_break": "id", "min_frequency": 0,
        "unk_token": model.unk_token if model.unk_token in added else None}
    settings.update(_named(tok.pre_tokenizer, [({"pre_tokenizer": n}, build_pretokenizer(n))
                                               for n in PRETOKENIZER_NAMES],
                           "pre-tokenizer", path))
    settings.update(_named(tok.normalizer, [
        ({"normalizer": n, "lowercase": lc}, build_normalizer(n, lc))
        for n in NORMALIZER_NAMES for lc in (False, True)], "normalizer", path))
    byte_level = settings["pre_tokenizer"] == "byte-level"
    settings["initial_alphabet"] = (list(BYTE_ALPHABET) if byte_level
                                    and all(c in model.vocab for c in BYTE_ALPHABET) else [])
    base = Base(str(path), settings, tokens, [kind(i, t) for i, t in enumerate(tokens)], merges)
    check_base(base)
    return base


def base_tokenizer(path: str) -> Tokenizer:
    """The base's tokenizer (its normalizer, pre-tokenizer, decoder, post-processor and added
    tokens are the extension's)."""
    return Tokenizer.load(path)


def extended_tokenizer(cfg: TrainConfig, ids: dict[str, int],
                       merges: list[tuple[str, str]]) -> Tokenizer:
    """The extension's tokenizer: the base's, with the extended vocabulary and merges."""
    assert cfg.extend is not None
    if is_tiktoken_base(cfg.extend):
        return tiktoken_extended_tokenizer(cfg, ids, merges)
    base = base_tokenizer(cfg.extend)
    model = base.model
    assert isinstance(model, BPEModel)
    new = BPEModel(ids, merges, model.continuing_subword_prefix, model.end_of_word_suffix,
                   model.end_of_word_token, model.unk_token)
    return Tokenizer(new, base.normalizer, base.pre_tokenizer, base.decoder,
                     base.post_processor, base.added_tokens)


def check_base(base: Base) -> None:
    """The base's merges must build its vocabulary: each merge joins two tokens that exist
    before it into its token (`Vocab.joined`'s rule), and every token of kind `merge` is made
    by one."""
    if base.model not in ("bpe", "wordpiece", "unigram"):
        raise TokcolumnarError(f"--extend {base.path}: a {base.model} base cannot be extended "
                               "(BPE, WordPiece and Unigram bases can)")
    tokens, prefix = base.tokens, base.settings.get("continuing_subword_prefix")
    m = base.merges
    left, right, new = (m.get_column(c).cast(pl.Int64).to_numpy()
                        for c in ("left_id", "right_id", "id"))
    n = len(tokens)
    vocab = Vocab(tokens=list(tokens))
    made = {i for i, k in enumerate(base.kinds) if k != "merge"}
    for rank, (a, b, t, token) in enumerate(zip(left.tolist(), right.tolist(), new.tolist(),
                                                m.get_column("token").to_list())):
        if not (0 <= a < n and 0 <= b < n and 0 <= t < n) or a not in made or b not in made \
                or tokens[t] != token or vocab.joined(a, b, prefix) != token:
            raise TokcolumnarError(f"--extend {base.path}: its merges do not build its "
                                   f"vocabulary (merge {rank}: {token!r} from ids {a} and {b})")
        made.add(t)
    missing = [t for i, (t, k) in enumerate(zip(tokens, base.kinds))
               if k == "merge" and i not in made]
    if missing:
        raise TokcolumnarError(f"--extend {base.path}: its merges do not build its vocabulary "
                               f"({len(missing)} tokens made by no merge, e.g. {missing[0]!r})")


def _same(name: str, given: Any, base: Any) -> bool:
    if name in ("pre_tokenizer", "normalizer") and isinstance(given, str):
        given = given.lower()
    if name == "pattern" and isinstance(given, str) and given:  # an alias or a named regex
        given = pattern_name_or_regex(given)[0] or given
    if name == "initial_alphabet" and given is not None and base is not None:
        return set(given) == set(base)
    if isinstance(given, tuple):
        given = list(given)
    return bool(given == base)


def extend_options(extend: str | Path, options: dict[str, Any]) -> dict[str, Any]:
    """The options of an extension run: the base's settings, the given free and loop options
    (see FREE, LOOP); a given option that would change the base's tokenizer is refused,
    naming the base's value."""
    if "config" in options:
        raise TokcolumnarValueError("give the options as keywords with extend=, not config=")
    base = load_base(extend, options.get("pattern"), options.get("special_tokens"))
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    settings = {k: v for k, v in base.settings.items() if k in known}
    for name, value in options.items():
        if name in FREE or name in LOOP or value is None:
            continue
        if name not in known:
            continue  # TrainConfig refuses it
        if not _same(name, value, settings.get(name)):
            raise TokcolumnarValueError(
                f"{_show(name, value)} contradicts the base, which has "
                f"{_show(name, settings.get(name))} (--extend keeps the base's tokenizer: "
                f"{base.path})")
    out = {k: v for k, v in settings.items() if k not in FREE}
    out.update({k: v for k, v in options.items() if (k in FREE or k in LOOP) and v is not None})
    out["extend"] = str(extend)
    # (--preset subword-nmt reads --vocab-size as a number of merges, as subword-nmt's -s)
    merges_only = settings.get("preset") == "subword-nmt"
    have = base.merges.height if merges_only else len(base.tokens)
    what = "merges" if merges_only else "tokens"
    size = out.get("vocab_size")
    if size is None:
        raise TokcolumnarValueError(f"--extend needs --vocab-size above the base's "
                                    f"{have:,} {what}")
    if isinstance(size, int) and not isinstance(size, bool) and size <= have:
        raise TokcolumnarValueError(f"--vocab-size {size} is not above the base's "
                                    f"{have:,} {what} ({base.path})")
    if out.get("engine", "polars") not in ENGINES:
        raise TokcolumnarValueError(f"--extend runs on the Polars and DuckDB engines only "
                                    f"(got --engine {out['engine']})")
    return out


class Diverged(Exception):
    """The replayed loop made a merge the base did not."""


def _record(trainer: Trainer) -> Any:
    return trainer.merges if isinstance(trainer, BpeTrainer) else trainer.rec


def _matches(trainer: Trainer, base: pl.DataFrame) -> bool:
    """Whether the merges the loop made so far are the base's first ones."""
    rec = _record(trainer)
    n = len(rec.left)
    if n > base.height:
        return False
    head = base.head(n)
    return all(np.array_equal(np.asarray(getattr(rec, f), dtype=np.int64),
                              head.get_column(c).cast(pl.Int64).to_numpy())
               for f, c in (("left", "left_id"), ("right", "right_id"), ("new", "id")))


def _replay(trainer: Trainer, base: Base, checkpoint: MergeCheckpoint | None,
            resumed: bool, limit: int | None) -> None:
    """Run the loop up to the base's merge count, checking every merge (raises Diverged);
    then let it run to `limit` merges (--max-merges). The limit is set on the trainer for the
    replay, and checkpointed with it: a resumed replay gets the run's limit again here."""
    k = base.merges.height
    trainer.settings.max_merges = k if limit is None else min(k, limit)

    def check(t: Trainer) -> None:
        if not _matches(t, base.merges):
            raise Diverged
        if checkpoint is not None:
            checkpoint(t)

    trainer.train(resumed=resumed, on_pass=check)
    trainer.settings.max_merges = limit
    done = len(_record(trainer).left)
    if not _matches(trainer, base.merges) or (done < k and (limit is None or done < limit)):
        raise Diverged


def _same_initial(initial: Initial, base: Base) -> bool:
    n = len(initial.vocab)
    return initial.vocab.tokens == base.tokens[:n] and initial.vocab.kinds == base.kinds[:n]


def _base_vocab(base: Base) -> Vocab:
    """The base's vocabulary with each token's base length (prefix/suffix excluded), as the
    loop would have made it."""
    vocab = Vocab()
    for t, k in zip(base.tokens, base.kinds):
        vocab.add(t, k, len(t) if k == "special" else 0 if k == "alphabet" and len(t) != 1
                  else 1)
    for a, b, t in zip(*(base.merges.get_column(c).to_list()
                         for c in ("left_id", "right_id", "id"))):
        if base.kinds[t] == "merge":
            vocab.base_len[t] = vocab.base_len[a] + vocab.base_len[b]
    return vocab


def _base_model(base: Base, cfg: TrainConfig) -> BPEModel:
    m = base.merges
    return BPEModel(dict(zip(base.tokens, range(len(base.tokens)))),
                    list(zip(m.get_column("left").to_list(), m.get_column("right").to_list())),
                    cfg.continuing_subword_prefix, cfg.end_of_word_suffix,
                    cfg.end_of_word_token)


def rebuild(words: pl.DataFrame, cfg: TrainConfig, base: Base
            ) -> tuple[Initial, np.ndarray, np.ndarray]:
    """The new corpus's words segmented by the base's merges, laid out for the loop with the
    base's vocabulary; with the weighted occurrences each base merge joined and the number of
    words it joined in."""
    # the corpus's own characters (no alphabet limit: the base's alphabet is the limit)
    own = build_initial(words, cfg.special_tokens, None, [], cfg.continuing_subword_prefix,
                        cfg.end_of_word_suffix, cfg.end_of_word_token)
    offsets, ids = own.layout.segmentation(own.n_words)
    del own.layout
    # the base's ids; a character (or variant) the base lacks becomes a new token after the
    # base's largest id, in the order the corpus's own ids give (alphabet, then variants)
    vocab = _base_vocab(base)
    for t, kind, length in zip(own.vocab.tokens, own.vocab.kinds, own.vocab.base_len):
        vocab.add(t, kind, length)
    lut = np.array([vocab.ids[t] for t in own.vocab.tokens], dtype=np.int64)
    mapped = lut[ids] if ids.size else np.zeros(0, dtype=np.int64)
    counts = words.get_column("count").to_numpy().astype(np.int64)
    layout = Layout.from_symbols(np.diff(offsets), mapped, counts)  # int64 ids: the encoder's
    trace: list[tuple[np.ndarray, np.ndarray]] = []
    _base_model(base, cfg).apply_merges(layout, trace)
    k = base.merges.height
    joined = np.zeros(k, dtype=np.int64)
    in_words = np.zeros(k, dtype=np.int64)
    if trace:
        w = np.concatenate([t[0] for t in trace])
        r = np.concatenate([t[1] for t in trace])
        joined = np.bincount(r, weights=counts[w], minlength=k).astype(np.int64)
        pairs = np.unique(r * own.n_words + w)
        in_words = np.bincount(pairs // max(own.n_words, 1), minlength=k).astype(np.int64)
    offsets, ids = layout.segmentation(own.n_words)
    layout = Layout.from_symbols(np.diff(offsets), ids.astype(np.int32), counts,
                                 sym_dtype=np.int32, lean=True)
    return Initial(vocab, layout, own.n_words), joined, in_words


def check_rebuilt_size(cfg: TrainConfig, base: Base, n: int) -> None:
    """A rebuilt initial vocabulary of `n` tokens (the base's and the new corpus's characters
    it has no token for) must fit in --vocab-size."""
    if n > cfg.vocab_size:
        raise TokcolumnarValueError(
            f"--vocab-size {cfg.vocab_size} is below the base's {len(base.tokens):,} tokens and "
            f"the {n - len(base.tokens):,} characters of the new corpus it has no token for")


def train_extended(words: pl.DataFrame, cfg: TrainConfig, timer: StageTimer,
                   checkpoint: MergeCheckpoint | None = None) -> TrainTables:
    """The Polars engine's `train` for an extension (see the module docstring)."""
    assert cfg.extend is not None
    base = load_base(cfg.extend, cfg.pattern, cfg.special_tokens)
    k = base.merges.height
    restored = checkpoint.restore() if checkpoint is not None else None
    trainer: Trainer | None = None
    initial: Initial | None = None
    mode = "replay"
    joined = in_words = None
    if restored is not None:
        initial, trainer = restored
        mode = getattr(trainer, "extend_mode", "replay")
        joined, in_words = getattr(trainer, "extend_base_counts", (None, None))
    with timer.stage("initial"):
        if initial is None:
            initial = initial_symbols(words, cfg, check=False)
            if not _same_initial(initial, base):
                mode = "rebuild"
    if mode == "replay":
        with timer.stage("merge"):
            if checkpoint is not None:
                checkpoint.watch(initial)
            resumed = trainer is not None
            if trainer is None:
                trainer = make_trainer(initial, cfg)
                trainer.extend_mode = "replay"  # type: ignore[union-attr]
            try:
                if len(_record(trainer).left) < k:
                    _replay(trainer, base, checkpoint, resumed, cfg.max_merges)
                    resumed = True
                trainer.settings.max_merges = cfg.max_merges
            except Diverged:
                mode, trainer = "rebuild", None
    if mode == "rebuild":
        with timer.stage("initial"):
            if trainer is None:
                initial, joined, in_words = rebuild(words, cfg, base)
                added = len(initial.vocab) - len(base.tokens)
                if len(initial.vocab) > cfg.vocab_size:
                    raise TokcolumnarValueError(
                        f"--vocab-size {cfg.vocab_size} is below the base's "
                        f"{len(base.tokens):,} tokens and the {added:,} characters of the new "
                        "corpus it has no token for")
        if trainer is None:
            m = cfg.max_merges
            trainer = make_trainer(initial, dataclasses.replace(
                cfg, max_merges=None if m is None else max(m - k, 0)))
            trainer.extend_mode = "rebuild"  # type: ignore[union-attr]
            trainer.extend_base_counts = (joined, in_words)  # type: ignore[union-attr]
            resumed = False
        else:
            resumed = True
    with timer.stage("merge"):
        merges = merge_loop(initial, cfg, checkpoint, trainer, resumed=resumed)
    if mode == "rebuild":
        merges = _with_base_merges(base, merges, joined, in_words)
    else:
        merges = merges.with_columns(pl.when(pl.col("rank") < k).then(pl.lit(BASE_ORIGIN))
                                     .otherwise(pl.lit(NEW_ORIGIN)).alias("origin"))
    with timer.stage("tables"):
        return result_tables(words, initial, merges, cfg,
                             checkpoint.work.path if checkpoint is not None else None)


def _with_base_merges(base: Base, new: pl.DataFrame, joined: np.ndarray | None,
                      in_words: np.ndarray | None) -> pl.DataFrame:
    """The base's merges (their counts in the new corpus) then the new ones, ranks running
    on."""
    k = base.merges.height
    old = base.merges
    if joined is not None:
        old = old.with_columns(pl.Series("count", joined, dtype=pl.UInt64),
                               pl.Series("words", in_words, dtype=pl.UInt64))
    old = old.with_columns(pl.lit(BASE_ORIGIN).alias("origin"))
    new = new.with_columns((pl.col("rank") + k).cast(pl.UInt32),
                           pl.lit(NEW_ORIGIN).alias("origin"))
    cols = [c for c in new.columns if c in old.columns]
    return pl.concat([old.select(cols).cast(new.select(cols).schema), new.select(cols)])


def is_tiktoken_base(path: str | Path) -> bool:
    return Path(path).suffix == TIKTOKEN_SUFFIX and Path(path).is_file()


def tiktoken_special_ids(path: Path, names: list[str], ranks: dict[bytes, int],
                         tokens: dict[str, int]) -> dict[str, int]:
    """The ids of a tiktoken base's special tokens (names, in order): the ids no rank has,
    first those below the highest rank (a tokcolumnar output numbers its special tokens
    before the 256 bytes, so its `tokenizer.tiktoken` starts at the rank after them: given
    back, they get their ids again), then the ids after it, as tiktoken's encodings number
    theirs. Every id 0..n-1 must then be a token's: the extension's vocabulary has no holes."""
    for name in names:
        head, eq, value = name.rpartition("=")
        if eq and head and value.isdigit():
            raise TokcolumnarError(
                f"--special-tokens {name!r}: with a .tiktoken base special tokens are names, "
                "not NAME=ID: they take the ids no rank has, in order (below the highest rank "
                "first, then after it)")
        if name in tokens:
            raise TokcolumnarError(f"--extend {path}: the special token {name!r} is the token "
                                   f"of rank {tokens[name]} (its bytes in byte-level "
                                   "characters)")
    taken = set(ranks.values())
    top = max(taken)
    free = [i for i in range(top) if i not in taken]
    ids = dict(zip(names, free + list(range(top + 1, top + 1 + len(names)))))
    holes = free[len(names):]
    if holes:
        shown = f"{holes[0]}" if len(holes) == 1 else f"{holes[0]}..{holes[-1]}"
        raise TokcolumnarError(
            f"--extend {path}: no token has id{'s' if len(holes) > 1 else ''} {shown} "
            f"({len(holes):,} below the highest rank {top:,}); give the special tokens that "
            "had them with --special-tokens (in id order: a tokcolumnar output's are its "
            "run's --special-tokens)")
    return ids


def load_tiktoken_base(path: Path, pattern: str | None,
                       special_tokens: list[str] | None) -> Base:
    """A tiktoken vocabulary (`base64(token bytes) rank` lines, as our byte-level runs write
    `tokenizer.tiktoken`) as a base: a byte-level BPE whose ids are the ranks, split by
    `pattern` (`--pattern`, which the file does not record), with the given special tokens
    (`tiktoken_special_ids`). Its merges are the ones a training made, one per token in rank
    order (`tiktoken_format.trained_merges_of_ranks`). Its settings are those of a fresh
    byte-level run with that pattern and the 256 bytes as alphabet (no normalizer, no preset:
    the file records neither); the loop's options are the defaults unless given."""
    if pattern is None:
        raise TokcolumnarError(f"--extend {path}: a .tiktoken base needs --pattern (its split "
                               "pattern: gpt2, cl100k, o200k, qwen2, ... or a regex)")
    if not isinstance(pattern, str):
        raise TokcolumnarValueError(f"--pattern must be a string, got {pattern!r}")
    name, regex = pattern_name_or_regex(pattern)
    names = _string_list("special_tokens", special_tokens or [])
    try:
        ranks = read_tiktoken(str(path))
        recovered = trained_merges_of_ranks(ranks)
    except TokcolumnarValueError as e:
        raise TokcolumnarError(f"--extend {e}" if str(e).startswith(str(path))
                               else f"--extend {path}: {e}") from None
    if len(set(ranks.values())) != len(ranks):
        raise TokcolumnarError(f"--extend {path}: two tokens have the same rank")
    if min(ranks.values()) < 0:
        raise TokcolumnarError(f"--extend {path}: a rank is negative")
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise TokcolumnarError(f"--extend {path}: {len(missing)} of the 256 bytes have no rank "
                               f"(e.g. {bytes([missing[0]])!r}); a byte-level base needs them "
                               "all")
    text = {byte_map_bytes(b): r for b, r in ranks.items()}
    special = tiktoken_special_ids(path, names, ranks, text)
    n = len(ranks) + len(special)
    tokens, kinds = [""] * n, ["merge"] * n
    for b, r in ranks.items():
        tokens[r] = byte_map_bytes(b)
        if len(b) == 1:
            kinds[r] = "alphabet"
    for t, i in special.items():
        tokens[i], kinds[i] = t, "special"
    rows = [(rank, byte_map_bytes(a), byte_map_bytes(b), byte_map_bytes(t), ranks[a], ranks[b],
             ranks[t]) for rank, (a, b, t) in enumerate(recovered)]
    merges = base_merges_table(rows)
    settings: dict[str, Any] = {
        "model": "bpe", "pre_tokenizer": "byte-level", "pattern": name or regex,
        "normalizer": "none", "lowercase": False, "initial_alphabet": list(BYTE_ALPHABET),
        "special_tokens": sorted(special, key=special.__getitem__),
        "end_of_word_suffix": None, "end_of_word_token": None,
        "continuing_subword_prefix": None, "unk_token": None, "preset": None}
    base = Base(str(path), settings, tokens, kinds, merges)
    check_base(base)
    return base


def tiktoken_extended_tokenizer(cfg: TrainConfig, ids: dict[str, int],
                                merges: list[tuple[str, str]]) -> Tokenizer:
    """The extension of a tiktoken base: the tokenizer a fresh byte-level run with the base's
    settings makes (`export.build_tokenizer`): the pattern's pre-tokenizer, the ByteLevel
    decoder, no normalizer and no post-processor, the special tokens by id."""
    normalizer, pretokenizer = cfg.text_components()
    decoder = ByteLevelDecoder(add_prefix_space=True, trim_offsets=True, use_regex=True)
    added = [AddedToken(t, ids[t]) for t in sorted(cfg.special_tokens, key=ids.__getitem__)]
    return Tokenizer(BPEModel(ids, merges), normalizer, pretokenizer, decoder, None, added)
