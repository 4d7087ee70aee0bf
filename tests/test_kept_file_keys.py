"""The store's keys kept across runs (``fuseprof.parse.hashing``: ``file-keys.json``): a warm run reads no trace
byte where the file is unchanged, and any change of the file — its bytes with its times put back, a rewrite in the
clock's step, another file moved in its place — makes it hash the file again. Keys are checked against SHA-256
computed here with hashlib."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest

import fuseprof.parse.hashing as hashing
from tests.conftest import FIXTURES, FUZZ_RESULTS

TRACE = FIXTURES / "tp2"
RACY_NS = 200_000_000  # the tests' racy window: a copy's change time (which no call can set back) ages past it


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "store"
    root.mkdir()
    monkeypatch.setenv("FUSEPROF_CACHE", str(root))
    monkeypatch.setattr(hashing, "_KEPT", {})
    monkeypatch.setattr(hashing, "_KEPT_NEW", {})
    monkeypatch.setattr(hashing, "_KEYS", {})
    monkeypatch.setattr(hashing, "RACY_NS", RACY_NS)
    return root


@pytest.fixture
def hashed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files ``file_sha256`` read, by name."""
    read: list[str] = []
    real = hashing.file_sha256
    monkeypatch.setattr(hashing, "file_sha256", lambda path: read.append(Path(path).name) or real(path))
    return read


def _new_process(root: Path) -> None:
    """What the next run sees: this run's keys written, nothing of them in memory."""
    hashing._write_kept()
    hashing._KEPT.clear()
    hashing._KEPT_NEW.clear()
    hashing._KEYS.clear()


def _old_copy(tmp_path: Path, name: str = "t.json.gz", age_s: float = 60) -> Path:
    src = sorted(TRACE.glob("*.json.gz"))[0]
    path = tmp_path / name
    shutil.copyfile(src, path)
    past = time.time() - age_s
    os.utime(path, (past, past))
    time.sleep(1.5 * RACY_NS / 1e9)  # its change time, now, is then outside the racy window of a hashing after it
    return path


def test_an_unchanged_file_is_read_once_over_two_runs(store: Path, tmp_path: Path, hashed: list[str]) -> None:
    path = _old_copy(tmp_path)
    expected = hashlib.sha256(path.read_bytes()).hexdigest()[:32]
    assert hashing.content_key(path) == expected and hashed == ["t.json.gz"]
    _new_process(store)
    kept = json.loads((store / hashing.KEPT_FILE).read_text())
    assert kept[str(path.resolve())][-1] == expected
    assert hashing.content_key(path) == expected
    assert hashed == ["t.json.gz"]  # the second run read no byte of it


def test_new_bytes_with_the_old_times_are_hashed_again(store: Path, tmp_path: Path, hashed: list[str]) -> None:
    """Same size, same modification time put back by hand: the change time (and the key) still tell."""
    path = _old_copy(tmp_path)
    before = hashing.content_key(path)
    _new_process(store)
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte: the same size (the key hashes bytes; no reader opens it here)
    raw = bytes(data)
    time.sleep(0.01)  # the change time moves on
    path.write_bytes(raw)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns, path.stat().st_ino) == (st.st_size, st.st_mtime_ns,
                                                                                     st.st_ino)
    after = hashing.content_key(path)
    assert after == hashlib.sha256(raw).hexdigest()[:32] and after != before
    assert hashed == ["t.json.gz", "t.json.gz"]


def test_another_file_moved_in_its_place_is_hashed_again(store: Path, tmp_path: Path, hashed: list[str]) -> None:
    path = _old_copy(tmp_path)
    hashing.content_key(path)
    _new_process(store)
    other = sorted(TRACE.glob("*.json.gz"))[1]
    moved = tmp_path / "other.json.gz"
    shutil.copyfile(other, moved)
    os.utime(moved, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns))
    os.replace(moved, path)
    assert hashing.content_key(path) == hashlib.sha256(other.read_bytes()).hexdigest()[:32]
    assert len(hashed) == 2


def test_a_file_written_just_before_its_hashing_is_not_trusted(store: Path, tmp_path: Path,
                                                                hashed: list[str]) -> None:
    """Written within ``RACY_NS`` of the hashing (here its modification time is set a minute ahead, so however slow
    the machine every hashing is within it), a rewrite in the same clock step could keep its times: hashed on every run."""
    path = _old_copy(tmp_path, age_s=-60)
    for _ in range(3):
        hashing.content_key(path)
        _new_process(store)
    assert hashed == ["t.json.gz"] * 3


