"""Email tools on a real in-memory SQLite: delivery, threading, recipient rules, folders, labels."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import select

from app.authoring.replay import dump
from envs.workplace import ENVIRONMENT
from envs.workplace.models import MailboxItem, Message
from envs.workplace.testing import fails, run
from envs.workplace.world import World, build_world


@pytest.fixture
def w() -> Iterator[World]:
    world = build_world()
    yield world
    world.db.close()


def _items(w: World, message_id: str) -> dict[int, MailboxItem]:
    msg = w.db.scalar(select(Message).where(Message.message_id == message_id))
    assert msg is not None
    rows = w.db.scalars(select(MailboxItem).where(MailboxItem.message_id == msg.id))
    return {i.employee_id: i for i in rows}


def test_send_delivers_to_sent_and_internal_inboxes(w: World) -> None:
    out = run(
        w.db,
        "send_email",
        to=[w.mate.email.upper(), w.contact.email],
        subject="Hello",
        body="Hi both",
        cc=[w.boss.email],
    )
    assert out["to"] == sorted([w.mate.email, w.contact.email])
    items = _items(w, out["message_id"])
    assert items[w.user.id].folder == "sent" and items[w.user.id].is_read
    assert items[w.mate.id].folder == "inbox" and not items[w.mate.id].is_read
    assert items[w.boss.id].folder == "inbox"
    assert len(items) == 3  # the external contact has no mailbox here


def test_external_mail_only_to_crm_contacts(w: World) -> None:
    err = fails(
        w.db, "send_email", "external_recipient", to=["someone@gmail.com"], subject="x", body="y"
    )
    assert "someone@gmail.com" in err.message
    fails(
        w.db,
        "forward_email",
        "external_recipient",
        message_id=w.mail["from_mate"],
        to=["someone@gmail.com"],
    )


def test_no_mail_to_former_or_unknown_colleagues(w: World) -> None:
    fails(w.db, "send_email", "inactive_employee", to=[w.gone.email], subject="x", body="y")
    fails(w.db, "send_email", "not_found", to=["nobody@northwindlabs.com"], subject="x", body="y")


def test_same_email_twice_is_refused(w: World) -> None:
    run(w.db, "send_email", to=[w.mate.email], subject="Ping", body="1")
    fails(w.db, "send_email", "duplicate", to=[w.mate.email], subject=" ping ", body="2")


def test_reply_threads_and_reply_all_copies_the_others(w: World) -> None:
    out = run(w.db, "reply_email", message_id=w.mail["from_mate"], body="Yes", reply_all=True)
    assert out["subject"] == "Re: Team offsite"
    assert out["to"] == [w.mate.email] and out["cc"] == [w.boss.email]
    msg = w.db.scalar(select(Message).where(Message.message_id == out["message_id"]))
    assert msg is not None and msg.in_reply_to == w.mail["from_mate"]
    plain = run(w.db, "reply_email", message_id=w.mail["from_contact"], body="Thanks")
    assert plain["to"] == [w.contact.email] and plain["cc"] == []


def test_message_ids_are_deterministic_across_databases(w: World) -> None:
    first = run(w.db, "send_email", to=[w.mate.email], subject="Notes", body="a")
    other = build_world()
    try:
        second = run(other.db, "send_email", to=[other.mate.email], subject="NOTES", body="b")
    finally:
        other.db.close()
    assert first["message_id"] == second["message_id"]


def test_only_own_mailbox_is_visible(w: World) -> None:
    found = run(w.db, "search_emails", query="salary")
    assert found["total"] == 0
    fails(w.db, "read_email", "not_found", message_id=w.mail["boss_only"])
    fails(w.db, "archive_email", "not_found", message_id=w.mail["boss_only"])


def test_archive_moves_inbox_mail_once(w: World) -> None:
    run(w.db, "archive_email", message_id=w.mail["from_contact"])
    item = _items(w, w.mail["from_contact"])[w.user.id]
    assert (item.folder, item.is_read) == ("archive", True)
    fails(w.db, "archive_email", "wrong_folder", message_id=w.mail["from_contact"])
    assert run(w.db, "search_emails", folder="archive")["total"] == 1


def test_labels_are_normalised_and_checked(w: World) -> None:
    out = run(w.db, "label_email", message_id=w.mail["from_contact"], add=["Renewals", "q2"])
    assert out["labels"] == ["q2", "renewals"]
    out = run(w.db, "label_email", message_id=w.mail["from_contact"], remove=["q2"])
    assert out["labels"] == ["renewals"]
    fails(w.db, "label_email", "not_found", message_id=w.mail["from_contact"], remove=["nope"])
    fails(w.db, "label_email", "invalid_arguments", message_id=w.mail["from_contact"], add=["a,b"])
    assert run(w.db, "search_emails", label="renewals")["total"] == 1


def test_reading_mail_writes_nothing(w: World) -> None:
    before = dump(w.db, ENVIRONMENT)
    run(w.db, "search_emails", query="offsite", unread_only=True)
    body = run(w.db, "read_email", message_id=w.mail["from_mate"])
    assert body["body"] == "Can you come?" and body["is_read"] is False
    assert dump(w.db, ENVIRONMENT) == before
