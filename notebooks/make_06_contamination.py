"""Generate notebooks/06_contamination.ipynb (no outputs): ``python notebooks/make_06_contamination.py``.

Huber contamination (seed 002): the certified per-draw epsilon of a contaminated model next to
the paper's Algorithm 1 estimate, and which of the two is a guarantee. Executed in CI (about
25 s: the estimate simulates 30 datasets).
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

CELLS = [
    ("md", """# Huber contamination: a certificate and an estimate, side by side

Hu et al. (seed 002) make posterior sampling private by *contaminating* the likelihood: each record
is modelled as coming, with a small public probability `p`, from a heavier-tailed public density `g`,
so the posterior uses `(1 - p) f_mu(x) + p g(x)`. Far from the bulk, a record is explained by `g`
whatever `mu` is, so a single record moves the posterior by a bounded amount, **even when the data
have no bound at all**.

Two numbers can be put on that:

* **the certificate** (`pymc_dp.make_private` on a contaminated model): a pure epsilon per draw, the
  oscillation of the contaminated log-likelihood over the truncated prior's support, computed by a
  certified branch and bound (`docs/theory/contamination.md`). It holds for **every** pair of
  neighbouring datasets. This is a differential-privacy guarantee.
* **the paper's Algorithm 1** (`pymc_dp.contamination.estimate_epsilon`): an epsilon estimated on
  datasets *simulated* from the model at a guessed parameter, reported as a quantile. It describes
  typical datasets drawn from the model, not the worst case, and it is **not** a DP guarantee: the
  worst case over datasets in the same domain is 18-24, and infinite on an unbounded domain.
  pymc_dp labels it so, and refuses it as a budget.
"""),
    ("code", """import warnings

import numpy as np
import pymc as pm

import pymc_dp as pdp

warnings.filterwarnings("ignore")
rng = np.random.default_rng(0)
y = rng.normal(0.1, 1.0, size=200)  # private readings; no bound is declared for them

with pm.Model() as model:
    mu = pm.Uniform("mu", -0.25, 0.25)  # the truncated prior: only its width costs epsilon
    pm.Normal("obs", mu, 1.0, observed=pm.Data("y", y))

# the public contamination: rate 0.1, Student-t(3) tails; the user's model is not changed
cmodel = pdp.contaminate(model, p=0.1, g={"obs": pm.StudentT.dist(nu=3, mu=0, sigma=1)})"""),
    ("md", """## The certificate

The data's domain is the whole real line. pymc_dp accepts that only because the factor that reads
`y` is contaminated and its oscillation over `mu` in `[-0.25, 0.25]` is finite."""),
    ("code", """private = pdp.make_private(cmodel, epsilon=2.0, draws=1, data={"y": pdp.Interval(-np.inf, np.inf)},
                           ledger=None)
print(private.certificate)"""),
    ("md", """## The paper's estimate

Algorithm 1 on 30 datasets of the same size simulated from the contaminated model at a *public*
guess `mu* = 0` (never the private data's estimate, which would leak). It never reads `y`."""),
    ("code", """estimate = pdp.contamination.estimate_epsilon(cmodel, theta_star={"mu": 0.0}, n=len(y), n_datasets=30,
                                              random_seed=1)
print(estimate)"""),
    ("code", """from IPython.display import Markdown, display

display(Markdown(
    "| quantity | value | what it is |\\n|---|---|---|\\n"
    f"| certified epsilon per draw | {private.certificate.epsilon_per_draw:.3g} | a guarantee: every pair of "
    "neighbouring datasets, any data |\\n"
    f"| Algorithm 1 estimate ({1 - estimate.gamma:.0%} quantile, delta = {estimate.delta:g}) | {float(estimate.epsilon):.3g} | "
    "an estimate over datasets simulated at mu* = 0: model-conditional, **not DP** |"
))"""),
    ("md", """The estimate is smaller, and it would be tempting to spend it. pymc_dp refuses:"""),
    ("code", """try:
    pdp.make_private(cmodel, epsilon=estimate.epsilon, draws=1, data={"y": pdp.Interval(-np.inf, np.inf)}, ledger=None)
except pdp.PrivacyError as err:
    print(type(err).__name__, ":", str(err)[:300])"""),
    ("md", """## The release

One draw, certified at the epsilon above, through the same release driver and report as every
pymc_dp release; the report names the contamination."""),
    ("code", """idata = private.sample(random_seed=2, tune=300, chains=1)
print(idata.posterior["mu"].values.ravel())
print(pdp.report(idata))"""),
]


def build() -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.cells = [new_markdown_cell(src) if kind == "md" else new_code_cell(src) for kind, src in CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


if __name__ == "__main__":
    out = Path(__file__).with_name("06_contamination.ipynb")
    nbformat.write(build(), out)
    print(f"wrote {out}")
