"""Emulator: ``setUserWriteBlockMode``, user writes refused while it is set.

``{setUserWriteBlockMode: 1, global: true}`` (admin only; 6.0+) makes a node refuse every
user write with ``UserWritesBlocked`` (371, "User writes blocked") until ``global: false``
lifts it: CRUD operations fail one by one as ``writeErrors`` entries (the check runs as
each operation takes its collection), DDL and index commands fail whole. Namespaces on
the internal databases (``admin``, ``config``, ``local``) stay writable, as on mongod, so
a tool that blocks a cluster can still keep its own state there. Through mongos the
command reaches every shard (``mongos_routing``).

See also src/mongo/db/s/global_user_write_block_state.cpp (``checkUserWritesAllowed``) and
src/mongo/db/commands/set_user_write_block_mode_command.cpp.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from shardstream.emulator.faults import CommandError, require_admin
from shardstream.emulator.write_path import USER_DDL

Body = dict[str, Any]
Handler = Callable[[Body], Body]
USER_WRITES_BLOCKED: Final = 371
BLOCKED_MESSAGE: Final = "User writes blocked"
INTERNAL_DATABASES: Final = frozenset({"admin", "config", "local"})
CRUD_OPERATIONS: Final = {"insert": "documents", "update": "updates", "delete": "deletes"}
WHOLE_COMMANDS: Final = USER_DDL


def parse_block_mode(body: Body) -> bool:
    """``global`` of a ``setUserWriteBlockMode`` body (admin only, a bool, required)."""
    require_admin(body, "setUserWriteBlockMode")
    mode = body.get("global")
    if not isinstance(mode, bool):
        raise CommandError(
            40414, "IDLFailedToParse", "BSON field 'setUserWriteBlockMode.global' is missing"
        )
    return mode


def _database_written(name: str, body: Body) -> str:
    """The database a write command changes (``renameCollection`` names it in its value)."""
    if name == "renamecollection":
        source = body.get("renameCollection")
        return source.partition(".")[0] if isinstance(source, str) else ""
    db = body.get("$db")
    return db if isinstance(db, str) else ""


class UserWriteBlock:
    """A node's user write blocking state and the guard around its write commands."""

    def __init__(self) -> None:
        self.blocked = False

    def register(self, commands: dict[str, Handler]) -> None:
        """Guard the node's write handlers (registered before) and add the command."""
        for name, field in CRUD_OPERATIONS.items():
            if name in commands:
                commands[name] = self._guard_operations(commands[name], field)
        for name in WHOLE_COMMANDS:
            if name in commands:
                commands[name] = self._guard_command(name, commands[name])
        commands["setuserwriteblockmode"] = self.set_mode

    def set_mode(self, body: Body) -> Body:
        """Answer ``setUserWriteBlockMode``."""
        self.blocked = parse_block_mode(body)
        return {"ok": 1.0}

    def _refuses(self, name: str, body: Body) -> bool:
        return self.blocked and _database_written(name, body) not in INTERNAL_DATABASES

    def _guard_operations(self, handler: Handler, field: str) -> Handler:
        def guarded(body: Body) -> Body:
            if not self._refuses("", body):
                return handler(body)
            operations = body.get(field)
            count = len(operations) if isinstance(operations, list) and operations else 1
            # Ordered writes stop at the first refusal; unordered ones try (and fail) each.
            failed = 1 if body.get("ordered", True) is not False else count
            errors = [
                {"index": index, "code": USER_WRITES_BLOCKED, "errmsg": BLOCKED_MESSAGE}
                for index in range(failed)
            ]
            return {"n": 0, "writeErrors": errors, "ok": 1.0}

        return guarded

    def _guard_command(self, name: str, handler: Handler) -> Handler:
        def guarded(body: Body) -> Body:
            if self._refuses(name, body):
                raise CommandError(USER_WRITES_BLOCKED, "UserWritesBlocked", BLOCKED_MESSAGE)
            return handler(body)

        return guarded
