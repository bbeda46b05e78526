"""The output stores of a traced pass (`symbolic.emit._store_lines`): with
`vector_stores`, every complete run of four entries from a multiple of 4 is one
`grid::store4` (a 16-byte store on the GPU where aligned), the rest stay scalar; without,
one scalar store per entry, in order. The numbers through it are checked by the
second-order kernels' tests (the gather head uses it) on the CPU and, tagged `gpu`, on a
GPU."""

from __future__ import annotations

from grid_codegen.symbolic.emit import _store_lines


def test_complete_aligned_quads_become_one_store():
    stores = [(k, f"t{k}") for k in (0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12)]
    assert _store_lines(stores, "out", True) == [
        "grid::store4(out + 0, t0, t1, t2, t3);",
        "out[5] = t5;", "out[6] = t6;", "out[7] = t7;",  # 4 is missing: no quad
        "grid::store4(out + 8, t8, t9, t10, t11);",
        "out[12] = t12;",
    ]


def test_a_quad_is_stored_where_its_first_entry_was():
    stores = [(6, "c"), (4, "a"), (9, "x"), (7, "d"), (5, "b")]
    assert _store_lines(stores, "H", True) == ["grid::store4(H + 4, a, b, c, d);",
                                                "H[9] = x;"]


def test_without_vector_stores_every_entry_is_scalar_in_order():
    stores = [(k, f"v{k}") for k in (3, 0, 1, 2)]
    assert _store_lines(stores, "out", False) == ["out[3] = v3;", "out[0] = v0;",
                                                   "out[1] = v1;", "out[2] = v2;"]
