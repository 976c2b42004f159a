"""Counterbalanced orders: balanced Latin squares (Williams designs) over blocks of a session.

Pure functions, no Django: the order of a session is a function of its item count, the number of
blocks, its Latin-square row and its seed, so it can be rebuilt and checked at any time.
"""

from __future__ import annotations

import random


def williams(n: int) -> list[list[int]]:
    """Rows of a balanced Latin square of order n: every element takes every place once, and
    every element follows every other once (for odd n the square and its mirror, 2n rows)."""
    if n <= 0:
        return [[]]
    first: list[int] = []
    low, high = 0, n - 1
    for k in range(n):
        if k % 2 == 0:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    rows = [[(x + r) % n for x in first] for r in range(n)]
    if n % 2 == 1:
        rows += [list(reversed(row)) for row in rows]
    return rows


def block_bounds(n_items: int, blocks: int) -> list[tuple[int, int]]:
    """Contiguous [start, end) ranges of `blocks` near-equal blocks over n_items."""
    blocks = max(1, min(blocks, n_items)) if n_items else 1
    return [(b * n_items // blocks, (b + 1) * n_items // blocks) for b in range(blocks)]


def counterbalanced_order(n_items: int, *, blocks: int, row: int, seed: int) -> list[int]:
    """A permutation of range(n_items): canonical blocks in the order of Latin-square row `row`,
    items shuffled within each block by `seed`.

    Over any run of consecutive rows the length of the square, each block (and so each item)
    appears in each part of the session equally often.
    """
    bounds = block_bounds(n_items, blocks)
    square = williams(len(bounds))
    rng = random.Random(seed)
    order: list[int] = []
    for block in square[row % len(square)]:
        start, end = bounds[block]
        items = list(range(start, end))
        rng.shuffle(items)
        order.extend(items)
    return order


def spread_slots(n_total: int, n_spread: int) -> list[int]:
    """Indices at which n_spread items sit evenly among n_total canonical places."""
    if n_spread <= 0:
        return []
    return sorted({min(n_total - 1, int((k + 0.5) * n_total / n_spread)) for k in range(n_spread)})
