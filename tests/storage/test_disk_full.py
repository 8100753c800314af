"""A disk that fills up: a real server whose data dir is a tiny tmpfs.

Seeding until the space runs out must give clear JSON errors while /health keeps answering;
tool calls that cannot write get a readable tool error and leave their session sound; after the
filesystem is made larger and the server restarted, the existing sessions carry on.
Needs root (mount); skipped where tmpfs cannot be mounted.
"""

from __future__ import annotations

import errno
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.registry import load_environment
from tests.support import chaos
from tests.support.rollouts import load_tasks, response_object

TASK = next(
    t for t in load_tasks(load_environment("retail").tasks_path) if t["task_id"] == "retail-018"
)
CUSTOMER = TASK["ground_truth"][-1]["arguments"]["customer_id"]
# Template, snapshot and gold take ~0.8 MB each, a session ~0.8 MB: room for a handful.
SMALL, LARGE = "8m", "64m"
MAX_SEEDS = 40


@pytest.fixture(scope="module")
def small_fs(tmp_path_factory: pytest.TempPathFactory):
    mnt = tmp_path_factory.mktemp("disk") / "small"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SMALL}", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(mnt: Path) -> Path | None:
    """Take every byte left on the filesystem, so the next write of any size fails."""
    filler = mnt / "filler"
    try:
        out = filler.open("wb", buffering=0)
    except OSError as exc:  # so full that not even an empty file fits
        assert exc.errno == errno.ENOSPC
        return None
    with out:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    return filler


def _address(zip_code: str) -> dict[str, Any]:
    return {
        "customer_id": CUSTOMER,
        "line1": "1 Full Disk Rd",
        "line2": None,
        "city": "Austin",
        "state": "TX",
        "zip": zip_code,
        "country": "USA",
    }


def _error_message(answer: httpx.Response) -> str:
    """The readable message of a JSON protocol error (fails on a non-JSON or bare 500 body)."""
    body = answer.json()
    assert isinstance(body.get("error"), dict), answer.text
    message = body["error"].get("message") or ""
    assert message, answer.text
    return message


