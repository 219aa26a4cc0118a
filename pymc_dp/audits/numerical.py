"""The numerical audit: the truncated posterior from PyMC's logp normalised by quadrature on an adaptive grid (at most two free scalars)."""

from __future__ import annotations

import math

import numpy as np

from pymc_dp.audits.neighbours import DataSpace, array_key
from pymc_dp.audits.result import AuditError, Witness, frozen_copy


class GridModel:
    """The truncated posterior of a model with at most two free scalar parameters, on grids.

    Densities come from the *user's* model (natural parameters, no value transforms): its prior,
    its public factors and potentials, and its private factors' log-likelihood row by row; the
    region is the certificate's truncation (its constraints, evaluated pointwise).
    """

    MAX_DIM = 2

    def __init__(self, pmod, space: DataSpace, *, dense: int | None = None, wide: int | None = None):
        import pytensor
        import pytensor.tensor as pt
        from pymc.model.transform.conditioning import remove_value_transforms
        from pytensor.graph.replace import clone_replace, vectorize_graph

        user = pmod.certification.user_model
        self.pmod = pmod
        self.space = space
        free = list(user.free_RVs)
        sizes = {}
        for rv in free:
            shape = tuple(int(s) for s in rv.shape.eval())
            if not str(rv.dtype).startswith("float"):
                raise AuditError(f"method='numerical' needs continuous parameters; {rv.name!r} is {rv.dtype}")
            sizes[rv.name] = shape
        dim = sum(int(np.prod(s, dtype=int)) for s in sizes.values())
        if dim > self.MAX_DIM or dim == 0:
            raise AuditError(
                f"method='numerical' needs at most {self.MAX_DIM} free scalar parameters; this model has {dim} "
                f"({', '.join(f'{k}{list(v)}' for k, v in sizes.items())}). Use method='statistical'."
            )
        self.dim = dim
        self.shapes = sizes
        self.coords = [(name, idx) for name, s in sizes.items() for idx in (np.ndindex(*s) if s else [()])]
        self.supports = [self._support(user, name) for name, _ in self.coords]
        plain = remove_value_transforms(user)
        values = {rv.name: plain.rvs_to_values[rv] for rv in plain.free_RVs}
        private = {f.name for f in pmod.factors}
        priv_obs = [rv for rv in plain.observed_RVs if rv.name in private]
        pub_obs = [rv for rv in plain.observed_RVs if rv.name not in private]
        self.factor_names = [rv.name for rv in priv_obs]
        self.reads = {f.name: set(f.reads) for f in pmod.factors}
        terms = plain.logp(vars=list(plain.free_RVs) + pub_obs, jacobian=False, sum=False)
        base = pt.add(*[pt.sum(t) for t in terms]) if terms else pt.constant(0.0)
        for pot in plain.potentials:
            base = base + pt.sum(pot)
        rows = []
        for rv, lp in zip(priv_obs, plain.logp(vars=priv_obs, jacobian=False, sum=False)):
            if lp.ndim == 0:
                raise AuditError(f"factor {rv.name!r} has a scalar observed value: no rows")
            row = lp.sum(axis=tuple(range(1, lp.ndim))) if lp.ndim > 1 else lp
            # a private MAP's output density raises the private likelihood to the power beta
            rows.append(getattr(pmod, "likelihood_power", 1.0) * row)
        data_vars = [v for v in plain.data_vars if v.name in space.names]
        self.data_names = [v.name for v in data_vars]
        # public containers aligned with the rows are inputs too, so that a few rows can be
        # evaluated alone (verified against a full evaluation before it is relied on)
        row_public = [v for v in plain.data_vars if v.name in space.public_rows]
        self.row_public = {v.name: np.asarray(v.get_value()) for v in row_public}
        self.subset_ok = space.rows is not None
        self._subset_checked = False
        data_vars = data_vars + row_public
        inputs = {v: v.type() for v in data_vars}
        outs = clone_replace([base, *rows], replace=inputs)
        names = list(sizes)
        batched = {values[n]: pt.tensor(f"{n}_grid", dtype="float64", shape=(None, *sizes[n])) for n in names}
        vout = vectorize_graph(outs, replace=batched)
        self.names = names
        self._fn = pytensor.function(
            [batched[values[n]] for n in names] + [inputs[v] for v in data_vars], vout, on_unused_input="ignore"
        )
        self.constraints = list(pmod.certification.constraints)
        self.dense = dense or (4001 if dim == 1 else 161)
        self.wide = wide or (240 if dim == 1 else 61)
        self._region_cache = {}

    @staticmethod
    def _support(model, name):
        rv = model[name]
        t = model.rvs_to_transforms.get(rv)
        tn = type(t).__name__ if t is not None else None
        if tn == "LogOddsTransform":
            return (0.0, 1.0, True, True)
        if tn == "LogTransform":
            return (0.0, math.inf, True, True)
        if tn in ("IntervalTransform", "Interval"):
            a, b = t.args_fn(*rv.owner.inputs)
            lo = -math.inf if a is None else float(np.max(np.asarray(a.eval() if hasattr(a, "eval") else a)))
            hi = math.inf if b is None else float(np.min(np.asarray(b.eval() if hasattr(b, "eval") else b)))
            return (lo, hi, True, True)
        if t is None:
            return (-math.inf, math.inf, True, True)
        raise AuditError(f"method='numerical': {name!r} has the value transform {tn}, which it does not know")

    def _bounds(self, j):
        """The region of coordinate j from the interval constraints and its support:
        ``(lo, hi, lo_open, hi_open)``."""
        name, idx = self.coords[j]
        lo, hi, lo_open, hi_open = self.supports[j]
        size = int(np.prod(self.shapes[name], dtype=int))
        for c in self.constraints:
            if getattr(c, "var", None) != name:
                continue
            if type(c).__name__ == "IntervalConstraint":
                if c.lower is not None and c.lower >= lo:
                    lo, lo_open = float(c.lower), False
                if c.upper is not None and c.upper <= hi:
                    hi, hi_open = float(c.upper), False
            elif type(c).__name__ == "NormBallConstraint" and size == 1:
                wgt = 1.0 if c.weights is None else float(c.weights[0])
                r = c.radius / wgt
                if -r >= lo:
                    lo, lo_open = -r, False
                if r <= hi:
                    hi, hi_open = r, False
        return lo, hi, lo_open, hi_open

    # ------------------------------------------------------------------ grids
    def _wide_axis(self, j, n):
        lo, hi, lo_open, hi_open = self._bounds(j)
        pts = []
        if math.isfinite(lo) and math.isfinite(hi):
            pts.append(np.linspace(lo, hi, n))
            span = hi - lo
            if lo_open:
                pts.append(lo + span * np.logspace(-14, -2, max(n // 8, 6)))
            if hi_open:
                pts.append(hi - span * np.logspace(-14, -2, max(n // 8, 6)))
        elif math.isfinite(lo):
            scale = max(1.0, abs(lo))
            pts.append(lo + scale * np.logspace(-12, 8, n))
        elif math.isfinite(hi):
            scale = max(1.0, abs(hi))
            pts.append(hi - scale * np.logspace(-12, 8, n))
        else:
            half = np.logspace(-6, 8, n // 2)
            pts += [-half, half, np.linspace(-10, 10, n // 4)]
        x = np.unique(np.concatenate(pts))
        if lo_open:
            x = x[x > lo]
        if hi_open:
            x = x[x < hi]
        return x[(x >= lo) & (x <= hi)]

    def _points(self, axes):
        mesh = np.meshgrid(*axes, indexing="ij")
        flat = [m.reshape(-1) for m in mesh]
        vals = {}
        for name in self.names:
            shape = self.shapes[name]
            arr = np.empty((len(flat[0]), *shape))
            for j, (nm, idx) in enumerate(self.coords):
                if nm == name:
                    arr[(slice(None), *idx)] = flat[j]
            vals[name] = arr
        return vals

    def _region(self, axes, vals):
        key = tuple(array_key(a) for a in axes)
        if key in self._region_cache:
            return self._region_cache[key]
        ok = np.ones(len(next(iter(vals.values()))), bool)
        for c in self.constraints:
            ok &= np.asarray(c.contains(vals), bool)
        if len(self._region_cache) > 64:
            self._region_cache.clear()
        self._region_cache[key] = ok
        return ok

    def _call(self, vals, args, n, chunk_cells=4_000_000):
        g = len(next(iter(vals.values())))
        step = max(1, chunk_cells // max(n, 1))
        outs = None
        for s in range(0, g, step):
            part = [vals[nm][s : s + step] for nm in self.names]
            res = self._fn(*part, *args)
            outs = [[r] for r in res] if outs is None else [o + [r] for o, r in zip(outs, res)]
        return [np.concatenate(o, axis=0) for o in outs]

    def evaluate(self, vals, data: dict):
        """``(base (G,), {factor: rows (G, n_j)})`` at the grid points for dataset ``data``."""
        args = [data[c] for c in self.data_names if c not in self.row_public] + list(self.row_public.values())
        n = max(np.asarray(v).shape[0] for v in data.values())
        res = self._call(vals, args, n)
        return res[0], dict(zip(self.factor_names, res[1:]))

    def evaluate_rows(self, vals, data: dict, rows: np.ndarray | None) -> dict:
        """``{factor: (G, len(rows))}``: the row log-likelihoods of ``rows`` only, evaluated on
        those rows alone where that is verified to agree with a full evaluation (``rows=None``:
        every row)."""
        if rows is None:
            return self.evaluate(vals, data)[1]
        if self.subset_ok:
            args = [data[c][rows] for c in self.data_names if c not in self.row_public]
            args += [v[rows] for v in self.row_public.values()]
            try:
                res = self._call(vals, args, len(rows))
                out = dict(zip(self.factor_names, res[1:]))
            except Exception:
                self.subset_ok = False
            else:
                if self._subset_checked:
                    return out
                full = self.evaluate(vals, data)[1]
                same = all(
                    np.allclose(out[f], full[f][:, rows], rtol=1e-10, atol=1e-10, equal_nan=True) for f in self.factor_names
                )
                self._subset_checked = True
                if same:
                    return out
                self.subset_ok = False
        full = self.evaluate(vals, data)[1]
        return {f: v[:, rows] for f, v in full.items()}

    def grid(self, data):
        """An adaptive grid for dataset ``data``: the wide grid (the whole region) and a dense
        grid over the bulk of the posterior; returns ``(axes, vals, log_weights, inside)``."""
        wide = [self._wide_axis(j, self.wide) for j in range(self.dim)]
        vals = self._points(wide)
        inside = self._region(wide, vals)
        base, rows = self.evaluate(vals, data)
        lp = base + sum(r.sum(axis=1) for r in rows.values())
        lp = np.where(inside & np.isfinite(lp), lp, -np.inf)
        if not np.any(np.isfinite(lp)):
            raise AuditError("the truncated posterior is zero on the whole audit grid (an empty region?)")
        top = np.max(lp)
        keep = (lp >= top - 45.0).reshape([len(a) for a in wide])
        axes = []
        for j in range(self.dim):
            other = tuple(k for k in range(self.dim) if k != j)
            on = np.any(keep, axis=other) if other else keep
            ids = np.flatnonzero(on)
            a = wide[j][max(ids[0] - 1, 0)]
            b = wide[j][min(ids[-1] + 1, len(wide[j]) - 1)]
            dense = np.linspace(a, b, self.dense)
            axes.append(np.unique(np.concatenate([wide[j], dense])))
        vals = self._points(axes)
        inside = self._region(axes, vals)
        logw = sum(np.meshgrid(*[np.log(_trapezoid_weights(a)) for a in axes], indexing="ij")).reshape(-1)
        half = [_every_other(a) for a in axes]
        mask_half = np.zeros([len(a) for a in axes], bool)
        mask_half[np.ix_(*half)] = True
        logw_half = np.full(mask_half.shape, -np.inf)
        logw_half[np.ix_(*half)] = sum(np.meshgrid(*[np.log(_trapezoid_weights(a[h])) for a, h in zip(axes, half)], indexing="ij"))
        return axes, vals, logw, logw_half.reshape(-1), inside


    # ------------------------------------------------------------------ pairs (statistical audits)
    def _pair(self, x, y):
        """One grid (built for x) for both datasets: log densities and log normalisers."""
        key = (tuple(array_key(x[c]) for c in sorted(x)), tuple(array_key(y[c]) for c in sorted(y)))
        if getattr(self, "_pair_key", None) != key:
            axes, vals, logw, _, inside = self.grid(x)
            base, rx = self.evaluate(vals, x)
            _, ry = self.evaluate(vals, y)
            lpx = np.where(inside, base + sum(r.sum(axis=1) for r in rx.values()), -np.inf)
            lpy = np.where(inside, base + sum(r.sum(axis=1) for r in ry.values()), -np.inf)
            self._pair_key = key
            self._pair_val = (vals, logw, lpx, lpy, _logsumexp(lpx + logw), _logsumexp(lpy + logw))
        return self._pair_val

    def samplers(self, x, y):
        """Draws from both datasets' truncated posteriors discretised on one grid (each grid point
        with probability density x quadrature weight); the draws carry their grid index."""
        vals, logw, lpx, lpy, lzx, lzy = self._pair(x, y)

        def make(lp, lz):
            prob = np.exp(lp + logw - lz)
            cum = np.cumsum(prob / prob.sum())

            def draw(n, rng):
                i = np.minimum(np.searchsorted(cum, rng.random(n), side="right"), len(cum) - 1)
                return {**{nm: vals[nm][i] for nm in self.names}, "__index": i}

            return draw

        return make(lpx, lzx), make(lpy, lzy)

    def log_ratio_function(self, x, y):
        """``theta -> ln xi(theta|x) - ln xi(theta|y)`` (normalisers from the grid of x)."""
        vals, logw, lpx, lpy, lzx, lzy = self._pair(x, y)
        at_grid = lpx - lpy - (lzx - lzy)

        def log_ratio(draws):
            if "__index" in draws:
                return at_grid[draws["__index"]]
            pts = {nm: np.asarray(draws[nm], float) for nm in self.names}
            ok = np.ones(len(pts[self.names[0]]), bool)
            for c in self.constraints:
                ok &= np.asarray(c.contains(pts), bool)
            _, rx = self.evaluate(pts, x)
            _, ry = self.evaluate(pts, y)
            dl = sum(rx[f].sum(axis=1) - ry[f].sum(axis=1) for f in self.factor_names)
            return np.where(ok, dl - (lzx - lzy), np.nan)

        return log_ratio


def _trapezoid_weights(x):
    w = np.zeros(len(x))
    if len(x) == 1:
        return np.ones(1)
    d = np.diff(x)
    w[:-1] += 0.5 * d
    w[1:] += 0.5 * d
    return w


def _every_other(x):
    idx = np.arange(0, len(x), 2)
    if idx[-1] != len(x) - 1:
        idx = np.r_[idx, len(x) - 1]
    return idx


def _logsumexp(a):
    m = np.max(a)
    if not np.isfinite(m):
        return m
    return float(m + np.log(np.sum(np.exp(a - m))))


class _Identity(dict):
    def __getitem__(self, key):
        return key


def _substituted_rows(gm, space, x, vals, new, rows, cache):
    """Row log-likelihoods (of ``rows`` only) of ``x`` with each changed container set, in every
    row, to its new row value: row ``i`` of the result is row ``i`` of the neighbour that changes
    row ``i`` (factors read one row at a time; checked once per audit)."""
    key = tuple((c, array_key(np.asarray(v))) for c, (_, v) in sorted(new.items()))
    if key not in cache:
        data = dict(x)
        for c, (_, v) in new.items():
            data[c] = np.broadcast_to(np.asarray(v).astype(space.dtypes[c]), x[c].shape).copy()
        cache[key] = gm.evaluate_rows(vals, data, rows)
    return cache[key]


def audit_numerical(pmod, space: DataSpace, bases, given, gm=None) -> dict:
    """The numerical audit: the largest log-ratio of grid-normalised truncated posteriors.

    Parameters
    ----------
    pmod : PrivateModel or TemperedView
        A model with at most :attr:`GridModel.MAX_DIM` free scalar parameters.
    space : DataSpace
        The neighbouring datasets.
    bases : list of (str, dict)
        Base datasets, each tried with all its unit changes (used when ``given`` is None).
    given : list of tuple or None
        The user's pairs (:func:`~pymc_dp.audits.neighbours.given_pairs`).
    gm : GridModel, optional
        Reused when given (its compiled densities are the expensive part).

    Returns
    -------
    dict
        As :func:`~pymc_dp.audits.exact.audit_exact`, with ``error`` the estimated quadrature
        error of the worst pair and ``notes``.
    """
    gm = gm or GridModel(pmod, space)
    best = None
    count = 0
    worst_err = 0.0
    if given is not None:
        items = [(label, x, [(change, None, y)]) for label, x, change, y in given]
    else:
        items = [(label, x, None) for label, x in bases]
    checked_locality = False
    per_base = {}
    for label, x, changes in items:
        axes, vals, logw, logw_half, inside = gm.grid(x)
        base, rows_x = gm.evaluate(vals, x)
        lp_x = np.where(inside, base + sum(r.sum(axis=1) for r in rows_x.values()), -np.inf)
        lz_x, lz_x_half = _logsumexp(lp_x + logw), _logsumexp(lp_x + logw_half)
        cache = {}
        pending = changes if changes is not None else [(ch, new, None) for ch, new in space.changes(x)]
        if space.rows is not None:  # evaluate the touched rows only
            touched = sorted({int(i) for _, new, _ in pending if new is not None for rws, _ in new.values() for i in np.atleast_1d(rws)})
            pos = {r: j for j, r in enumerate(touched)}
            rows_arr = np.array(touched, dtype=int)
            rows_x_t = {f: v[:, rows_arr] for f, v in rows_x.items()}
        else:  # containers of different lengths (attribute unit): whole evaluations
            rows_arr, rows_x_t = None, rows_x
            pos = _Identity()
        for change, new, y in pending:
            if y is not None:  # a given pair: evaluate y directly
                rows_y = gm.evaluate(vals, y)[1]
                dl = sum(rows_x[f].sum(axis=1) - rows_y[f].sum(axis=1) for f in gm.factor_names)
            else:
                rows_s = _substituted_rows(gm, space, x, vals, new, rows_arr, cache)
                containers = set(new)
                cols = [pos[int(i)] for i in np.unique(np.concatenate([np.atleast_1d(new[c][0]) for c in containers]))]
                dl = np.zeros(len(base))
                for f in gm.factor_names:
                    if gm.reads[f] & containers:
                        dl = dl + rows_x_t[f][:, cols].sum(axis=1) - rows_s[f][:, cols].sum(axis=1)
                if not checked_locality:
                    rows_y = gm.evaluate(vals, space.apply(x, new))[1]
                    direct = sum(rows_x[f].sum(axis=1) - rows_y[f].sum(axis=1) for f in gm.factor_names)
                    ok = np.isfinite(direct) & np.isfinite(dl) & inside
                    # rounding scales with the terms summed, not with their difference: far out
                    # on an unbounded region (a Laplace location's) each row's term is ~1e10
                    scale = sum(np.abs(rows_x[f]).sum(axis=1) for f in gm.factor_names)
                    if not np.all(np.abs(direct[ok] - dl[ok]) <= 1e-8 * (1.0 + np.abs(dl[ok]) + 1e-6 * scale[ok])):
                        raise AuditError(
                            "a private factor reads several rows at once: the numerical audit needs row-local factors"
                        )
                    checked_locality = True
            lp_y = np.where(inside, lp_x - dl, -np.inf)
            C = lz_x - _logsumexp(lp_y + logw)
            err = abs(C - (lz_x_half - _logsumexp(lp_y + logw_half)))
            g = np.where(inside, dl - C, np.nan)
            with np.errstate(invalid="ignore"):
                absg = np.where(np.isfinite(g), np.abs(g), np.where(np.isnan(g), -1.0, np.inf))
            j = int(np.argmax(absg))
            value = float(absg[j])
            count += 1
            if id(x) not in per_base or value > per_base[id(x)][0]:
                per_base[id(x)] = (value, label, x, change, new, y)
            if best is None or value > best[0]:
                worst_err = err
                best = (value, float(g[j]), {nm: vals[nm][j].tolist() for nm in gm.names}, label, x,
                        y if y is not None else space.apply(x, new), change, axes, g, j, (lp_x, lp_y))
    if best is None:
        raise AuditError("the search found no neighbouring pair")
    value, signed, theta, label, x, y, change, axes, g, j, dens = best
    witness = Witness(frozen_copy(x), frozen_copy(y), change, signed, theta, None, label)
    notes = (
        f"quadrature: trapezoid on an adaptive grid ({' x '.join(str(len(a)) for a in axes)} points); error of the "
        f"worst pair's log-normaliser difference estimated by halving the grid: {worst_err:.2g}",
    )
    cands = [
        (lab, xx, ch, yy if yy is not None else space.apply(xx, nw))
        for _, lab, xx, ch, nw, yy in sorted(per_base.values(), key=lambda t: -t[0])
    ]
    return {"measured": value, "pairs": count, "witness": witness, "curve": _numerical_curve(gm, axes, g, j, dens),
            "error": float(worst_err), "notes": notes, "candidates": cands}


def _numerical_curve(gm, axes, g, j, dens=None):
    """The log-ratio along the grid line through the worst point (the axis where it varies most)."""
    shape = [len(a) for a in axes]
    g = g.reshape(shape)
    if gm.dim == 1:
        line, x, k = g, axes[0], 0
    else:
        i0, i1 = np.unravel_index(j, shape)
        lines = [g[:, i1], g[i0, :]]
        k = int(np.nanmax(np.abs(lines[1])) > np.nanmax(np.abs(lines[0])))
        line, x = lines[k], axes[k]
    name, idx = gm.coords[k]
    ok = np.isfinite(line)
    out = {"x": x[ok], "y": line[ok], "label": f"{name}{list(idx) if idx else ''}"}
    if dens is not None:
        lines = []
        for lp in dens:
            lp = lp.reshape(shape)
            if gm.dim == 1:
                seg = lp
            else:
                i0, i1 = np.unravel_index(j, shape)
                seg = lp[:, i1] if k == 0 else lp[i0, :]
            seg = seg[ok]
            lines.append(np.exp(seg - np.max(seg)) if np.any(np.isfinite(seg)) else np.zeros_like(seg))
        out["density_x"], out["density_y"] = lines
    return out
