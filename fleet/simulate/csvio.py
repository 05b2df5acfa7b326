"""Reading CSV files with line numbers, so every rejected value names its file and line.

A `.gz` file is read as the gzip-compressed CSV it is: the public traces ship compressed inside
the package, and a user's own copies may be either.
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from fleet.core.errors import FieldError
from fleet.core.quantity import canonical_amount
from fleet.simulate.errors import DataError


def rows(
    path: Path, required: Sequence[str], optional: Sequence[str] = ()
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) pairs; the header must name every required column and nothing unknown."""
    try:
        with _open(path) as handle:
            yield from _rows(path, handle, required, optional)
    except (OSError, EOFError) as err:  # EOFError: a truncated .gz
        raise DataError(
            path, None, f"cannot read: {getattr(err, 'strerror', None) or err}"
        ) from err


def locate(folder: Path, name: str) -> Path:
    """`folder/name`, or its compressed copy `folder/name.gz` when only that exists.

    When neither exists the plain name is returned, so the reader's error names the file asked for.
    """
    plain = folder / name
    if plain.exists():
        return plain
    packed = folder / f"{name}.gz"
    return packed if packed.exists() else plain


def _open(path: Path) -> TextIO:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", newline="", encoding="utf-8")
    return path.open(newline="", encoding="utf-8")


def _rows(
    path: Path, handle: TextIO, required: Sequence[str], optional: Sequence[str]
) -> Iterator[tuple[int, dict[str, str]]]:
    reader = csv.reader(handle)
    header = next(reader, None)
    if header is None:
        raise DataError(path, 1, "empty file (expected a header line)")
    names = [h.strip() for h in header]
    missing = [c for c in required if c not in names]
    if missing:
        raise DataError(path, 1, f"missing column(s) {', '.join(missing)}")
    unknown = [c for c in names if c not in required and c not in optional]
    if unknown:
        known = ", ".join([*required, *optional])
        raise DataError(path, 1, f"unknown column(s) {', '.join(unknown)} (known: {known})")
    if len(set(names)) != len(names):
        raise DataError(path, 1, "a column is named twice")
    for row in reader:
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != len(names):
            raise DataError(path, line, f"expected {len(names)} fields, got {len(row)}")
        yield line, {n: v.strip() for n, v in zip(names, row, strict=True)}


def number(path: Path, line: int, column: str, text: str, *, allow_inf: bool = False) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DataError(path, line, f"{column}: expected a number, got {text!r}") from None
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise DataError(path, line, f"{column}: expected a finite number, got {text!r}")
    if value < 0:
        raise DataError(path, line, f"{column}: must not be negative, got {text!r}")
    return value


def count(path: Path, line: int, column: str, text: str, *, minimum: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise DataError(path, line, f"{column}: expected an integer, got {text!r}") from None
    if value < minimum:
        raise DataError(path, line, f"{column}: must be at least {minimum}, got {value}")
    return value


def quantity(path: Path, line: int, column: str, resource: str, text: str) -> int:
    try:
        value = canonical_amount(resource, text, field=column)
    except FieldError as err:
        raise DataError(path, line, str(err)) from None
    if value < 0:
        raise DataError(path, line, f"{column}: must not be negative, got {text!r}")
    return value
