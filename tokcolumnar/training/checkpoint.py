"""The merge loop's checkpoint (`--resume`, `--checkpoint-every`; docs/architecture.md,
"Memory and spilling / checkpoints"): every `every` seconds, between two passes, the merge
loop's whole state — the `BpeTrainer` (queue, pair counts, entries, merges so far) or the
`LikelihoodTrainer` (pair table, heap, token counts, merges so far), with the `Initial` it
works on (vocab and layout) — is pickled into the work directory, atomically. A resumed run
loads it and continues the loop where the checkpoint left it: no merge is replayed. The DuckDB
engine's loops save their tables instead (`duckdb.checkpoint`), on the same clock."""

from __future__ import annotations

import time
from collections.abc import Callable

from .. import ondisk
from ..memory import LoopWatch
from ..workdir import WorkDir, kill_point
from .bpe import BpeTrainer
from .symbols import Initial
from .wordpiece import LikelihoodTrainer

#: A merge loop whose state a checkpoint holds.
Trainer = BpeTrainer | LikelihoodTrainer

CHECKPOINT = "merge.pkl"
#: After a checkpoint that took t seconds, the next waits at least this times t (and
#: `--checkpoint-every`, unless that is 0: every pass), so that checkpoints take at most ~1/9
#: of the loop's time: the state of a large loop takes seconds to write (5 GB of text, 50k:
#: 4.3 GB), once a minute by default.
SAVE_WAIT = 9.0


class MergeCheckpoint:
    """Writes (and, on a resumed work directory, restores) the merge loop's state."""

    def __init__(self, work: WorkDir, every: float,
                 ready: Callable[[], None] | None = None,
                 watch: LoopWatch | None = None) -> None:
        self.work = work
        #: the memory limit, watched before each pass of a Polars engine loop
        self.memory = watch
        self.every = every
        #: called once, before the first pass: what must be in the work directory before
        #: any checkpoint or kill point (the counted words, saved in a thread)
        self.ready = ready
        self.initial: Initial | None = None
        self.last = time.monotonic()
        #: when the checkpoint being written started, and how long the last one took
        self.started = self.last
        self.cost = 0.0
        self.passes = 0

    def restore(self) -> tuple[Initial, Trainer] | None:
        """The state a killed run checkpointed (None when there is none to resume)."""
        return self.work.read_pickle(CHECKPOINT) if self.work.resumed else None

    def watch(self, initial: Initial) -> None:
        """The `Initial` the loop works on (pickled with the trainer: they share the layout)."""
        self.initial = initial

    def due(self) -> bool:
        """Before each pass (of any engine's loop): count the pass, and say whether `every`
        seconds have passed since the last checkpoint, and `SAVE_WAIT` times what that one
        took (the caller then saves and calls `saved`, then `passed`)."""
        if self.ready is not None:
            ready, self.ready = self.ready, None
            ready()
        self.passes += 1
        now = time.monotonic()
        wait = max(self.every, self.cost * SAVE_WAIT) if self.every > 0 else 0.0
        if now - self.last < wait:
            return False
        self.started = now
        return True

    def saved(self) -> None:
        self.last = time.monotonic()
        self.cost = self.last - self.started

    def passed(self) -> None:
        """After the checkpoint of a pass, if any (the test-only kill point `merge:N`)."""
        kill_point("merge", self.passes)

    def __call__(self, trainer: Trainer) -> None:
        """Before each pass of a Polars engine loop: checkpoint when due; past the memory
        limit, checkpoint and stop (`--resume` with a larger limit continues from here)."""
        ondisk.drop_pages()  # a loop on disk: its mapped pages, if over (the watcher may lag)
        used = self.memory.over() if self.memory is not None else None
        if self.due() or used is not None:
            self.started = time.monotonic()
            self.work.write_pickle(CHECKPOINT, (self.initial, trainer))
            self.saved()
        if used is not None:
            assert self.memory is not None
            record = trainer.rec if isinstance(trainer, LikelihoodTrainer) else trainer.merges
            raise self.memory.refuse(used, len(record.left))
        self.passed()
