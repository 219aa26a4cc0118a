"""The privacy report's layout: sections from the report's content, rendered as text, Markdown and HTML.

:mod:`pymc_dp.privacy_report` computes the content (numbers and facts, JSON-serialisable); this
module only arranges it for a reader: :func:`sections` turns the content into titled sections
(lead, alerts, paragraphs, key-value rows, tables), and :func:`render_text`,
:func:`render_markdown`, :func:`render_html` write them out. It reads no release and no model.
"""

from __future__ import annotations

import html
import math
import re

import numpy as np

from pymc_dp.certificate import mass_text

__all__ = ["render_html", "render_markdown", "render_text", "sections"]


def _preprocessing_alert(pre: dict | None, epsilon: float) -> list:
    if not pre:
        return []
    return [("warning", (
        f"The private containers {', '.join(pre['containers'])} were standardised by a separate release "
        f"({pre['mechanism']}, epsilon = {_f(pre['epsilon'], 6)}), charged to the ledger on the same dataset. "
        f"Preprocessing and this release together: epsilon = {_f(pre['epsilon'] + epsilon, 6)} (sequential composition)."))]


def _f(x, digits: int = 4) -> str:
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    x = float(x)
    if math.isinf(x):
        return "inf"
    return f"{x:.{digits}g}"


def _section(title, *, lead=None, alerts=(), paragraphs=(), kv=(), tables=()):
    return {"title": title, "lead": lead, "alerts": list(alerts), "paragraphs": list(paragraphs), "kv": list(kv),
            "tables": list(tables)}


def _path_section(path: dict | None) -> list[dict]:
    """How ``path="auto"`` chose the release path, and the paths it passed over (none: the user chose)."""
    if not path:
        return []
    kv = [("chosen path", path["chosen"])] + [(f"not {p}", why) for p, why in path.get("considered", [])]
    return [_section("Release path", lead=f"Chosen by path='auto' from public facts only: {path['reason']}.", kv=kv)]


