"""YuniKorn's access control lists (the scheduler configuration design): an ACL's text parsed
(`'alice,bob dev,ops'`: users, a space, groups; `*` for everyone) and who it lets in.

Standard library and msgspec only: core/config.py (the queues' `submitacl` and `adminacl`)
and bus/settings.py (the service's `scheduler_acl`) read ACLs through it.
"""

from __future__ import annotations

import re

import msgspec

ACL_NAME = re.compile(r"^[_a-zA-Z][a-zA-Z0-9_.@-]*[$]?$")
WILDCARD = "*"


class Acl(msgspec.Struct, frozen=True):
    """A parsed access control list; `text` is what was configured."""

    text: str
    everyone: bool = False
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()

    def allows(self, user: str, groups: list[str]) -> bool:
        if self.everyone or user in self.users:
            return True
        return any(g in self.groups for g in groups)


def parse_acl(text: str) -> Acl:
    """An ACL from its configured text; ValueError says what is wrong with it."""
    if text == WILDCARD:
        return Acl(text, everyone=True)
    if text.count(" ") > 1:
        raise ValueError(f"{text!r}: more than one space (expected 'users groups')")
    user_part, _, group_part = text.partition(" ")
    lists = []
    for what, part in (("user", user_part), ("group", group_part)):
        names = [n for n in part.split(",")] if part else []
        for n in names:
            if n == WILDCARD and len(names) > 1:
                raise ValueError(f"{text!r}: '*' must be the only entry of the {what} list")
            if n != WILDCARD and not ACL_NAME.fullmatch(n):
                raise ValueError(f"{text!r}: {what} name {n!r} must match {ACL_NAME.pattern}")
        lists.append(tuple(names))
    users, groups = lists
    # a lone `*` as the user list or as the group list lets everyone in, as in YuniKorn
    return Acl(text, everyone=users == (WILDCARD,) or groups == (WILDCARD,), users=users, groups=groups)
