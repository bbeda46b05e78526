"""The gather strategy's layout and tables (`emit.idsva_gather` emits the kernels): the
limits within which it is built, an item's team and tile, its shared memory (`Layout`),
the strides of K's columns and U's turns, the memory form's per-entry product codes in
chunks, and the model of their shared-memory wavefronts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grid_codegen.model import RobotModel
from grid_codegen.registry import Algorithm
from grid_codegen.symbolic import idsva
from grid_codegen.symbolic import idsva_gather as G

ALGORITHMS = ("idsva_so", "fdsva_so")

MAX_ENTRIES = 1 << 19
"""The most entries (`4 nv^3`) the descriptor table holds (nv <= 50)."""

MAX_SHARED_BYTES = 200 * 1024
"""An item's shared memory in float64 must fit one block (227 KB on an H100/H200)."""

BLOCK = 256
"""Threads per block of the second kernel: `BLOCK / team` items at a time (a tile)."""

def one_warp(entries: int) -> bool:
    """Whether an item's team is one warp (`default_team`): BLOCK / 32 items a block, each
    with a stage of `chunk_of` scalars, whose steps wait on their warp's barrier alone."""
    return default_team(entries) == 32


def chunk_of(entries: int) -> int:
    """Consecutive entries a warp takes at a time in the memory form (`Chunk` of
    `grid::idsva_gather_sparse`): 128, or 32 for an item of one warp."""
    return 32 if one_warp(entries) else 128

COLUMN_STRIDE = 25
"""Scalars per column of K (24 of the loop form's table, then one pad): an odd stride puts
a warp's loads of consecutive columns in distinct shared-memory banks."""

TURN_STRIDE = 49
"""Scalars per turn in U (its eight 6-vectors, then one pad), odd for the same reason.
With both pads a warp's shared loads of the memory form's entries take 2.5-2.9x fewer
wavefronts (`bank_wavefronts`, per item: go2 23,814 -> 9,504, g1 127,836 -> 44,766; g1
took 73,938 when its warps took 32 consecutive entries, zeros included)."""


def k_size(model: RobotModel) -> int:
    return COLUMN_STRIDE * model.nv + 52 * model.nb


def pad_columns(model: RobotModel, K: Sequence) -> list:
    """The loop form's table (24 per column, then the bodies) in K's layout here."""
    nv = model.nv
    out: list = []
    for d in range(nv):
        out += [*K[24 * d:24 * d + 24], *[0.0] * (COLUMN_STRIDE - 24)]
    return out + list(K[24 * nv:])


def product_code(sign: int, turn: int, vector: int, column: int, motion: int) -> int:
    """One product's code for `grid::idsva_gather_product`."""
    if sign == 0:
        return 0
    return ((TURN_STRIDE * turn + 6 * vector) << 16 | (COLUMN_STRIDE * column + 6 * motion) << 2
            | (1 if sign > 0 else 3))