@pytest.fixture(scope="module")
def full_disk(small_fs: Path) -> dict[str, Any]:
    """Run the whole scenario once (its checks are asserts); return what was seen for the tests."""
    data_dir = small_fs / "data"
    seen: dict[str, Any] = {"seed": [], "verify": None, "new_session": None, "temps": []}
    # Off: the scenario needs a session no worker has opened (seeded by another worker, say);
    # with it on, the seeding worker opens every session it seeds in the background.
    no_open_on_seed = {"STATEGYM_OPEN_ON_SEED": "false"}
    server = chaos.start(data_dir, log=small_fs.parent / "server.log", extra_env=no_open_on_seed)
    seeded: list[httpx.Client] = []
    opened: list[bool] = []
    notes: list[str] = []
    try:
        health = httpx.Client(base_url=server.url, timeout=30)
        # 1. Seed until the filesystem refuses; every refusal is JSON and the server stays up.
        refusals = 0
        for _ in range(MAX_SEEDS):
            client = httpx.Client(base_url=server.url, timeout=30)
            answer = client.post("/seed_session", json=TASK)
            if answer.status_code == 200:
                seeded.append(client)
                # A first call opens the session (creating its -wal and -shm) while room is left;
                # the second session is left unopened, like one whose worker never saw it.
                if len(seeded) == 2:
                    opened.append(False)
                    continue
                read = client.post("/get_customer_details", json={"customer_id": CUSTOMER})
                opened.append(read.status_code == 200)
                continue
            client.close()
            refusals += 1
            assert answer.status_code >= 400, answer.text
            seen["seed"].append((answer.status_code, _error_message(answer)))
            notes.append(f"seed -> {answer.status_code}: {answer.text}")
            assert health.get("/health").status_code == 200
            if refusals == 3:
                break
        assert seeded and refusals == 3, (len(seeded), notes)

        # 2. The disk fills up during the rollouts: sessions already open (their -wal and -shm
        # exist) get a readable tool error on a write; one opened afresh gets a JSON error.
        assert opened[0] and not opened[1]
        temps = [p.name for p in data_dir.rglob("*.tmp")]
        notes.append(f"{len(seeded)} seeded ({sum(opened)} opened), temp files left: {temps}")
        filler = _fill(small_fs)
        failed = 0
        for n, (client, is_open) in enumerate(zip(seeded, opened, strict=True)):
            answer = client.post("/update_customer_default_address", json=_address(f"1{n:04d}"))
            notes.append(
                f"write, {'open' if is_open else 'new'} session, full disk -> "
                f"{answer.status_code}: {answer.text[:240]}"
            )
            if is_open:
                assert answer.status_code == 200, answer.text
                failed += "error" in answer.json()
                error = answer.json().get("error", {})
                assert "output" in answer.json() or error["code"] == "storage_full", error
            else:
                assert 400 <= answer.status_code < 600, answer.text
                seen["new_session"] = (answer.status_code, _error_message(answer))
            read = client.post("/get_customer_details", json={"customer_id": CUSTOMER})
            notes.append(f"read, full disk -> {read.status_code}: {read.text[:120]}")
            if is_open:
                assert read.status_code == 200 and "output" in read.json(), read.text
        assert failed >= 1  # at least one write really hit the full disk
        verdict = seeded[0].post("/verify", json={**TASK, "response": response_object([], "ok")})
        notes.append(f"verify, full disk -> {verdict.status_code}: {verdict.text[:300]}")
        seen["verify"] = (verdict.status_code, verdict.json())
        assert verdict.status_code == 200 or _error_message(verdict)
        assert health.get("/health").status_code == 200
        chaos.stop_group(server)

        # 3. More room: every file is sound (opening a WAL file needs a little room for its
        # -shm, hence after the remount), and after a restart the sessions carry on.
        if filler is not None:
            filler.unlink()
        subprocess.run(["mount", "-o", f"remount,size={LARGE}", str(small_fs)], check=True)
        for path in chaos.session_files(data_dir):
            assert chaos.integrity(path) == "ok", path
        assert chaos.integrity(data_dir / "control.sqlite") == "ok"
        server = chaos.start(
            data_dir, log=small_fs.parent / "server.log", extra_env=no_open_on_seed
        )
        for n, client in enumerate(seeded):
            client.base_url = httpx.URL(server.url)
            answer = client.post("/update_customer_default_address", json=_address(f"2{n:04d}"))
            assert answer.status_code == 200 and "output" in answer.json(), answer.text
            verdict = client.post("/verify", json={**TASK, "response": response_object([], "ok")})
            assert verdict.status_code == 200, verdict.text
            assert verdict.json()["reward"] == 0.0  # the address is not the task's one
        seen["temps"] = [str(p.relative_to(data_dir)) for p in data_dir.rglob("*.tmp")]
        notes.append(
            f"{len(seeded)} sessions seeded before the disk was full; temp files left "
            f"behind: {seen['temps']}"
        )
    finally:
        chaos.stop_group(server)
        for client in seeded:
            client.close()
        print("\n" + "\n".join(notes))
    return seen


@pytest.mark.slow  # a filled loop filesystem: ~6 s
def test_full_disk_gives_json_errors_and_keeps_sessions_sound(full_disk: dict[str, Any]):
    # The scenario's own asserts are the test: JSON errors, /health up, writes on open sessions
    # refused as tool errors with nothing changed, every file sound, sessions go on after.
    assert len(full_disk["seed"]) == 3 and full_disk["new_session"] is not None


@pytest.mark.slow
def test_full_disk_errors_say_so(full_disk: dict[str, Any]):
    """The refusal names the cause, is not a 500, and leaves no debris (docs/durability.md)."""
    gaps = []
    for status, message in [*full_disk["seed"], full_disk["new_session"]]:
        if status not in (503, 507) or "space" not in message.lower():
            gaps.append(f"{status} {message!r}")
    status, body = full_disk["verify"]
    if status != 200 and (status not in (503, 507) or "space" not in body["error"]["message"]):
        gaps.append(f"verify {status} {body}")
    if full_disk["temps"]:
        gaps.append(f"temp files left: {full_disk['temps']}")
    assert gaps == []
