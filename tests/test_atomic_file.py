"""core/atomic_file.py: a file lands whole or not at all."""

from pathlib import Path

import pytest

from core import atomic_file
from core.atomic_file import write_whole


def test_a_file_written_whole_replaces_the_old_one_and_leaves_nothing_beside_it(tmp_path: Path):
    target = tmp_path / "entry.cubin"
    target.write_bytes(b"old")
    write_whole(target, b"new contents")
    assert target.read_bytes() == b"new contents"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.cubin"]


def test_a_write_that_fails_part_way_keeps_the_old_file_and_removes_its_temporary(tmp_path: Path, monkeypatch):
    target = tmp_path / "entry.cubin"
    target.write_bytes(b"old")
    real_fdopen = atomic_file.os.fdopen

    class HalfWritten:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[:3])
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic_file.os, "fdopen", lambda fd, mode: HalfWritten(real_fdopen(fd, mode)))
    with pytest.raises(OSError, match="No space"):
        write_whole(target, b"new contents", temporary_prefix=".arriving-")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.cubin"]


def test_the_temporary_is_named_by_the_given_prefix_so_a_reader_that_takes_only_final_names_skips_it(
        tmp_path: Path, monkeypatch):
    seen = []
    real_replace = atomic_file.os.replace

    def watching_replace(src, dst):
        seen.append(Path(src).name)
        real_replace(src, dst)

    monkeypatch.setattr(atomic_file.os, "replace", watching_replace)
    write_whole(tmp_path / "0123456789abcdef.cubin", b"x", temporary_prefix=".arriving-")
    assert seen and seen[0].startswith(".arriving-") and seen[0].endswith(".tmp")
