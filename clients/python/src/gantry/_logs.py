"""Following a log by polling its tail (cli/logs.ts): the new lines are those after the overlap
with what the previous tail ended with."""

from __future__ import annotations

from typing import List, NamedTuple, Optional, Sequence


class TailState(NamedTuple):
    pod: Optional[str]
    lines: Sequence[str]


class TailStep(NamedTuple):
    fresh: List[str]
    # No overlap with a non-empty previous tail: lines between the two may be missing.
    gap: bool
    state: TailState


def overlap_of(previous: Sequence[str], nxt: Sequence[str]) -> int:
    """The longest k such that the last k lines of ``previous`` are the first k of ``nxt``."""
    for k in range(min(len(previous), len(nxt)), 0, -1):
        if list(previous[len(previous) - k :]) == list(nxt[:k]):
            return k
    return 0


def next_lines(state: Optional[TailState], pod: Optional[str], lines: Sequence[str]) -> TailStep:
    new = TailState(pod, list(lines))
    # Another pod (a restart, a new attempt) is a new log.
    if state is None or state.pod != pod or not state.lines:
        return TailStep(list(lines), False, new)
    k = overlap_of(state.lines, lines)
    return TailStep(list(lines[k:]), k == 0 and len(lines) > 0, new)
