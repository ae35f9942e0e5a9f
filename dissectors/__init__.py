"""Sans-I/O protocol dissectors: bytes in, records out.

Nothing in this package reads files, opens sockets, uses pandas or looks at a
clock, and nothing here imports from :mod:`pcapkit` (DESIGN.md §1).  Every parser
has one of two shapes (DESIGN.md §5): a one-shot ``parse_x(buf, offset) ->
(record, next_offset)`` or a streaming parser with ``feed(data) -> list[Record]``
and ``close()``.  Errors are :class:`dissectors.errors.DissectError` subclasses,
never ``IndexError``, ``struct.error`` or ``KeyError``.
"""