def _mechanism_sections(c: dict) -> list[dict]:
    b, u = c["budget"], c["unit"]
    out = []
    what = "noisy sufficient statistics" if c["released"].get("statistics") is not None else "noisy posterior parameters"
    head = (f"({_f(b['epsilon'], 6)}, {_f(b['delta'], 3) if b['delta'] else 0})-differential privacy for one release of {what} "
            f"({c['mechanism']}); the {b['draws']} posterior draws are post-processing.")
    alerts = [("warning", w["text"]) for w in c["warnings"]] + _preprocessing_alert(c.get("preprocessing"), b["epsilon"])
    g = c.get("guarantee") or {}
    if g:  # posterior draws under a guarantee other than pure DP per draw (stochastic-Lipschitz mode)
        head = (f"({_f(b['epsilon'], 6)}, {_f(b['delta'], 3)})-differential privacy for {b['draws']} posterior draws "
                f"({c['mechanism']}): (epsilon, delta) from the {g.get('mode', 'stated')} mode; delta = {_f(b['delta'], 3)}.")
        if "statement" in g:  # metric DP: the guarantee in its metric form
            head = f"{g['statement']}; for {b['draws']} posterior draws ({c['mechanism']}), epsilon per unit of rho."
    out.append(_section("Summary", lead=head, alerts=alerts, paragraphs=[f"Mechanism: {c['algorithm']}."]))
    out += _path_section(c.get("path"))
    kv = [("epsilon", _f(b["epsilon"], 6)), ("delta", _f(b["delta"], 3) if b["delta"] else "0"), ("privacy unit", u["text"])]
    kv += [(f"domain of {k}", v) for k, v in c["domains"].items()]
    if c["public"]:
        kv.append(("public containers", ", ".join(c["public"])))
    out.append(_section("Budget and unit", kv=kv))
    if g:
        out.append(_section("Guarantee and derivation", kv=[(k, v if isinstance(v, str) else "[" + ", ".join(_f(t, 6) for t in v) + "]" if isinstance(v, list) else _f(v, 6)) for k, v in g.items()]))
    sens, noise = c["sensitivity"], c["noise"]
    kv = [("L1 sensitivity", _f(sens.get("l1"), 6))]
    if sens.get("l2") is not None:
        kv.append(("L2 sensitivity (Gaussian noise)", _f(sens["l2"], 6)))
    kv.append(("derivation", sens.get("derivation", "n/a")))
    if "paper_bound" in sens:
        kv.append(("paper's bound (AAAI Cor. 2)", _f(sens["paper_bound"], 6)))
    scale = noise.get("scale")
    kv += [("noise", noise.get("distribution", "n/a")), ("sampler", noise.get("sampler", "n/a"))]
    if isinstance(scale, dict):  # one scale per released statistic
        kv += [(f"noise scale of {k}", _f(v, 6)) for k, v in scale.items()]
    else:
        kv.append(("noise scale b = sensitivity / epsilon", _f(scale, 6)))
    if not g:
        out.append(_section("Sensitivity and noise", kv=kv))
    stats = c["released"].get("statistics")
    if stats is not None:
        kv = [(f"released {k}", _f(v, 6)) for k, v in stats.items()]
        kv += [(f"law given the parameters ({k})", v) for k, v in c["law"].items()]
        out.append(_section("Released statistics and the noise-aware model", kv=kv, paragraphs=[
            "The posterior is conditioned on the noisy statistics with the noise in the model: exact given "
            "what was released, and any number of draws is post-processing."]))
    rows = [[n["factor"], str(n["element"]), n["observes"], ", ".join(n["parents"]) or "-", n["parameter"]] for n in c["network"]]
    if rows:
        out.append(_section("Network", tables=[{"caption": "Nodes of one record", "headers": ["factor", "element", "observes", "parents", "parameter"], "rows": rows}]))
    nn = c["nonnegativity"]
    if nn is not None:
        rel = c["released"]
        kv = [("t", _f(nn["t"])), ("shift added to the zero coefficient", _f(nn["shift"], 6)),
              ("guaranteed P(non-negative)", _f(nn["guaranteed"], 6)), ("guarantee", nn["guarantee"]),
              ("paper's claim 1 - e^-t", _f(nn["paper_claim"], 6) + " (" + nn["paper_claim_note"] + ")"),
              ("this release non-negative (stealthy)", _f(bool(rel.get("non_negative"))))]
        if not rel.get("non_negative"):
            kv.append(("negative cells clipped to 0", str(rel.get("negative_cells_clipped"))))
        out.append(_section("Non-negativity", kv=kv))
    if c["truncation"]:
        out.append(_section("Truncation", paragraphs=[c["truncation"].get("note", "")]))
    if c["ledger"] is not None:
        lg = c["ledger"]
        out.append(_section("Budget ledger", kv=[(k.replace("_", " "), _f(v, 6)) for k, v in lg.items() if not isinstance(v, (dict, list))]))
    d = c["diagnostics"]
    paragraphs = [f"Computed from the {d['draws_total']} released draws only, with ArviZ {d['arviz']} (post-processing)."]
    if d["note"]:
        paragraphs.append("Note: " + d["note"] + ".")
    rows = [[r[0]] + [_f(v) for v in r[1:]] for r in d["rows"]]
    out.append(_section("Diagnostics of the released draws", paragraphs=paragraphs,
                        tables=[{"caption": "Released draws", "headers": ["parameter"] + d["columns"], "rows": rows}] if rows else []))
    out.append(_section("Caveats", paragraphs=[c["seed"] or "",
               "The domains and the privacy unit must come from how the data were collected, never from the data."]))
    out.append(_section("Versions", kv=[(k, str(v)) for k, v in c["versions"].items()]))
    return out


