"""The JSON objects of the findings finalize loads, as read-only mappings of a compact shape.

A run's findings stay in memory through the aggregation and the skill proposals (34,000 of them at 100,000 sessions
in the dev corpus), each a dictionary with its evidence rows as dictionaries: 380 bytes a finding and 180 an
evidence row for the tables alone (1.2 KiB a finding in all). A ``Record`` keeps its key names once per shape (the
same dozen names in every finding, the same three in every evidence row) and its values in a tuple: about 40 % of
that. Readers see a mapping (``get``, ``[]``, ``in``, iteration in the object's own key order, equality with a dict);
nothing in finalize writes to a finding.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping


class Shape:
    """The key names of one kind of object, in their order, and where each value sits."""

    __slots__ = ("keys", "index")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self.index = {k: i for i, k in enumerate(keys)}


class Record(Mapping):
    __slots__ = ("_shape", "_values")

    def __init__(self, shape: Shape, values: tuple) -> None:
        self._shape, self._values = shape, values

    def __getitem__(self, key):
        return self._values[self._shape.index[key]]

    def get(self, key, default=None):
        at = self._shape.index.get(key)
        return default if at is None else self._values[at]

    def __contains__(self, key) -> bool:
        return key in self._shape.index

    def __iter__(self) -> Iterator[str]:
        return iter(self._shape.keys)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class Shapes:
    """One Shape per sequence of key names met while loading, and one empty list for every empty JSON array."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[str, ...], Shape] = {}
        self.empty: list = []

    def record(self, keys: tuple[str, ...], values: tuple) -> Record:
        shape = self._shapes.get(keys)
        if shape is None:
            shape = self._shapes[keys] = Shape(keys)
        return Record(shape, values)
