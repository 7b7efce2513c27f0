"""A bound on how many requests of one API process do a kind of work at once, waited for on the
event loop (no thread is held while a request waits its turn).

One semaphore per event loop, since a waiter binds it to its loop: uvicorn runs one, a
TestClient one per call.
"""

import asyncio
from weakref import WeakKeyDictionary


class LoopSlots:
    def __init__(self, size: int):
        self.size = max(1, size)
        self._per_loop: WeakKeyDictionary = WeakKeyDictionary()

    def __call__(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if loop not in self._per_loop:
            self._per_loop[loop] = asyncio.Semaphore(self.size)
        return self._per_loop[loop]
