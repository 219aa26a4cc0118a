"""A model fuzzer for the whole certifier (issue 32, item 3).

:mod:`tests.fuzz.grammar` composes small PyMC models from the forms users write, one per seed;
:mod:`tests.fuzz.harness` certifies each, classifies the result (certified / refused / crashed /
refuted) and checks every certificate with :func:`pymc_dp.refutation.refute` at the larger budget.
``tests/fuzz/test_fuzz.py`` is the fixed-seed CI tier; ``benchmarks/fuzz_campaign.py`` the long
campaign. Holes it found are in ``tests/fuzz/FOUND.md``.
"""
