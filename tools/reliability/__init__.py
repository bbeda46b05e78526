"""The reliability suite of grid-rbd (issue 12): a URDF fuzzer (`fuzz`) and the store's
crash, concurrency and corruption cases (`store_cases`). `tests/test_reliability_*.py`
run a bounded part of it in CI; `tools/reliability/run.py --minutes N` runs it longer and
prints a JSON summary."""
