"""Two builds into one toolchain cache take turns instead of writing the same files at once."""

from __future__ import annotations

import threading
from pathlib import Path

from fleet.sandbox.toolchain import _build_lock


def test_second_builder_waits_for_the_first(tmp_path: Path) -> None:
    said: list[str] = []
    order: list[str] = []
    first_holds = threading.Event()
    release_first = threading.Event()

    def first() -> None:
        with _build_lock(tmp_path, said.append):
            order.append("first in")
            first_holds.set()
            release_first.wait(10)
            order.append("first out")

    thread = threading.Thread(target=first)
    thread.start()
    assert first_holds.wait(10)

    def second() -> None:
        with _build_lock(tmp_path, said.append):
            order.append("second in")

    waiter = threading.Thread(target=second)
    waiter.start()
    # The second builder says it waits before it gets in; only then is the first released.
    for _ in range(1000):
        if said:
            break
        threading.Event().wait(0.01)
    assert said == [f"another process is building into {tmp_path}; waiting for it to finish"]
    release_first.set()
    thread.join(10)
    waiter.join(10)
    assert order == ["first in", "first out", "second in"]


def test_a_free_lock_is_taken_silently(tmp_path: Path) -> None:
    said: list[str] = []
    with _build_lock(tmp_path / "new", said.append):
        pass
    with _build_lock(tmp_path / "new", said.append):
        pass
    assert said == []
