"""A bound on how many requests of one API process do a kind of work at once, waited for on the
event loop (no thread is held while a request waits its turn), and at most one at a time for each
writer: one token's (or one address's) heavy bodies wait behind each other, never take every slot,
so another writer's small job is not held behind them (issue 49, must-show 2: a victim's job post
waited 4.7 s behind two attackers' bodies that held both slots).

One semaphore per event loop, since a waiter binds it to its loop: uvicorn runs one, a
TestClient one per call.
"""

import asyncio
from contextlib import asynccontextmanager
from weakref import WeakKeyDictionary


class LoopSlots:
    def __init__(self, size: int):
        self.size = max(1, size)
        self._per_loop: WeakKeyDictionary = WeakKeyDictionary()
        self._writers: WeakKeyDictionary = WeakKeyDictionary()

    def __call__(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop not in self._per_loop:
            self._per_loop[loop] = asyncio.Semaphore(self.size)
        return self._per_loop[loop]

    @asynccontextmanager
    async def turn(self, writer: str):
        """A slot for `writer`, after its own earlier requests have had theirs."""
        loop = asyncio.get_running_loop()
        mine = self._writers.setdefault(loop, {})
        lock = mine.setdefault(writer, [asyncio.Lock(), 0])
        lock[1] += 1
        try:
            async with lock[0], self():
                yield
        finally:
            lock[1] -= 1
            if lock[1] == 0:
                mine.pop(writer, None)  # nobody of this writer waits: forget it
