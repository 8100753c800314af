"""Every workplace tool, in the order the model is offered them (per area, reads first)."""

from __future__ import annotations

from app.sdk.environment import Tool
from envs.workplace.tools_calendar import (
    cancel_event,
    create_event,
    find_free_slot,
    list_events,
    reschedule_event,
    respond_to_event,
)
from envs.workplace.tools_crm import (
    get_deal,
    list_deals,
    log_activity,
    reassign_deal,
    search_customers,
    update_deal_amount,
    update_deal_stage,
)
from envs.workplace.tools_mail import (
    archive_email,
    forward_email,
    label_email,
    read_email,
    reply_email,
    search_emails,
    send_email,
)
from envs.workplace.tools_work import (
    create_task,
    get_current_user,
    list_tasks,
    reassign_task,
    search_employees,
    update_task_status,
)

TOOLS: tuple[Tool, ...] = (
    get_current_user,
    search_employees,
    search_emails,
    read_email,
    send_email,
    reply_email,
    forward_email,
    archive_email,
    label_email,
    list_events,
    find_free_slot,
    create_event,
    reschedule_event,
    cancel_event,
    respond_to_event,
    search_customers,
    list_deals,
    get_deal,
    update_deal_stage,
    update_deal_amount,
    reassign_deal,
    log_activity,
    list_tasks,
    create_task,
    update_task_status,
    reassign_task,
)
