"""The one clock both routes read: a port (:class:`Clock`) and its system implementation (:class:`SystemClock`).

``now`` is the aware UTC wall-clock instant (lease and journal times); ``now_ms`` the same wall clock in milliseconds
since the Unix epoch (authority records and receipts); ``monotonic_ms`` what budgets are measured with (a wall-clock
step cannot extend one); ``sleep_ms`` the bounded pause between two reads. Tests inject a clock they advance.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> dt.datetime:
        """The wall-clock instant, timezone-aware UTC."""
        ...

    def now_ms(self) -> int:
        """Wall-clock milliseconds since the Unix epoch: what records and receipts carry."""
        ...

    def monotonic_ms(self) -> int:
        """Monotonic milliseconds: what budgets are measured with (a wall-clock step cannot extend one)."""
        ...

    def sleep_ms(self, ms: int) -> None:
        """Wait ``ms`` milliseconds (the bounded pause between two reads of a value that is not yet visible)."""
        ...


class SystemClock:
    """The operating system's clocks."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def sleep_ms(self, ms: int) -> None:
        time.sleep(max(ms, 0) / 1000)
