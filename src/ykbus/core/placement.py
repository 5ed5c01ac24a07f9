"""Where a new application goes (YuniKorn's Scheduler Configuration design: placement rules and ACLs).

`AppPlacement(partition).place(msg)` picks the leaf queue for one application: without
rules, the queue it names; with rules, the first rule that yields a usable leaf the user
may submit to, with unmanaged queues where a rule says `create`. It decides and changes
nothing: a queue a rule would create is a new `Queue` not yet in the tree (its parent set,
its template applied), seen by the rules after it; the partition attaches the chosen
queue's new ancestors when the application is added (`Changes.add_app`, core/changes.py), and the
queues of rules that did not place it are never in the tree. One placement object per
request: what it would create, and why each rule placed nothing, are its own scratch; a
rejection says why each rule placed nothing (at most `MISSES_SAID` reasons).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ykbus.core.config import QUEUE_NAME, ChildTemplate, PlacementRule, QueueConfig, RuleFilter, from_root, name_pattern
from ykbus.core.model import DOT, FORCE_TAG, RECOVERY_QUEUE, Queue, full_path, ugi_groups
from ykbus.si import messages as m

if TYPE_CHECKING:
    from ykbus.core.state import PartitionState


def may_submit(queue: Queue, user: str, groups: list[str]) -> bool:
    """YuniKorn's ACL check: the submit or admin ACL of the queue or of any queue above it
    lets the user in. An unmanaged queue has no ACL of its own, so its parent's count.
    With no ACL anywhere on the way, access is denied."""
    q: Queue | None = queue
    while q is not None:
        for acl in (q.submitacl, q.adminacl):
            if acl is not None and acl.allows(user, groups):
                return True
        q = q.parent
    return False


# why a rule proposes no name (`{}`: the rule's value)
_NO_NAME = {"provided": "the application names no queue (queueName is empty)", "tag": "the application has no tag {}",
            "user": "the application names no user", "primarygroup": "the user has no group",
            "secondarygroup": "the user has no group but the first"}


def _matches(names: list[str], candidates: list[str]) -> bool:
    if len(names) == 1:
        pattern = name_pattern(names[0])  # (checked when the configuration was read)
        return any(pattern.fullmatch(c) for c in candidates)
    return any(c in names for c in candidates)


def _filter_allows(flt: RuleFilter, user: str, groups: list[str]) -> bool:
    """Whether a rule applies: with no users and no groups listed, to everyone."""
    if not flt.users and not flt.groups:
        return flt.type != "deny"
    hit = _matches(flt.users, [user]) or _matches(flt.groups, groups)
    return hit if flt.type == "allow" else not hit


MISSES_SAID = 8  # the reasons a rejection names, each rule's and each ACL denial (then a count)


def draining(queue: Queue) -> str:
    """Why `queue` takes no new application because it or a queue above it is draining (a
    queue removed from the configuration: what was under it goes with it), or ""."""
    for q in queue.ancestry():
        if q.draining:
            return (f"queue {queue.path} is draining" if q is queue
                    else f"queue {queue.path} is under {q.path}, which is draining")
    return ""


def denial(path: str, user: str) -> str:
    return f"user {user!r} may not submit to queue {path}: no submitacl or adminacl up to root lets them in"


def apply_template(queue: Queue) -> None:
    """An unmanaged leaf takes the child template of the nearest parent that has one; an
    unmanaged parent, its parent's priority sorting (as at its creation). Parents first."""
    if queue.managed or queue.parent is None or queue.path == RECOVERY_QUEUE:
        return
    if not queue.leaf:
        queue.configure(QueueConfig(queue.name, True, {}, {}, 0, {}, None, None, []), queue.parent.sort_priority)
        return
    t = next((q.template for q in queue.parent.ancestry() if q.template is not None), None) or ChildTemplate()
    queue.configure(QueueConfig(queue.name, False, t.guaranteed, t.max, t.maxapplications, t.properties,
                                None, None, []), queue.parent.sort_priority)


