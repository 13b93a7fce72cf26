"""Monolingual text streamed from a Hugging Face dataset (``streaming=True``), for corpora
larger than the disk: tokenized on the fly and packed into the blocks ``PackedBlocks`` makes,
read in order. The reading position (epoch, row, token offset) is part of the data position
saved in checkpoints, so a resumed run skips to it and reads on exactly where it stopped.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from crossalign.data.inputs import load_dataset_args
from crossalign.errors import CrossalignError

STREAM_KEYS = {"dataset", "split", "column", "streaming", "size"}


def is_streaming(spec: Any) -> bool:
    """Whether a monolingual config value asks for a streamed dataset."""
    return isinstance(spec, dict) and bool(spec.get("streaming"))


class StreamingText:
    """One language's streamed dataset column, packed into blocks of ``length``.

    ``size`` is the number of rows the dataset has (or about), used only for the language
    sampling probability p_i ∝ n_i^alpha: it is converted to blocks with the mean row length
    of the first 1,000 rows.
    """

    def __init__(self, spec: dict[str, Any], where: str, tokenizer: Any, length: int) -> None:
        unknown = set(spec) - STREAM_KEYS
        if "dataset" not in spec or unknown:
            raise CrossalignError(
                f"{where}: a streamed dataset needs keys dataset, streaming: true, size[, split, "
                f"column]; unknown: {', '.join(sorted(unknown)) or 'none'}"
            )
        if not isinstance(spec.get("size"), int) or isinstance(spec["size"], bool):
            raise CrossalignError(
                f"{where}: give size: N, the dataset's number of rows (about), for the language "
                f"sampling probability"
            )
        self.dataset, self.where = str(spec["dataset"]), where
        self.split, self.column = spec.get("split", "train"), spec.get("column", "text")
        self.tokenizer, self.length = tokenizer, length
        self.cls_id, self.sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
        head = [len(ids) + 1 for ids in self._tokenized(self._rows(0), limit=1000)]
        if not head:
            raise CrossalignError(f"{where}: dataset {self.dataset} has no text")
        self.blocks = max(1, int(spec["size"] * float(np.mean(head)) / (length - 2)))

    def __len__(self) -> int:
        return self.blocks

    def _rows(self, skip: int):
        """The dataset's rows from row ``skip`` on, as (row number, text)."""
        import datasets

        try:
            args, kwargs = load_dataset_args(self.dataset, self.split)
            ds = datasets.load_dataset(*args, split=self.split, streaming=True, **kwargs)
            ds = ds.select_columns([self.column])
        except (FileNotFoundError, ValueError, ConnectionError, KeyError) as e:
            raise CrossalignError(f"{self.where}: {str(e).splitlines()[0]}") from None
        for row, item in enumerate(ds.skip(skip), skip):
            yield row, item[self.column]

    def _tokenized(self, rows, limit: int | None = None):
        for i, (_, text) in enumerate(rows):
            if limit is not None and i >= limit:
                return
            if isinstance(text, str) and text.strip():
                yield self.tokenizer(text.strip(), add_special_tokens=False)["input_ids"]

    def reader(self, state: list[int] | None = None) -> StreamReader:
        """A reader at ``state`` = [epoch, row, offset] (default: the beginning)."""
        return StreamReader(self, *(state or (0, 0, 0)))


class StreamReader:
    """Reads consecutive blocks of a ``StreamingText``; ``state`` is where the next block
    starts: [epoch, row, token offset in that row's ids + separator]. At the end of the
    dataset the stream starts again (the next epoch) without a break."""

    def __init__(self, text: StreamingText, epoch: int, row: int, offset: int) -> None:
        self.text = text
        self.epoch, self.offset = epoch, offset
        self.rows: deque[tuple[int, int, np.ndarray]] = deque()  # (epoch, row, ids + sep)
        self._next_row = row
        self._iter = None

    @property
    def state(self) -> list[int]:
        """[epoch, row, offset] of the next block's first token."""
        self._fill(1)
        epoch, row, _ = self.rows[0]
        return [epoch, row, self.offset]

    def _fill(self, tokens: int) -> None:
        """Read rows until the buffer holds ``tokens`` tokens after ``offset``."""
        have = sum(len(r[2]) for r in self.rows) - self.offset
        empty_epochs = 0
        while have < tokens:
            if self._iter is None:
                self._iter = self.text._rows(self._next_row)
            try:
                row, text = next(self._iter)
            except StopIteration:
                self._iter, self._next_row = None, 0
                self.epoch += 1
                empty_epochs += 1
                if empty_epochs > 1:
                    raise CrossalignError(
                        f"{self.text.where}: the streamed dataset has no text"
                    ) from None
                continue
            empty_epochs = 0
            if isinstance(text, str) and text.strip():
                ids = self.text.tokenizer(text.strip(), add_special_tokens=False)["input_ids"]
                self.rows.append((self.epoch, row, np.array([*ids, self.text.sep_id], np.int32)))
                have += len(ids) + 1

    def take(self, count: int) -> np.ndarray:
        """The next ``count`` blocks: int32 [count, length], each ``[cls] body [sep]``."""
        body = self.text.length - 2
        self._fill(count * body)
        out = np.empty((count, self.text.length), dtype=np.int32)
        out[:, 0], out[:, -1] = self.text.cls_id, self.text.sep_id
        flat = np.concatenate([r[2] for r in self.rows])[self.offset : self.offset + count * body]
        out[:, 1:-1] = flat.reshape(count, body)
        self.offset += count * body
        while self.rows and self.offset >= len(self.rows[0][2]):
            self.offset -= len(self.rows[0][2])
            self.rows.popleft()
        return out
