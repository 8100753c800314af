"""Kept closed sessions stored packed (app/storage/sqlite/packing.py): real retail rollouts over
HTTP, then every reader of a pack compared with the same session read from its plain file."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import httpx
import pytest

from app.registry import load_environment
from app.server.api import create_app
from app.settings import Settings
from app.storage.migrations import downgrade_file, file_revision, head_revision
from app.storage.sqlite import packing
from tests.authoring.test_sessions_cli import CANCEL, build_rollouts, calls_of, sg, sg_json
from tests.conftest import TEST_SECRET


def template_of(data_dir: Path) -> Path:
    (template,) = (data_dir / "templates" / "retail").glob("*.sqlite")
    return template


def unpack_all(data_dir: Path) -> None:
    """Every pack of the data dir back as the plain file it was made from."""
    for pack in (data_dir / "sessions" / "retail").glob("*.sqlite.pack"):
        pack.with_name(pack.name.removesuffix(".pack")).write_bytes(packing.pack_image(pack))
        pack.unlink()


@pytest.fixture(scope="module")
def packed(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("packed") / "data"
    return data_dir, build_rollouts(data_dir)


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("plain") / "data"
    settings = Settings(data_dir=data_dir, secret_key=TEST_SECRET, pack_closed_sessions=False)
    return data_dir, build_rollouts(data_dir, settings)


def test_closed_kept_sessions_are_packed_small_and_open_ones_not(packed):
    data_dir, ids = packed
    sessions = data_dir / "sessions" / "retail"
    template = template_of(data_dir)
    for name in ("gold", "noop"):
        pack = sessions / f"{ids[name]}.sqlite.pack"
        assert pack.is_file() and not (sessions / f"{ids[name]}.sqlite").exists()
        image = packing.pack_image(pack)
        assert image[:16] == b"SQLite format 3\x00" and len(image) >= template.stat().st_size
        assert pack.stat().st_size * 8 < len(image), "a pack is at most an eighth of its file"
    assert (sessions / f"{ids['open']}.sqlite").is_file()  # never verified nor closed
    assert not (sessions / f"{ids['open']}.sqlite.pack").exists()
    (base,) = (sessions / ".bases").glob("*.sqlite")
    assert base.read_bytes() == template.read_bytes()  # the template, stored once by content


def test_a_pack_gives_back_its_file_byte_for_byte(plain):
    data_dir, ids = plain
    sessions = data_dir / "sessions" / "retail"
    assert not list(sessions.glob("*.pack"))  # pack_closed_sessions=False keeps plain files
    base = template_of(data_dir).read_bytes()
    for name in ("gold", "noop"):
        image = (sessions / f"{ids[name]}.sqlite").read_bytes()
        pack = packing.encode(image, base, "0" * 64)
        assert packing.decode(pack, base) == image
        damaged = bytearray(pack)
        # A bit of the compressed pages (the middle of the pack may fall in its header's `base`,
        # which names the base for the reader and is not what decode checks).
        pages = pack.index(b"}") + 1  # the header is one flat JSON object
        damaged[pages + (len(pack) - pages) // 2] ^= 0x01
        with pytest.raises(ValueError):
            packing.decode(bytes(damaged), base)
        other = bytearray(base)
        other[len(base) // 2] ^= 0x01  # a base that is not the one it was made against
        with pytest.raises(ValueError, match="checksum"):
            packing.decode(pack, bytes(other))


def test_every_reader_sees_a_pack_as_its_plain_file(packed, tmp_path):
    data_dir, ids = packed
    copy = tmp_path / "unpacked"
    shutil.copytree(data_dir, copy)
    unpack_all(copy)
    assert not list((copy / "sessions" / "retail").glob("*.pack"))
    for args in (
        ("sessions", "show", ids["gold"]),
        ("sessions", "show", ids["noop"], "orders", "--limit", "50"),
        ("sessions", "diff", ids["gold"], "--against", "seed"),
        ("sessions", "diff", ids["noop"], "--against", "gold"),
        ("sessions", "verify", ids["gold"]),
        ("sessions", "steps", ids["gold"], "--rows"),
    ):
        from_pack = sg_json(*args, "--data-dir", str(data_dir))
        from_file = sg_json(*args, "--data-dir", str(copy))
        assert from_pack == from_file, args
    exported = {}
    for label, folder in (("pack", data_dir), ("file", copy)):
        out = tmp_path / f"{label}.sqlite"
        result = sg("sessions", "export", ids["gold"], str(out), "--data-dir", str(folder))
        assert result.exit_code == 0, result.output
        exported[label] = out.read_bytes()
    assert exported["pack"] == exported["file"]
    conn = sqlite3.connect(tmp_path / "pack.sqlite")
    assert conn.execute("SELECT status FROM orders WHERE id = 102002").fetchone() == ("cancelled",)
    conn.close()
    listed = {r["id"]: r for r in sg_json("sessions", "list", "--data-dir", str(data_dir))}
    assert listed[ids["gold"]]["file_present"] is True


def test_gc_removes_a_pack(packed, tmp_path):
    data_dir, ids = packed
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    result = sg("sessions", "gc", "--older-than", "0s", "--keep-failed", "--data-dir", str(copy))
    assert result.exit_code == 0, result.output
    sessions = copy / "sessions" / "retail"
    assert not (sessions / f"{ids['gold']}.sqlite.pack").exists()  # reward 1: removed
    assert (sessions / f"{ids['noop']}.sqlite.pack").exists()


async def test_a_packed_session_answers_closed_and_its_verify_stands(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", secret_key=TEST_SECRET)
    app = create_app(settings, load_environment("retail"))
    sessions = settings.data_dir / "sessions" / "retail"
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sg") as client:
            seeded = await client.post("/seed_session", json=CANCEL)
            session_id = seeded.json()["session_id"]
            for call in calls_of(CANCEL):
                assert (await client.post(f"/{call['name']}", json=call["arguments"])).is_success
            assert (await client.post("/close_session", json={})).is_success
            pack = sessions / f"{session_id}.sqlite.pack"
            plain = sessions / f"{session_id}.sqlite"
            for _ in range(200):  # packed by the closer thread, off the request path: the pack
                if pack.exists() and not plain.exists():  # is written, then the file removed
                    break
                await asyncio.sleep(0.025)
            assert pack.exists() and not plain.exists()
            call = calls_of(CANCEL)[0]
            refused = await client.post(f"/{call['name']}", json=call["arguments"])
            assert refused.status_code == 404, refused.text
            assert refused.json()["error"]["type"] == "session_closed"
    assert pack.exists()  # nothing reopened or rewrote it


def test_migrate_sessions_upgrades_a_pack_and_packs_it_again(packed, tmp_path):
    data_dir, ids = packed
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    pack = copy / "sessions" / "retail" / f"{ids['gold']}.sqlite.pack"
    with packing.unpacked(pack) as file:  # as an older run left it: two revisions back
        downgrade_file(file, "retail", "retail@-3")
    assert file_revision(pack) != head_revision("retail")
    before = pack.read_bytes()
    dry = sg_json("migrate", "sessions", "--env", "retail", "--dry-run", "--data-dir", str(copy))
    assert pack.read_bytes() == before
    assert json.dumps(dry).count("would_upgrade") >= 1
    result = sg("migrate", "sessions", "--env", "retail", "--data-dir", str(copy), "--json")
    assert result.exit_code == 0, result.output
    assert '"upgraded": 1' in result.output
    assert file_revision(pack) == head_revision("retail")
    assert not pack.with_name(pack.name.removesuffix(".pack")).exists()
    shown = sg_json("sessions", "show", ids["gold"], "products", "--data-dir", str(copy))
    assert "slug" in json.dumps(shown)  # the column the last two revisions added


def test_sessions_pack_packs_closed_plain_files_and_leaves_open_ones(plain, tmp_path):
    data_dir, ids = plain
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    d = ["--data-dir", str(copy)]
    before = {name: sg_json("sessions", "show", ids[name], "orders", *d) for name in ids}
    dry = sg_json("sessions", "pack", "--dry-run", *d)
    assert dry["packed"] == {"retail": 2} and dry["bytes_after"] * 8 < dry["bytes_before"]
    assert not list((copy / "sessions" / "retail").glob("*.pack"))  # a dry run packs nothing
    done = sg_json("sessions", "pack", "--env", "retail", *d)
    assert done["packed"] == {"retail": 2} and done["bytes_after"] == dry["bytes_after"]
    sessions = copy / "sessions" / "retail"
    for name in ("gold", "noop"):
        assert (sessions / f"{ids[name]}.sqlite.pack").is_file()
        assert not (sessions / f"{ids[name]}.sqlite").exists()
    assert (sessions / f"{ids['open']}.sqlite").is_file()  # not closed: never packed
    assert {name: sg_json("sessions", "show", ids[name], "orders", *d) for name in ids} == before
    again = sg_json("sessions", "pack", *d)
    assert again["packed"] == {"retail": 0}
    unknown = sg("sessions", "pack", "--env", "nosuch", *d)
    assert unknown.exit_code == 1 and "no sessions of environment 'nosuch'" in unknown.output


def test_what_a_crash_while_packing_leaves_is_read_and_finished(packed, tmp_path):
    data_dir, ids = packed
    copy = tmp_path / "copy"
    shutil.copytree(data_dir, copy)
    d = ["--data-dir", str(copy)]
    sessions = copy / "sessions" / "retail"
    expected = sg_json("sessions", "show", ids["gold"], "orders", *d)
    # Killed after the pack's rename and before the file's unlink: both whole, the file read.
    pack = sessions / f"{ids['gold']}.sqlite.pack"
    (sessions / f"{ids['gold']}.sqlite").write_bytes(packing.pack_image(pack))
    # Killed while writing a pack: a temp file, which no reader or glob takes for a session.
    (sessions / f".{ids['noop']}.sqlite.pack.1.2.tmp").write_bytes(b"half a pack")
    assert sg_json("sessions", "show", ids["gold"], "orders", *d) == expected
    assert len(sg_json("sessions", "list", *d)) == 3
    assert sg_json("sessions", "pack", *d)["packed"] == {"retail": 1}  # the file, packed again
    assert not (sessions / f"{ids['gold']}.sqlite").exists() and pack.is_file()
    assert sg_json("sessions", "show", ids["gold"], "orders", *d) == expected


def test_a_closer_behind_leaves_files_plain_and_says_so(tmp_path, monkeypatch, caplog):
    from app.storage.sqlite import backend

    monkeypatch.setattr(backend, "PACK_BACKLOG_MAX", 0)  # as if 64 closes were queued
    data_dir = tmp_path / "data"
    with caplog.at_level("WARNING", logger="stategym.sqlite"):
        ids = build_rollouts(data_dir)
    sessions = data_dir / "sessions" / "retail"
    for name in ("gold", "noop"):
        assert (sessions / f"{ids[name]}.sqlite").is_file()
        assert not (sessions / f"{ids[name]}.sqlite.pack").exists()
    assert "kept unpacked until it drains" in caplog.text
    assert sg_json("sessions", "pack", "--data-dir", str(data_dir))["packed"] == {"retail": 2}


def test_a_pack_whose_header_lies_is_refused_before_any_allocation(plain):
    data_dir, ids = plain
    base = template_of(data_dir).read_bytes()
    image = (data_dir / "sessions" / "retail" / f"{ids['gold']}.sqlite").read_bytes()
    pack = packing.encode(image, base, "0" * 64)
    header = packing.header_of(pack)
    for lie in ({"size": 2**40}, {"page_size": 3000}, {"changed": header["changed"] + 1}):
        head = json.dumps({**header, **lie}, sort_keys=True).encode()
        start = len(packing.MAGIC) + 4 + int.from_bytes(pack[8:12], "big")
        forged = packing.MAGIC + len(head).to_bytes(4, "big") + head + pack[start:]
        with pytest.raises(ValueError):
            packing.decode(forged, base)


@pytest.mark.parametrize("moment", ["before the pack is written", "after the pack is written"])
def test_a_session_dropped_while_it_is_packed_leaves_nothing(plain, tmp_path, monkeypatch, moment):
    """A close's pack runs in the background; a later close of the same session (reward known:
    dropped) may remove its files at any moment of it. Neither file may survive the two."""
    from app.storage.sqlite.backend import _remove_files

    data_dir, ids = plain
    sessions = tmp_path / "sessions"
    shutil.copytree(data_dir / "sessions" / "retail", sessions)
    path = sessions / f"{ids['gold']}.sqlite"
    write = packing._write_durably

    def write_then_drop(target: Path, data: bytes) -> None:
        if moment == "before the pack is written" and target.name.endswith(".pack"):
            _remove_files(path)
        write(target, data)
        if moment == "after the pack is written" and target.name.endswith(".pack"):
            _remove_files(path)  # finds the pack and removes it before the packer's unlink

    monkeypatch.setattr(packing, "_write_durably", write_then_drop)
    assert packing.pack_file(path, template_of(data_dir).read_bytes(), "0" * 64) is None
    assert not path.exists() and not packing.pack_path(path).exists()


@pytest.mark.parametrize("opener", ["a call", "a second close"])
def test_a_session_packed_while_it_is_opened_reads_as_closed(plain, tmp_path, monkeypatch, opener):
    """A call to (or a close of) a session just closed opens its file while the closer packs
    it: SQLite sees the file vanish before its first read ("disk I/O error"), which must read as
    closed (a 404 for the call, nothing to do for the close), never as a full disk."""
    from app.errors import SessionClosed
    from app.storage.factory import make_backend
    from app.storage.sqlite import store as store_module

    data_dir, ids = plain
    copy = tmp_path / "data"
    shutil.copytree(data_dir, copy)
    settings = Settings(data_dir=copy, secret_key=TEST_SECRET)
    backend = make_backend(settings, load_environment("retail"))
    path = backend.store.session_path(ids["gold"])
    configure = store_module.sqlite_db.configure
    base = template_of(copy).read_bytes()
    image = path.read_bytes()  # the packer has checked there is no WAL and read the file

    def pack_then_configure(conn: sqlite3.Connection, **kwargs) -> sqlite3.Connection:
        # SQLite has opened the file, not read it yet: the packer's last steps happen now.
        packing._write_durably(packing.pack_path(path), packing.encode(image, base, "0" * 64))
        path.unlink()
        return configure(conn, **kwargs)

    monkeypatch.setattr(store_module.sqlite_db, "configure", pack_then_configure)
    try:
        if opener == "a call":
            with pytest.raises(SessionClosed):
                backend.open(ids["gold"])
            monkeypatch.setattr(store_module.sqlite_db, "configure", configure)
            with pytest.raises(SessionClosed):  # and once packed, before any open
                backend.open(ids["gold"])
        else:
            backend.release(None, ids["gold"], delete=True)  # reward known: dropped
            assert not packing.pack_path(path).exists() and not path.exists()
    finally:
        backend.dispose()