def sparse_tables(plan: G.Plan) -> tuple[list[int], list[int], list[int]]:
    """The memory form's tables (`grid::idsva_gather_sparse`): the codes of the non-zero
    entries in memory order, each one's slot in its chunk (`chunk_of`), and where each
    chunk's codes start (one more for the end)."""
    chunk = chunk_of(len(plan.entries))
    codes, slots, chunks = [], [], []
    for e, code in enumerate(entry_codes(plan)):
        while len(chunks) <= e // chunk:
            chunks.append(len(codes))
        if code:
            codes.append(code)
            slots.append(e % chunk)
    while len(chunks) <= -(-len(plan.entries) // chunk):
        chunks.append(len(codes))
    return codes, slots, chunks


def entry_codes(plan: G.Plan) -> list[int]:
    """Every entry's 64-bit code for `grid::idsva_gather_entry` (0: a structural zero)."""
    codes = []
    for e in plan.entries:
        if e == 0:
            codes.append(0)
            continue
        turn, column, formula = G.decode(e)
        first, second = (product_code(s, turn, u, column, m) for s, u, m in G.FORMULAS[formula])
        codes.append(first | second << 32)
    return codes


def bank_wavefronts(model: RobotModel, plan: G.Plan, column_stride: int = COLUMN_STRIDE,
                    turn_stride: int = TURN_STRIDE) -> int:
    """Shared-memory wavefronts of the products of one item's entry step in the memory
    form (`grid::idsva_gather_sparse`: a warp's lanes take a chunk's non-zero entries, 32
    at a time; a load takes as many wavefronts as the most distinct words in one bank)."""
    total = 0
    u_base = column_stride * model.nv + 52 * model.nb
    entries = plan.entries
    chunk = chunk_of(len(entries))
    for c0 in range(0, len(entries), chunk):
        live = [G.decode(e) for e in entries[c0:c0 + chunk] if e]
        for r0 in range(0, len(live), 32):
            lanes = live[r0:r0 + 32]
            for op in range(2):
                for on_u in (True, False):
                    for c in range(6):
                        words = {(u_base + turn_stride * t + 6 * G.FORMULAS[f][op][1] + c)
                                 if on_u else column_stride * kr + 6 * G.FORMULAS[f][op][2] + c
                                 for t, kr, f in lanes if G.FORMULAS[f][op][0]}
                        banks = [0] * 32
                        for word in words:
                            banks[word % 32] += 1
                        total += max(banks)
    return total


TILE_SHARED_BYTES = 226 * 1024
"""The tile form's block (BLOCK / 32 items) in float64 must fit an H100/H200's 227 KB per
block; in float32 two such blocks then share an SM's 228 KB (with 1 KB each reserved)."""


@dataclass(frozen=True)
class Layout:
    """An item's shared memory (scalars): its head (K: COLUMN_STRIDE per dof, then 52 per
    body; for fdsva_so M^-1 (nv x nv) and dtau (nv x 2nv), row-major), then the work
    space (the turns' vectors, TURN_STRIDE each; in the tile form the item's output tile;
    for fdsva_so D, a staged slab of dM and P in the turns' space). The first kernel
    writes the head in the same layout into its tile's output."""

    tile: bool  # the entry step's form
    k: int  # K's scalars
    head: int
    size: int  # head and work space
    stage: int = 0  # the memory form: the warps' staging chunks (scalars from the head)


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _layout(model: RobotModel, turns: int, fd: bool, tile: bool) -> Layout:
    nv = model.nv
    k = k_size(model)
    head = k + (3 * nv ** 2 if fd else 0)
    vectors = TURN_STRIDE * turns
    if not tile:
        # After the turns, a chunk per warp of the team (`grid::idsva_gather_sparse`),
        # 16-byte aligned in every item (the items at multiples of 4 scalars).
        stage = _round_up(head + vectors, 4)
        chunks = chunk_of(4 * nv ** 3) * (default_team(4 * nv ** 3) // 32)
        size = max(stage + chunks, head + (4 * nv ** 2 if fd else 0))
        return Layout(False, k, head, _round_up(size, 4), stage)
    work = max(vectors + 4 * nv ** 3, 4 * nv ** 2 if fd else 0)
    # The tile moves in 16-byte vectors: every item and its tile at multiples of 4
    # scalars (the head padded); an item size of 4 times an odd number keeps the head's
    # staging free of bank conflicts.
    head = _round_up(head + vectors, 4) - vectors
    size = _round_up(head + work, 4)
    return Layout(True, k, head, size + 4 if size % 8 == 0 else size)


def tile_form(model: RobotModel, turns: int, fd: bool) -> bool:
    """Whether the entry step runs in its tile form: a warp per item (iiwa14: yes; go2,
    g1: no), whose block of items with their output tiles fits in float64."""
    if default_team(4 * model.nv ** 3) != 32 or 4 * model.nv ** 2 > TURN_STRIDE * turns:
        return False  # (fdsva_so's contractions use U's space, beside the tile)
    return 8 * _layout(model, turns, fd, True).size * (BLOCK // 32) <= TILE_SHARED_BYTES


def layout(model: RobotModel, fd: bool, turns: int | None = None) -> Layout:
    """The layout of `model`'s items (`turns`: the plan's, computed when not given)."""
    turns = len(G.plan(model).turns) if turns is None else turns
    return _layout(model, turns, fd, tile_form(model, turns, fd))


def applicable(model: RobotModel, algorithm: Algorithm, strategy: str,
               joint_table: bool) -> bool:
    """idsva_so or fdsva_so, built with strategy="auto", on a model the sweep covers,
    within the table and shared-memory limits above."""
    if (algorithm.name not in ALGORITHMS or strategy != "auto" or joint_table
            or not idsva.supported(model) or model.nv > G.MAX_DOFS
            or 4 * model.nv ** 3 > MAX_ENTRIES):
        return False
    fd = algorithm.name == "fdsva_so"
    turns = len(G.plan(model).turns)
    if TURN_STRIDE * turns > 0xffff - 48 or COLUMN_STRIDE * model.nv > 0x3fff - 24:
        return False  # beyond the product codes' offsets
    # An item, and a block's tile of them, in float64.
    size = 8 * layout(model, fd, turns).size
    return size <= MAX_SHARED_BYTES and size * tile_of(4 * model.nv ** 3) <= TILE_SHARED_BYTES


def default_team(entries: int) -> int:
    """Threads per item: a warp for a small item (iiwa14: 1,372 entries), more where the
    entries dominate (g1: 171,500)."""
    if entries <= 4096:
        return 32
    return 128 if entries <= 32768 else BLOCK


def tile_of(width: int) -> int:
    """Items per tile (a block's items at the default team)."""
    return BLOCK // default_team(width)


def lane_ops(model: RobotModel, width: int, fd: bool) -> int:
    """Operations of a team's longest thread after the head (the dispatch model's): its
    turns (~800 each), its entries (~40 each) and (fdsva_so) its share of the
    combination (~7 nv^4 multiply-adds)."""
    team = default_team(width)
    turns = len(G.plan(model).turns)
    combine = 7 * model.nv ** 4 if fd else 0
    return 800 * -(-turns // team) + (40 * width + combine) // team


__all__ = ["ALGORITHMS", "BLOCK", "COLUMN_STRIDE", "MAX_ENTRIES", "MAX_SHARED_BYTES",
           "TILE_SHARED_BYTES", "TURN_STRIDE", "Layout", "applicable", "bank_wavefronts",
           "chunk_of", "default_team", "entry_codes", "k_size", "lane_ops", "layout",
           "one_warp", "pad_columns", "product_code", "sparse_tables", "tile_form", "tile_of"]
