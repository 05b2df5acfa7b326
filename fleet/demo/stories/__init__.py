"""The demo's stories, in the order `fleet demo` tells them.

To add a story (docs/demo.md has the long version):

1. write `fleet/demo/stories/<name>.py` with `run(demo)` (steps: `demo.step(...)`, then
   `demo.expect(probe, what)` / `demo.verify(fact, what)` for what the step shows) and
   `reset(demo)` (delete what the story creates, wait until it is gone; safe when nothing is
   there), and a module-level `STORY = Story(name=..., title=..., run=run, reset=reset)`;
2. add it to `STORIES` below, where it belongs in the telling;
3. it starts from the layout in `fleet.demo.layout` (a story that needs more capacity adds
   nodes and removes them in `reset`); `fleet demo --check --story <name>` runs it alone.
"""

from __future__ import annotations

from fleet.demo.runner import Story
from fleet.demo.stories import failover, fragmentation, held_gang, queue, reclaim, reservation

STORIES: tuple[Story, ...] = (
    held_gang.STORY,
    fragmentation.STORY,
    failover.STORY,
    reservation.STORY,
    queue.STORY,
    reclaim.STORY,
)

__all__ = ["STORIES"]
