"""The operator's queue configuration: watched queue files and the admin API.

Queue files the operator keeps (`--queues`, `--queues-dir`) are watched; a changed file that
validates (with the core's own `load_config`) is appended to the log as a `config` entry of
the service (rm ""), so a reload is decided, replayed and snapshotted like everything else.
A file that does not validate is logged with every error and changes nothing. The admin API
(`yk.v1.admin.<user>.<verb>`) does the same on request, for the users the scheduler ACL lets
in; the user is the subject token, which NATS permissions pin to the authenticated caller.
"""

from __future__ import annotations

import getpass
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from ykbus.bus.live import LiveCore
from ykbus.bus.subjects import Subjects
from ykbus.core.config import ConfigError

if TYPE_CHECKING:
    from ykbus.bus.settings import ServiceSettings

log = logging.getLogger("ykbus.core")


NOT_APPENDED = "not appended: this core does not lead now, or NATS did not answer; try again"

class OperatorConfig:
    def __init__(self, settings: ServiceSettings, subjects: Subjects, live: LiveCore,
                 append: Callable[[str, dict[str, Any]], Awaitable[bool]],
                 notify: Callable[[str], None] | None = None) -> None:
        """`live.core` is the live core (read only: its configuration checks and what is in
        force); `append(kind, body)` appends an entry of the service to the log; `notify`
        hears a refused configuration (the core's verdict on an appended one comes as its
        event, see OutputPublisher)."""
        self._notify = notify
        self._settings = settings
        self._subjects = subjects
        self._live = live
        self._append = append
        self.owner = getpass.getuser()
        self._texts: dict[str, str] = {}  # policy group -> file text last seen
        self._refused: set[str] = set()  # policy groups whose file, last seen, was rejected or unreadable

    def _files(self) -> dict[str, Path]:
        """Policy group -> the file that holds its queue configuration."""
        files: dict[str, Path] = {}
        if self._settings.queues_dir:
            for path in sorted(Path(self._settings.queues_dir).glob("*.yaml")):
                files[path.stem] = path
        if self._settings.queue_file:
            files["*"] = Path(self._settings.queue_file)
        return files

    async def watch(self) -> None:
        """Append each changed queue file that validates; log every error of one that does
        not. A file is compared with what is in force, so a restart appends nothing new."""
        while True:
            try:
                await self._check_files()
            except Exception as exc:  # noqa: BLE001 - the watcher must never stop the core
                log.error("queue file watcher error", extra={"fields": {"error": repr(exc)}})
            await anyio.sleep(self._settings.watch_interval_s)

    async def _check_files(self) -> None:
        """One look at every queue file: append what changed and validates."""
        for group, path in self._files().items():
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                if self._texts.get(group) != f"error:{exc}":
                    self._texts[group] = f"error:{exc}"
                    self._refused.add(group)
                    log.error("queue file unreadable", extra={"fields": {"file": str(path), "error": str(exc)}})
                continue
            if text == self._texts.get(group):
                continue
            self._texts[group] = text
            if text == self._live.core.operator_configs.get(group):
                if group in self._refused:  # the file says again what is in force: a verdict too
                    self._refused.discard(group)
                    self._say(f"queue file of policy group {group!r} back in force", group, str(path))
                continue
            errors = await self.set_queues(group, text, source=str(path))
            if errors == [NOT_APPENDED]:
                self._texts.pop(group, None)  # the next look tries again
            elif errors:
                self._refused.add(group)
            else:
                self._refused.discard(group)  # the core's verdict on it comes as its event

    def _say(self, text: str, group: str, source: str) -> None:
        """A verdict the core does not give (nothing was appended): to the operator if a
        listener hears verdicts, else to the log."""
        log.info(text, extra={"fields": {"policy_group": group, "source": source}})
        if self._notify is not None:
            self._notify(text)

    async def set_queues(self, group: str, text: str, source: str) -> list[str]:
        """Validate a queue configuration for `group`; append it to the log when it is
        valid. Returns its errors (each with its path); nothing is appended if there is any."""
        if not text.strip():  # an emptied file hands the group back to its RMs' configurations
            if not await self._append("config", {"rmID": "", "policyGroup": group, "config": ""}):
                return [NOT_APPENDED]
            log.info("queue configuration withdrawn", extra={"fields": {"policy_group": group, "source": source}})
            return []
        try:
            self._live.core.load_config(text)  # the core's own checks, so what is appended will parse
        except ConfigError as exc:
            errors = exc.errors
        else:
            if not await self._append("config", {"rmID": "", "policyGroup": group, "config": text}):
                return [NOT_APPENDED]
            log.info("queue configuration appended", extra={"fields": {"policy_group": group, "source": source}})
            return []
        fields = {"policy_group": group, "source": source, "errors": errors}
        if self._notify is None:
            log.error("queue configuration rejected, the active one stays", extra={"fields": fields})
        else:  # the listener shows it to the operator; the log keeps it below the error level
            log.info("queue configuration rejected, the active one stays", extra={"fields": fields})
            more = f" (and {len(errors) - 1} more: ykbus config validate {source})" if len(errors) > 1 else ""
            self._notify(f"{source}: rejected, the active configuration stays: {errors[0]}{more}")
        return errors

    def may_administer(self, user: str) -> bool:
        """The scheduler ACL: the process owner always; others if the ACL lets them in. Only
        the user counts: a caller's groups cannot be verified (the NATS user can)."""
        acl = self._settings.scheduler_acl
        return user == self.owner or (acl is not None and acl.allows(user, []))

    async def on_admin(self, msg: Any) -> None:
        """`yk.v1.admin.<user>.queues` {"policyGroup", "config"}: a new queue configuration
        for a policy group ("*": every RM), validated and appended like a queue file. The
        user is the subject token, which NATS permissions pin to the authenticated caller;
        a `user` or `groups` in the body is not trusted and not read."""
        head = f"{self._subjects.prefix}.admin."
        tokens = msg.subject[len(head):].split(".")
        try:
            if len(tokens) != 2 or not all(tokens):
                raise ValueError(f"the admin API moved to {self._subjects.admin('<user>', '<verb>')}: the user is "
                                 f"the caller's NATS user, in the subject (not the body); got {msg.subject}")
            user, verb = tokens
            request = _request(msg.data)
            if not isinstance(request, dict):
                raise ValueError("the request body must be a JSON object")
            if not self.may_administer(user):
                raise PermissionError(f"user {user!r} is not in the scheduler ACL")
            if verb != "queues":
                raise ValueError(f"unknown admin verb {verb!r}: expected queues")
            config = request.get("config")
            if not isinstance(config, str):
                raise ValueError("config: expected the queue configuration as a YAML string")
            group = request.get("policyGroup") or "*"
            if not isinstance(group, str):
                raise ValueError("policyGroup: expected the policy group's name as a string")
            errors = await self.set_queues(group, config, source=f"admin API ({user})")
            body: dict[str, Any] = {"accepted": not errors, "errors": errors}
        except (ValueError, PermissionError) as exc:
            body = {"error": str(exc)}
        if msg.reply:
            await msg.respond(json.dumps(body).encode())


def _request(data: bytes) -> object:
    """An admin request's body as JSON objects (ValueError for one nested too deep to read:
    only the parse is guarded, not what is done with it)."""
    try:
        return json.loads(data) if data.strip() else {}
    except RecursionError:
        raise ValueError("the request is nested too deep to read") from None