def test_a_file_replaced_while_it_is_hashed_keeps_no_key(store: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Replaced by another file with the old times put back (``cp -p``, ``rsync -t``) while its bytes are read: the key
    read belongs to neither identity for sure, so none is kept and the next run hashes the file now there."""
    path = _old_copy(tmp_path)
    other = sorted(TRACE.glob("*.json.gz"))[1]
    real = hashing.file_sha256

    def replaced_midway(p: Path) -> str:
        key = real(p)
        st = path.stat()
        staged = tmp_path / "staged.json.gz"
        shutil.copyfile(other, staged)
        os.utime(staged, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(staged, path)
        return key

    monkeypatch.setattr(hashing, "file_sha256", replaced_midway)
    hashing.content_key(path)
    _new_process(store)
    kept = store / hashing.KEPT_FILE
    assert not kept.exists() or str(path.resolve()) not in json.loads(kept.read_text())
    monkeypatch.setattr(hashing, "file_sha256", real)
    assert hashing.content_key(path) == hashlib.sha256(other.read_bytes()).hexdigest()[:32]


@pytest.mark.parametrize("content", [b"\x00garbage", b"[1, 2]", b'{"x": 5}', b"[" * 100_000,
                                     b'{"/a": [1, 2, 3, 4, 5, "t", "k"]}'])
def test_a_damaged_keys_file_is_ignored_and_written_anew(store: Path, tmp_path: Path, hashed: list[str],
                                                         content: bytes) -> None:
    path = _old_copy(tmp_path)
    (store / hashing.KEPT_FILE).write_bytes(content)
    expected = hashlib.sha256(path.read_bytes()).hexdigest()[:32]
    assert hashing.content_key(path) == expected and hashed == ["t.json.gz"]
    _new_process(store)
    assert json.loads((store / hashing.KEPT_FILE).read_text())[str(path.resolve())][-1] == expected
    FUZZ_RESULTS["held"] += 1


def test_a_keys_file_naming_the_wrong_key_for_an_older_file_is_not_used(store: Path, tmp_path: Path,
                                                                        hashed: list[str]) -> None:
    """An entry whose times do not match the file is stale, whatever key it names."""
    path = _old_copy(tmp_path)
    st = path.stat()
    wrong = [st.st_size, st.st_mtime_ns - 1, st.st_ctime_ns, st.st_ino, st.st_dev, time.time_ns(), "0" * 32]
    (store / hashing.KEPT_FILE).write_text(json.dumps({str(path.resolve()): wrong}))
    assert hashing.content_key(path) == hashlib.sha256(path.read_bytes()).hexdigest()[:32]
    assert hashed == ["t.json.gz"]


@pytest.mark.parametrize("writable", ["file", "folder"])
def test_keys_others_can_write_are_neither_used_nor_written(store: Path, tmp_path: Path, hashed: list[str],
                                                            writable: str) -> None:
    """A keys file, or a store folder, that others can write could name another content's key for a file whose
    times match (every other field of the entry is public): such keys are not read, and a folder others can write
    gets none written."""
    path = _old_copy(tmp_path)
    st = path.stat()
    planted = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev, time.time_ns(), "0" * 32]
    keys = store / hashing.KEPT_FILE
    keys.write_text(json.dumps({str(path.resolve()): planted}))
    (keys if writable == "file" else store).chmod(0o666 if writable == "file" else 0o777)
    expected = hashlib.sha256(path.read_bytes()).hexdigest()[:32]
    assert hashing.content_key(path) == expected and hashed == ["t.json.gz"]
    keys.chmod(0o644)
    before = keys.read_text()
    _new_process(store)
    if writable == "folder":
        assert keys.read_text() == before  # this run's key not written into a folder others can write
    else:
        assert json.loads(keys.read_text())[str(path.resolve())][-1] == expected  # written anew
    store.chmod(0o755)
    FUZZ_RESULTS["held"] += 1


def test_keys_written_under_a_group_writable_umask_are_used_the_next_run(store: Path, tmp_path: Path,
                                                                        hashed: list[str]) -> None:
    """Under umask 002 a file made with the default mode is group-writable, and the keys file would be refused by
    its own next run: it is written for its user alone."""
    path = _old_copy(tmp_path)
    hashing.content_key(path)
    old = os.umask(0o002)
    try:
        _new_process(store)
    finally:
        os.umask(old)
    assert (store / hashing.KEPT_FILE).stat().st_mode & 0o077 == 0
    assert hashing.content_key(path) == hashlib.sha256(path.read_bytes()).hexdigest()[:32]
    assert hashed == ["t.json.gz"]  # the second run read no byte of it


def test_no_keys_are_kept_with_the_store_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             hashed: list[str]) -> None:
    monkeypatch.setenv("FUSEPROF_CACHE", "off")
    monkeypatch.setattr(hashing, "_KEPT", {})
    monkeypatch.setattr(hashing, "_KEPT_NEW", {})
    path = _old_copy(tmp_path)
    hashing.content_key(path)
    hashing.content_key(path)
    assert hashed == ["t.json.gz"] * 2 and hashing._KEPT_NEW == {}


def test_store_clear_removes_the_kept_keys_with_the_entries(store: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from fuseprof.cli import main

    path = _old_copy(tmp_path)
    assert main(["analyze", str(path), "--format", "json"]) == 0
    _new_process(store)
    assert (store / hashing.KEPT_FILE).is_file()
    assert main(["store", "--clear"]) == 0
    assert not (store / hashing.KEPT_FILE).exists()
    assert not any(p.is_dir() for p in store.iterdir())
    capsys.readouterr()