class AppPlacement:
    __slots__ = ("partition", "planned", "denied", "missed")

    def __init__(self, partition: PartitionState) -> None:
        self.partition = partition
        self.planned: dict[str, Queue] = {}  # path -> a queue a rule would create (not in the tree)
        self.denied: list[str] = []
        self.missed: list[str] = []  # "<rule>: why it placed nothing", in the order tried

    def _queue(self, path: str) -> Queue | None:
        """The queue at `path`: in the tree, or one a rule before would create."""
        return self.partition.queues.get(path) or self.planned.get(path)

    def place(self, msg: m.AddApplicationRequest) -> tuple[Queue | None, str]:
        """The leaf queue for a new application, or None and why. An application the RM
        recovers (tag `application.create.force`) that nothing places goes to
        `root.@recovery@`, without an ACL check."""
        part = self.partition
        user, groups = msg.ugi.user, ugi_groups(msg.ugi)
        rules = part.config.placementrules
        chosen: Queue | None = None
        reason = ""
        if not rules:
            queue = part.resolve_queue(msg.queueName) if msg.queueName else None
            if not msg.queueName:
                reason = "queueName is empty and no placement rule applies"
            elif full_path(msg.queueName) == RECOVERY_QUEUE:
                reason = f"queue {RECOVERY_QUEUE} is reserved for recovered applications"
            elif queue is None:
                reason = f"queue {msg.queueName!r} does not exist"
            elif not queue.leaf:
                reason = f"queue {queue.path} is a parent queue: applications go to leaf queues"
            elif closed := draining(queue):
                reason = f"{closed}: it accepts no new applications"
            elif not may_submit(queue, user, groups):
                reason = denial(queue.path, user)
            else:
                chosen = queue
        else:
            for rule in rules:
                chosen = self._place_by(rule, msg, leaf=True)
                if chosen is not None:
                    break
            if chosen is None:
                names = ", ".join(r.name for r in rules)
                reason = f"no placement rule placed the application (rules: {names})"
                denied = self.denied[:max(1, MISSES_SAID - len(self.missed))]  # (one at least, if any)
                said = self.missed[:MISSES_SAID - len(denied)]
                if said:
                    reason += ": " + "; ".join(said)
                if denied:
                    reason += "; denied by ACL: " + "; ".join(denied)
                more = len(self.missed) + len(self.denied) - len(said) - len(denied)
                if more > 0:
                    reason += f"; and {more} more"
        if chosen is None and msg.tags.get(FORCE_TAG, "").lower() == "true":
            recovery = self._queue(RECOVERY_QUEUE) or self._create_unmanaged(RECOVERY_QUEUE, True, recovery=True)
            chosen = recovery if isinstance(recovery, Queue) else None
        return chosen, reason if chosen is None else ""

    def _place_by(self, rule: PlacementRule, msg: m.AddApplicationRequest, leaf: bool) -> Queue | None:
        """The queue `rule` names (a leaf, or a parent for a parent rule), made if allowed.
        A leaf the user may not submit to does not count: the next name or rule is tried.
        Why it placed nothing goes to `missed` (a parent rule's reason before its child's)."""
        user = msg.ugi.user
        if not _filter_allows(rule.filter, user, ugi_groups(msg.ugi)):
            return self._miss(rule, f"its filter leaves user {user!r} out")
        names = self._rule_names(rule, msg)
        if not names:
            return self._miss(rule, _NO_NAME.get(rule.name, "it names no queue").format(rule.value))
        for name in names:
            if rule.parent is not None and not from_root(name):  # (a queue from root: no parent rule runs)
                parent = self._place_by(rule.parent, msg, leaf=False)
                if parent is None:
                    return self._miss(rule, f"its parent rule ({rule.parent.name}) placed no parent queue")
                path = f"{parent.path}.{name.replace('.', DOT).lower()}"
            else:
                path = full_path(name)
            if path == RECOVERY_QUEUE:  # reserved: only recovered applications go there
                self._miss(rule, f"queue {RECOVERY_QUEUE} is reserved for recovered applications")
                continue
            queue: Queue | str | None = self._queue(path)
            if queue is None:
                queue = self._create_unmanaged(path, leaf) if rule.create else \
                    f"queue {path} does not exist (the rule creates no queue: create is false)"
            if isinstance(queue, str):
                self._miss(rule, queue)
            elif queue.leaf != leaf:
                self._miss(rule, f"queue {queue.path} is a parent queue: applications go to leaf queues" if leaf
                           else f"queue {queue.path} is a leaf queue: a parent rule names a parent")
            elif closed := draining(queue):
                self._miss(rule, closed)
            elif leaf and not may_submit(queue, user, ugi_groups(msg.ugi)):
                self.denied.append(denial(queue.path, user))
            else:
                return queue
        return None

    def _miss(self, rule: PlacementRule, why: str) -> None:
        self.missed.append(f"{rule.name}: {why}")

    @staticmethod
    def _rule_names(rule: PlacementRule, msg: m.AddApplicationRequest) -> list[str]:
        """The queue names a rule proposes, in order (generated parts get `.` -> `_dot_`)."""
        groups = ugi_groups(msg.ugi)
        if rule.name == "provided":
            return [msg.queueName] if msg.queueName else []
        if rule.name == "fixed":
            return [rule.value]
        if rule.name == "user":
            return [msg.ugi.user.replace(".", DOT)] if msg.ugi.user else []
        if rule.name == "tag":  # (a value from root is the queue itself, as YuniKorn's tag rule reads it)
            tag = msg.tags.get(rule.value, "")
            return [tag if from_root(tag) else tag.replace(".", DOT)] if tag else []
        if rule.name == "primarygroup":
            return [groups[0].replace(".", DOT)] if groups else []
        return [g.replace(".", DOT) for g in groups[1:]]  # secondarygroup: the first that places

    def _create_unmanaged(self, path: str, leaf: bool, recovery: bool = False) -> Queue | str:
        """The unmanaged queue a rule would create at `path` (not attached to the tree), or
        why none can be: only a queue's last level is created, under a parent queue."""
        parent_path, _, name = path.rpartition(".")
        parent = self._queue(parent_path)
        if parent is None:
            return f"queue {path} does not exist and cannot be created: its parent {parent_path} does not exist"
        if parent.leaf:
            return f"queue {path} cannot be created: {parent_path} is a leaf queue"
        if closed := draining(parent):
            return f"queue {path} cannot be created: {closed}"
        if not QUEUE_NAME.match(name):
            return (f"queue {path} cannot be created: {name[:80]!r} is not a queue name "
                    "(1 to 64 of letters, digits and _:#/@-)")
        queue = Queue(name, parent, managed=False)
        queue.configure(QueueConfig(name, not leaf, {}, {}, 0, {}, None, None, []), parent.sort_priority)
        if not recovery:
            apply_template(queue)
        self.planned[queue.path] = queue
        return queue
