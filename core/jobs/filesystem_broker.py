"""Kombu's filesystem transport (the embedded broker), with each message whole before it shows.

Kombu's own `_put` creates the message file under its final name and then writes into it, and a
consumer takes any file of its queue that it finds in the folder. A worker polling at that moment
read an empty file: its consumer died on the JSON error, the message with it, and the job stayed
queued with no live worker (seen once in ten fresh-clone `make test` runs, docs/BENCHMARKS.md,
issue 21). Here the message is written under a name no queue matches and renamed into place: a
rename within one folder is atomic, so a consumer sees the whole message or nothing.
"""

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

# Kombu's consumer takes "<anything>.<queue>.msg"; "<...>.msg.part" is no queue's.
PARTIAL_SUFFIX = ".part"


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        # Kombu's name, so messages keep their order (sorted by the leading milliseconds).
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL_SUFFIX
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