def sections(c: dict) -> list[dict]:
    if c.get("kind") == "mechanism":
        return _mechanism_sections(c)
    b, u, s, sp, bd = c["budget"], c["unit"], c["sampling"], c["split"], c["bounds"]
    released = c["status"] == "released"
    n = b["draws"]
    conf = bd["confidence"]
    mcmc = (s["method"] == "mcmc") if released else (s["planned"] == "mcmc")
    out = []

    # --- headline
    unit_short = {"record": "one record", "attribute": "one attribute", "user": f"one user (<= {u['rows_per_unit']} rows)"}.get(
        u["kind"], u["kind"]
    )
    mech = c.get("mechanism")
    head = (
        f"({_f(b['epsilon'], 6)}, {_f(b['delta'], 3)})-differential privacy for the release of N = {n} "
        + ("posterior draw(s)" if mech is None else f"draw(s) of the {mech['name']} mechanism")
        + f"; privacy unit: {unit_short}."
    )
    if released:
        how = "the exact sampler (iid draws of the truncated posterior)" if s["method"] == "exact" else f"MCMC, sampler {s['sampler']}"
        status = f"Status: released: {n} draws, sampled with {how}."
    else:
        status = (
            "Status: certified, NOT released yet: this is what a release of sample() would guarantee; "
            f"sample() will use the {'exact' if s['planned'] == 'exact' else 'MCMC'} sampler by default."
        )
    alerts = [("danger" if w["kind"] in ("mcmc", "inconsistent") else "warning", w["text"]) for w in c["warnings"]]
    alerts += _preprocessing_alert(c.get("preprocessing"), b["epsilon"])
    out.append(_section("Summary", lead=head, alerts=alerts, paragraphs=[status]))
    out += _path_section(c.get("path"))

    # --- budget
    comp = b["composition"]
    kv = [
        ("epsilon (whole release)", _f(b["epsilon"], 6)),
        ("delta", _f(b["delta"], 3)),
        ("draws N", str(n)),
        ("epsilon per draw (eps0 = 2 Delta)", _f(b["epsilon_per_draw"], 6)),
        ("Delta (per-unit change of the log-likelihood)", _f(b["Delta"], 6)),
        (
            "composition used",
            "optimal (Kairouz-Oh-Viswanath, exact for N pure-DP draws)" if comp == "optimal" else "basic (N x eps0)",
        ),
        ("basic composition N x eps0", _f(b["epsilon_basic"], 6)),
    ]
    if b["epsilon_optimal"] is not None:
        kv.append(("optimal composition at this delta", _f(b["epsilon_optimal"], 6)))
    paragraphs = [
        ("One exact posterior draw is 2 Delta-DP (JMLR 2017 Thm 8); N draws compose. Both valid composition "
        "bounds are computed and the smaller is used.")
    ]
    amp = b.get("amplification")
    if amp:
        kv += [
            ("run-time contamination rate p", _f(amp["p"], 6)),
            ("epsilon on the contaminated data (the composition above)", _f(amp["epsilon_contaminated"], 6)),
            ("epsilon for the original data, log(1 + (1 - p)(e^eps - 1))", _f(b["epsilon"], 6)),
        ]
        paragraphs.append(
            f"Run-time contamination: before sampling, the library replaced each record of {amp['container']!r} "
            f"with probability p by a fresh draw of {amp['g']} (operating-system randomness; the contaminated "
            "values are neither stored nor released). A release that is eps-DP on the contaminated data is "
            "log(1 + (1 - p)(e^eps - 1))-DP for the original data (docs/theory/contamination.md)."
        )
    if mech is not None:
        kv += [
            ("mechanism", str(mech["name"])),
            ("sensitivity Delta_u (the truncation's; the L_j lift to it)", _f(mech["sensitivity"], 6)),
            ("likelihood power beta = eps0 / (2 Delta_u)", _f(mech["beta"], 6)),
        ]
        paragraphs.append(
            "Each draw is from the truncated prior times the private likelihood to the power beta: the "
            "exponential mechanism with the log-likelihood as utility (AAAI 2016 Alg. 3, Cor. 4). It is "
            "eps0-DP, and posterior sampling is its case beta = 1. Delta = beta Delta_u is the per-unit "
            "change of the tempered log-likelihood, the Delta of the bounds below."
        )
    out.append(_section("Budget", paragraphs=paragraphs, kv=kv))

    # --- ledger
    led = c["ledger"]
    if led is None:
        out.append(_section("Budget ledger", paragraphs=["No release yet: nothing has been charged."]))
    elif not led["recorded"]:
        out.append(
            _section(
                "Budget ledger",
                alerts=[("note", ("This release was not recorded in a budget ledger (ledger=None): "
                         "its spend is not counted anywhere."))],
            )
        )
    else:
        kv = [
            ("spent on this dataset (epsilon)", _f(led["spent_epsilon"], 6)),
            ("spent on this dataset (delta)", _f(led["spent_delta"], 3)),
            ("releases recorded", str(led["releases"])),
            ("total budget (epsilon, delta)",
             "no total (recording only)" if led["total_epsilon"] is None
             else f"{_f(led['total_epsilon'], 6)}, {_f(led['total_delta'], 3)}"),
        ]
        if led["remaining_epsilon"] is not None:
            kv.append(("remaining (epsilon, delta)", f"{_f(led['remaining_epsilon'], 6)}, {_f(led['remaining_delta'], 3)}"))
        out.append(
            _section(
                "Budget ledger",
                alerts=[("warning", ("Every call of sample() is a new release and spends again: re-running a "
                         "notebook cell spends the budget again."))],
                paragraphs=[("Cumulative spend on this dataset at the time of this release, this release included "
                            "(sums over the releases recorded in the ledger).")],
                kv=kv,
            )
        )

    # --- unit and domains
    rows = [[d["container"], d["description"]] for d in c["domains"]]
    kv = [("privacy unit", u["description"])]
    kv.append(("public containers", ", ".join(c["public_containers"]) or "none"))
    out.append(
        _section(
            "Privacy unit and data domains",
            kv=kv,
            tables=[{"caption": "Declared domain of each private container (public knowledge, not read from the data)",
                     "headers": ["container", "domain of one record"], "rows": rows}],
        )
    )

    # --- factors
    rows = [
        [f["name"], f["family"], ", ".join(f["reads"]), _f(f["lipschitz"], 6), "; ".join(f["truncation"]) or "none",
         f["solver"] or "", _f(f["equal_share"], 6)]
        for f in c["factors"]
    ]
    split_text = {"optimised": "optimised (the split that keeps the most prior mass)", "equal": "equal shares",
                  "none": "none (explicit bounds)",
                  "fit": f"fit, public: {sp.get('objective')}"}.get(sp["method"], str(sp["method"]))
    kv = [
        ("split of Delta across factors", split_text),
        ("Delta lifted from the factors' L_j",
         f"{_f(sp['lifted_Delta'], 6)} (must be <= "
         + (f"Delta = {_f(b['Delta'], 6)})" if mech is None else f"Delta_u = {_f(sp['truncation_Delta'], 6)})")),
        ("prior mass kept xi(Theta_L)", f"{mass_text(sp['prior_mass_kept'], sp['prior_mass_method'])} ({sp['prior_mass_method']})"),
        ("prior mass an equal split keeps", _f(sp["equal_split_prior_mass"])),
    ]
    out.append(
        _section(
            "Likelihood factors and truncation",
            paragraphs=[
                ("L_j: the most one unit can change factor j's log-likelihood on the truncated prior's support. "
                "The priors are truncated to the region Theta_L where that holds; no noise is added.")
            ],
            kv=kv,
            tables=[{"caption": "Per-factor certificate",
                     "headers": ["factor", "family", "reads", "L_j", "truncation", "solver", "equal share"],
                     "rows": rows}],
        )
    )

    # --- sampling
    alerts, kv, tables, paragraphs = [], [], [], []
    if released:
        if s["method"] == "mcmc":
            alerts.append(("danger", "MCMC caveat: " + (s["caveat"] or "MCMC draws are approximate posterior draws.")))
            kv += [("method", "MCMC"), ("sampler", str(s["sampler"])), ("chains", _f(s["chains"])),
                   ("draws per chain (released)", _f(s["draws_per_chain"])), ("warm-up per chain (never released)", _f(s["tune"])),
                   ("thinning (public rule)", f"every {_f(s['thin'])} draw(s)")]
            if s["exact_unavailable"]:
                kv.append(("why not exact", s["exact_unavailable"]))
        else:
            kv += [("method", "exact: iid draws of the truncated conjugate posterior (the guarantee is exact)"),
                   ("chains (layout only)", _f(s["chains"])), ("draws per chain", _f(s["draws_per_chain"]))]
            tables.append({
                "caption": "Exact sampler, per variable",
                "headers": ["variable", "prior", "shape", "factors", "truncation", "posterior", "algorithm"],
                "rows": [[p["variable"], p["prior"], "x".join(map(str, p["shape"])) or "scalar", ", ".join(p["factors"]),
                          p["truncation"], p["posterior"], p["algorithm"]] for p in s["plan"]],
            })
    else:
        if s["planned"] == "mcmc":
            alerts.append(("danger", "MCMC caveat: sample() will use MCMC; " + (
                c["caveats"][0] if c["caveats"] else "MCMC draws are approximate posterior draws.")))
            kv.append(("default method", "MCMC"))
            if s["exact_unavailable"]:
                kv.append(("why not exact", s["exact_unavailable"]))
        else:
            kv.append(("default method", "exact (iid draws of the truncated conjugate posterior)"))
        paragraphs.append("Not released yet: the sampler's settings are reported with the release.")
    out.append(_section("Sampling", alerts=alerts, paragraphs=paragraphs, kv=kv, tables=tables))

    # --- bounds
    kl, di, ut, pm_ = bd["kl_robustness"], bd["distinguishability"], bd["utility_sampling"], bd["utility_prior_mass"]
    T = di["value"]
    pct = f"{100 * conf:.4g}%"
    if T >= 1:
        dist_text = (
            f"An adversary who estimates the posterior from the N = {n} released draws cannot tell, with "
            f"{pct} confidence, two datasets apart that differ in fewer than {_f(T)} units (so not a change of one "
            "unit)."
        )
    else:
        dist_text = (
            f"The threshold is {_f(T)} < 1 unit: this bound does not rule out that an adversary with the N = {n} draws "
            f"tells apart, with {pct} confidence, datasets that differ in one unit. The differential-privacy guarantee "
            "(epsilon) still holds; it is the guarantee against every adversary."
        )
    rows = [
        ["KL robustness (per unit change)", _f(kl["value"]), kl["formula"] + ", rho = 1, Delta = eps0/2", kl["reference"],
         "How far one unit can move the whole posterior, as a KL divergence (nats)."],
        ["distinguishability threshold", _f(T) + " units", di["formula"] + f", delta = {_f(di['confidence_delta'])}",
         di["reference"], dist_text],
        ["utility: sampling error", _f(ut["value"]), ut["formula"] + f", delta = {_f(ut['confidence_delta'])}",
         ut["reference"],
         (f"With {pct} confidence, an answer chosen from the N draws is within this of the best answer under the "
         "private posterior (utilities in [0, 1], one query).")],
        ["utility: truncation term", _f(pm_["value"]), pm_["formula"] + f", xi(Theta_L) = {mass_text(pm_['prior_mass_kept'], sp['prior_mass_method'])}",
         pm_["reference"],
         ("Prior mass the truncation removed: the order of the utility lost against the unprivatised prior "
         "(the paper gives no constant).")],
    ]
    alerts = []
    if mcmc:
        alerts.append(("danger", "These bounds assume exact posterior draws; with MCMC they hold only approximately."))
    out.append(
        _section(
            "What the guarantee means",
            alerts=alerts,
            paragraphs=["Interpretations of Delta = eps0/2 from Dimitrakakis et al., JMLR 2017; rho counts privacy units."],
            tables=[{"caption": "Bounds", "headers": ["quantity", "value", "formula", "reference", "meaning"], "rows": rows}],
        )
    )

    # --- diagnostics
    d = c["diagnostics"]
    if d is None:
        out.append(_section(
            "Diagnostics of the released draws",
            paragraphs=["No release yet: there are no diagnostics. Diagnostics are computed from released draws only."],
        ))
    else:
        paragraphs = [
            (f"Computed from the {d['draws_total']} released draws only ({d['chains']} chain(s) x {d['draws_per_chain']}), "
            f"with ArviZ {d['arviz']}; post-processing of the release, no privacy cost. Warm-up draws and sampler "
            "statistics are never released, so they are not shown.")
        ]
        if d["note"]:
            paragraphs.append("Note: " + d["note"] + ".")
        rows = [[r[0]] + [_f(v) for v in r[1:]] for r in d["rows"]]
        if d["rows_omitted"]:
            paragraphs.append(f"{d['rows_omitted']} more parameter(s) not listed.")
        out.append(_section(
            "Diagnostics of the released draws",
            paragraphs=paragraphs,
            tables=[{"caption": "Released draws", "headers": ["parameter"] + d["columns"], "rows": rows}] if rows else [],
        ))

    # --- caveats and versions
    paragraphs = list(c["caveats"]) + [
        "Keep the random seed secret: with it, the draws can be recomputed for candidate datasets.",
        "The domains and the privacy unit must come from how the data were collected, never from the data.",
    ]
    out.append(_section("Caveats", paragraphs=paragraphs))
    out.append(_section("Versions", kv=[(k, str(v)) for k, v in c["versions"].items()]))
    return out


