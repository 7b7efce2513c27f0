"""The embedded broker shows a message only once it is whole (core/jobs/filesystem_broker.py).

Kombu's own filesystem transport created the message file and then wrote into it; a worker that
polled in between read an empty file, its consumer died on the JSON error and the job waited for
ever (a fresh-clone `make test`, issue 21). These tests read the queue at the moment the write is
under way, which is where that worker read it.
"""

import json
import os
import threading
import time
from queue import Empty  # what a kombu channel's _get raises on an empty queue

import pytest
from kombu.exceptions import ChannelError

from core.jobs import filesystem_broker
from core.jobs.broker import make_celery
from tests.conftest import make_settings

MESSAGES = 200


@pytest.fixture
def cfg(tmp_path):  # the broker alone: no database
    return make_settings(tmp_path, f"sqlite:///{tmp_path / 'unused.db'}")


@pytest.fixture
def channel(cfg):
    conn = make_celery(cfg).connection_for_write()
    yield conn.default_channel
    conn.release()


def test_the_embedded_broker_is_the_one_that_writes_whole_messages(channel):
    assert isinstance(channel.connection, filesystem_broker.Transport)
    assert isinstance(channel, filesystem_broker.Channel)


def test_a_message_being_written_is_not_there_to_read(channel, monkeypatch):
    seen_mid_write = []
    real_replace = os.replace

    def replace_after_a_read(src, dst):
        try:  # what a worker polling now would get: nothing, not an empty or a partial file
            seen_mid_write.append(channel._get("gpu.any"))
        except Empty:
            seen_mid_write.append("Empty")
        assert os.path.getsize(src) > 0 and not os.path.exists(dst)
        real_replace(src, dst)

    monkeypatch.setattr(filesystem_broker.os, "replace", replace_after_a_read)
    body = {"args": [7], "padding": "x" * 100_000}
    channel._put("gpu.any", body)
    assert seen_mid_write == ["Empty"]
    assert channel._get("gpu.any") == body  # whole once it shows
    assert not [f for f in os.listdir(channel.data_folder_in) if f.endswith(filesystem_broker.PARTIAL_SUFFIX)]


def test_a_reader_polling_all_along_gets_every_message_whole(channel, cfg):
    """A second channel reads as fast as it can while this one writes large messages. (Their
    order is kombu's: by the millisecond they were written in, not within one.)"""
    reader_conn = make_celery(cfg).connection_for_write()
    reader = reader_conn.default_channel
    got, errors = [], []

    def read():
        deadline = time.monotonic() + 60
        while len(got) + len(errors) < MESSAGES and time.monotonic() < deadline:
            try:
                got.append(reader._get("gpu.any"))
            except json.JSONDecodeError as exc:  # what kombu's own transport gave
                errors.append(exc)
            except Empty:
                pass

    t = threading.Thread(target=read)
    t.start()
    for i in range(MESSAGES):
        channel._put("gpu.any", {"i": i, "padding": "y" * 20_000})
    t.join(60)
    reader_conn.release()
    assert not errors and sorted(m["i"] for m in got) == list(range(MESSAGES))


def test_a_folder_that_cannot_be_written_is_a_channel_error(channel, monkeypatch):
    monkeypatch.setattr(channel, "data_folder_out", "/nonexistent/gemmwatch-broker")
    with pytest.raises(ChannelError, match="Cannot add file"):
        channel._put("gpu.any", {"args": [1]})
