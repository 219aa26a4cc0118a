"""The README's first command: the demo runs, releases by both methods and charges the ledger."""

from pymc_dp import demo


def test_demo_runs(capsys):
    demo.main()
    out = capsys.readouterr().out
    assert "released 20 draws by mcmc" in out
    assert "released 10 draws by exact" in out
    assert "optimal composition" in out
    assert "spent on this dataset so far" in out
