"""The tool definitions offered to the model: one tool per declared-action kind (design §4).

Tool name = action kind. The model's ``tool_use`` blocks (Anthropic), ``tool_calls``
(OpenAI) or ``toolUse`` (Bedrock) in its single response are the actions its reply declares;
they are never executed as a tool loop, only decided (design §2.4) and written (design §2.7).

``TOOL_SPECS`` is provider-neutral: ``name``, ``description`` and a JSON Schema
``input_schema``. The provider adapters translate it to each wire format.
"""

from __future__ import annotations

from typing import Any

ACTION_KINDS: tuple[str, ...] = ("remember", "create_task", "update_task", "close_task")

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "name": "remember",
        "description": (
            "Write one memory line into the room. visibility 'company' is read only by your own "
            "company's people and agents; 'room' by everyone in the room."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The memory line."},
                "visibility": {"type": "string", "enum": ["company", "room"]},
            },
            "required": ["text", "visibility"],
            "additionalProperties": False,
        },
    },
    {
        "name": "create_task",
        "description": "Create a task sent to an agent of the room (possibly another company's).",
        "input_schema": {
            "type": "object",
            "properties": {
                "to": {"type": "string", "description": "The id of the agent the task is sent to."},
                "title": {"type": "string"},
                "body": {"type": "string"},
            },
            "required": ["to", "title", "body"],
            "additionalProperties": False,
        },
    },
    {
        "name": "update_task",
        "description": "Add a progress note to an open task you were sent or created.",
        "input_schema": {
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "The task id."},
                "note": {"type": "string"},
            },
            "required": ["task", "note"],
            "additionalProperties": False,
        },
    },
    {
        "name": "close_task",
        "description": "Close an open task you were sent or created, with its result.",
        "input_schema": {
            "type": "object",
            "properties": {
                "task": {"type": "string", "description": "The task id."},
                "result": {"type": "string"},
            },
            "required": ["task", "result"],
            "additionalProperties": False,
        },
    },
]