# --------------------------------------------------------------------------- text
def render_text(sections: list[dict]) -> str:
    lines = ["pymc_dp privacy report", "=" * 22]
    for s in sections:
        lines += ["", s["title"], "-" * len(s["title"])]
        if s["lead"]:
            lines.append(s["lead"])
        for level, text in s["alerts"]:
            lines.append({"danger": "WARNING: ", "warning": "Warning: "}.get(level, "Note: ") + text)
        lines += s["paragraphs"]
        if s["kv"]:
            width = min(max(len(k) for k, _ in s["kv"]), 48)
            lines += [f"  {k:<{width}}  {v}" for k, v in s["kv"]]
        for t in s["tables"]:
            lines.append(f"  {t['caption']}:")
            lines += ["    " + line for line in _text_table(t["headers"], t["rows"])]
    return "\n".join(lines) + "\n"


def _text_table(headers, rows, max_cell: int = 60) -> list[str]:
    cells = [[str(h) for h in headers]] + [[str(v) for v in r] for r in rows]
    # long cells (algorithms, meanings) would make the table unreadable: wrap them onto their own lines
    narrow = [i for i in range(len(headers)) if all(len(r[i]) <= max_cell for r in cells)]
    widths = {i: max(len(r[i]) for r in cells) for i in narrow}
    out = []
    for j, r in enumerate(cells):
        out.append("  ".join(f"{r[i]:<{widths[i]}}" for i in narrow).rstrip())
        for i in range(len(headers)):
            if i not in narrow and j > 0:
                out.append(f"    {headers[i]}: {r[i]}")
        if j == 0:
            out.append("  ".join("-" * widths[i] for i in narrow))
    return out


