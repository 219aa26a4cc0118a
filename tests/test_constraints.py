"""The truncation's constraints (pymc_dp/constraints.py): a closed family, consumers registered per kind."""

import numpy as np


def test_box_of_is_registered_per_constraint_kind_and_refuses_the_rest():
    from pymc_dp.constraints import (
        ElementIntervalConstraint,
        IntervalConstraint,
        NormBallConstraint,
        PotentialConstraint,
        box_of,
    )

    assert box_of(IntervalConstraint("s", 0.5, None), (), (0.0, np.inf)) == (0.5, np.inf)
    lo, hi = box_of(ElementIntervalConstraint("b", (0.0, -1.0), (1.0, 2.0)), (2,), (-np.inf, np.inf))
    np.testing.assert_array_equal(lo, [0.0, -1.0])
    np.testing.assert_array_equal(hi, [1.0, 2.0])
    assert box_of(NormBallConstraint("w", 1.0), (3,), (-np.inf, np.inf)) is None
    assert box_of(PotentialConstraint.__new__(PotentialConstraint), (), (-np.inf, np.inf)) is None
