"""Generate notebooks/05_mechanisms.ipynb (no outputs): ``python notebooks/make_05_mechanisms.py``.

The notebook runs the AAAI 2016 Section 5 reproduction of ``benchmarks/aaai_reproduction.py``
at notebook size (it imports the experiment functions from that module).
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

INTRO = """# Posterior sampling vs the Laplace mechanisms (AAAI 2016, Section 5)

Zhang, Rubinstein & Dimitrakakis (AAAI 2016) compare three private mechanisms on a naive Bayes
classifier (Figure 1: 16 binary features, 50 training records, accuracy vs epsilon) and posterior
sampling on Bayesian linear regression (Figure 2: test MSE vs prior precision `b`, weights truncated
to `10/sqrt(b)`). This notebook runs both experiments at notebook size with the code of
`benchmarks/aaai_reproduction.py` (see its docstring and `benchmarks/README.md` for the full-size run):

* **posterior sampling**: `pymc_dp.make_private(..., unit="record")` and `sample(method="exact")`, one
  released draw at the whole budget;
* **Laplace on posterior updates** (Alg. 1): `pymc_dp.laplace_updates(...)`;
* **Fourier-domain Laplace** (Alg. 2): `pymc_dp.fourier_updates(..., t=...)`;
* **non-private**: the exact conjugate posterior predictive.

A test record is classified by the predictive posterior of the released draws (for the Laplace
mechanisms: draws from the released noisy Beta posteriors, which are free post-processing),
thresholded at 0.5. The data are generated (nothing is downloaded) and nothing is charged to a
budget ledger (`ledger=None`): the data are synthetic and the sweep releases many times on purpose.
"""

SETUP = """import sys
import warnings
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import Markdown, display

warnings.filterwarnings("ignore")
# benchmarks/ is not an installed package: find it next to this notebook's folder
here = Path.cwd().resolve()
root = next(p for p in (here, *here.parents) if (p / "benchmarks" / "aaai_reproduction.py").exists())
sys.path.insert(0, str(root / "benchmarks"))
import aaai_reproduction as aaai  # noqa: E402

FULL = False  # True: the script's "reduced" size (a few minutes); the full size is a command-line run
config = aaai.SIZES["reduced"] if FULL else replace(
    aaai.SIZES["reduced"],
    nb_repeats=8, nb_epsilons=(1.0, 8.0, 64.0, 512.0), ps_draws=(1,), mechanism_draws=50,
    lr_records=2000, lr_precisions=(1.0, 16.0, 256.0), lr_repeats=1, lr_draws=4, lr_tune=150,
)
print(config)
print("mechanisms available:", aaai.mechanisms_available())"""

RUN = """result = aaai.run(config=config, out=None, seed=0, progress=True)
print(f"{result['meta']['seconds']:.0f} s")"""

FIG1 = """aaai.plot_naive_bayes(result["raw"]["naive_bayes"])
plt.show()"""

FIG2_MD = """Figure 2's setting: pymc_dp is given the per-draw budget of the paper's ball `||w|| <= 10/sqrt(b)`,
`(1 + 10/sqrt(b))^2` (sigma = 1), and derives the truncation itself; the table below shows that it
derives the paper's radius. The private draws come from NUTS on the truncated model (few draws
here), so they carry pymc_dp's MCMC caveat."""

FIG2 = """aaai.plot_linear_regression(result["raw"]["linear_regression"])
plt.show()"""

REPORT_MD = """## Paper vs measured

Every number and verdict below is computed from this run (with few repeats the standard errors
are wide: the full-size run of the script is the one to quote)."""

REPORT = """display(Markdown(result["markdown"]))
for name, claim in result["summary"]["claims"].items():
    print(f"{name}: {'holds' if claim['holds'] else 'not evaluated' if claim['holds'] is None else 'does NOT hold'}")"""


def build() -> nbformat.NotebookNode:
    nb = new_notebook()
    nb.cells = [
        new_markdown_cell(INTRO),
        new_code_cell(SETUP),
        new_code_cell(RUN),
        new_markdown_cell("## Figure 1: naive Bayes accuracy vs epsilon (bands: one standard error over repeats)"),
        new_code_cell(FIG1),
        new_markdown_cell("## Figure 2: linear regression MSE vs prior precision\n\n" + FIG2_MD),
        new_code_cell(FIG2),
        new_markdown_cell(REPORT_MD),
        new_code_cell(REPORT),
    ]
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


if __name__ == "__main__":
    path = Path(__file__).resolve().parent / "05_mechanisms.ipynb"
    nbformat.write(build(), path)
    print(f"wrote {path}")
