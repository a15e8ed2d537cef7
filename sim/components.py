"""Which users (flows, or runs) load which resources (links, aggregators), and the part of them a change
reaches: both engines recompute rates only over the users coupled, through shared resources, to the
resources that changed since the last time (``docs/simulator-engines.md``, cost per event).

Pure: standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable


def directed_links(g) -> list[tuple[str, str]]:
    """Every directed link of topology ``g``, sorted by name: a link's id is its index, the same for the
    same graph whatever the order of the jobs, so that ties in a fill break the same way."""
    return sorted({(u, v) for a, b in g.edges() for u, v in ((a, b), (b, a))})


class Components:
    """The users of every resource and the resources changed since the last :meth:`component`.

    A user joins and leaves with the resources it loads (both change them); :meth:`touch` changes
    resources without a user joining or leaving (a flow re-weighed).
    """

    def __init__(self):
        self.users: dict[int, dict[Hashable, None]] = {}  # resource -> its users, in the order they joined
        self.changed: set[int] = set()

    def join(self, user: Hashable, resources: Iterable[int]) -> None:
        """``user`` loads ``resources`` from now on."""
        users = self.users
        for r in resources:
            users.setdefault(r, {})[user] = None
            self.changed.add(r)

    def leave(self, user: Hashable, resources: Iterable[int]) -> None:
        """``user`` loads ``resources`` no more."""
        users = self.users
        for r in resources:
            on = users.get(r)
            if on is not None:
                on.pop(user, None)
                if not on:
                    del users[r]
            self.changed.add(r)

    def touch(self, resources: Iterable[int]) -> None:
        """The rates over ``resources`` are to be recomputed."""
        self.changed.update(resources)

    def component(self, resources_of: Callable[[Hashable], Iterable[int]]) -> tuple[list[int], set]:
        """The resources and users connected to the changed resources through users sharing resources
        (``resources_of`` gives a user's), the changed set cleared. O(resources + user-resource pairs
        reached)."""
        seen = set(self.changed)
        self.changed.clear()
        todo = list(seen)
        reached: list[int] = []
        found: set = set()
        users = self.users
        while todo:
            r = todo.pop()
            reached.append(r)
            for user in users.get(r, ()):
                if user not in found:
                    found.add(user)
                    for nxt in resources_of(user):
                        if nxt not in seen:
                            seen.add(nxt)
                            todo.append(nxt)
        return reached, found