# --------------------------------------------------------------------------- Markdown
def _md(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_markdown(sections: list[dict]) -> str:
    lines = ["# pymc_dp privacy report"]
    for s in sections:
        lines += ["", f"## {s['title']}", ""]
        if s["lead"]:
            lines += [f"**{_md(s['lead'])}**", ""]
        for level, text in s["alerts"]:
            lines.append(f"> **{ {'danger': 'WARNING', 'warning': 'Warning'}.get(level, 'Note') }:** {_md(text)}")
            lines.append("")
        for p in s["paragraphs"]:
            lines += [_md(p), ""]
        if s["kv"]:
            lines += ["| | |", "|---|---|"] + [f"| {_md(k)} | {_md(v)} |" for k, v in s["kv"]] + [""]
        for t in s["tables"]:
            lines += [f"*{_md(t['caption'])}*", ""]
            lines.append("| " + " | ".join(_md(h) for h in t["headers"]) + " |")
            lines.append("|" + "---|" * len(t["headers"]))
            lines += ["| " + " | ".join(_md(v) for v in r) + " |" for r in t["rows"]]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------- HTML
_CSS = """
.pymc-dp-report{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:13px;line-height:1.4;color:#1b1b1b;max-width:1100px}
.pymc-dp-report h2{font-size:17px;margin:6px 0 8px}
.pymc-dp-report h3{font-size:14px;margin:14px 0 4px;border-bottom:1px solid #ddd;padding-bottom:2px}
.pymc-dp-report p{margin:4px 0}
.pymc-dp-report table{border-collapse:collapse;margin:4px 0 8px;font-size:12px}
.pymc-dp-report th,.pymc-dp-report td{border:1px solid #d0d0d0;padding:2px 6px;text-align:left;vertical-align:top}
.pymc-dp-report th{background:#f2f2f2}
.pymc-dp-report td.num{text-align:right;font-variant-numeric:tabular-nums}
.pymc-dp-report table.kv th{font-weight:normal;background:#fafafa}
.pymc-dp-report .caption{font-style:italic;color:#555;margin-top:6px}
.pymc-dp-report .alert{padding:4px 8px;margin:4px 0;border-left:4px solid}
.pymc-dp-report .alert.warning{background:#fff8e1;border-color:#f0b400}
.pymc-dp-report .alert.danger{background:#fdecea;border-color:#d93025;font-weight:600}
.pymc-dp-report .alert.note{background:#eef4fb;border-color:#5b8dd6}
.pymc-dp-report p.lead{font-size:14px;font-weight:600}
"""


_NUMBER = re.compile(r"^[-+]?(\d[\d.]*(e[-+]?\d+)?|inf|n/a)( units)?$")


def _is_num(text) -> bool:
    return bool(_NUMBER.match(str(text)))


def render_html(sections: list[dict]) -> str:
    e = html.escape
    parts = ['<div class="pymc-dp-report">', f"<style>{_CSS}</style>", "<h2>pymc_dp privacy report</h2>"]
    for s in sections:
        parts.append(f"<h3>{e(s['title'])}</h3>")
        if s["lead"]:
            parts.append(f'<p class="lead">{e(s["lead"])}</p>')
        for level, text in s["alerts"]:
            parts.append(f'<div class="alert {e(level)}">{e(text)}</div>')
        parts += [f"<p>{e(p)}</p>" for p in s["paragraphs"]]
        if s["kv"]:
            parts.append('<table class="kv"><tbody>')
            parts += [f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in s["kv"]]
            parts.append("</tbody></table>")
        for t in s["tables"]:
            parts.append(f'<div class="caption">{e(t["caption"])}</div><table><thead><tr>')
            parts += [f"<th>{e(h)}</th>" for h in t["headers"]]
            parts.append("</tr></thead><tbody>")
            for r in t["rows"]:
                cells = "".join(
                    f'<td class="num">{e(str(v))}</td>' if _is_num(v) else f"<td>{e(str(v))}</td>" for v in r
                )
                parts.append(f"<tr>{cells}</tr>")
            parts.append("</tbody></table>")
    parts.append("</div>")
    return "\n".join(parts)
