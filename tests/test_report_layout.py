"""pymc_dp.report_layout: a report's content arranged in titled sections, and the sections written
out as text, Markdown and HTML (tests/test_report.py checks the content and the renderings of whole
reports)."""

from __future__ import annotations

import html

import pytest

import pymc_dp
from pymc_dp.privacy_report import report_certificate
from pymc_dp.report_layout import render_html, render_markdown, render_text, sections
from tests import models

KEYS = {"title", "lead", "alerts", "paragraphs", "kv", "tables"}


@pytest.fixture(scope="module")
def coin():
    """Beta(1, 1)-Bernoulli, n = 30, (2, 1e-6)-DP for 10 draws: exact sampler."""
    model, domains = models.coin()
    return pymc_dp.make_private(model, epsilon=2.0, delta=1e-6, draws=10, data=domains, ledger=None)


@pytest.fixture(scope="module", params=["certificate", "release"])
def content(request, coin):
    """The content of a report before any release (the certificate) and of an exact release."""
    if request.param == "certificate":
        return report_certificate(coin.certificate.to_dict()).to_dict()
    return pymc_dp.report(coin.sample(random_seed=1)).to_dict()


def test_sections_are_titled_and_complete(content):
    secs = sections(content)
    titles = [s["title"] for s in secs]
    assert len(secs) >= 5 and all(isinstance(t, str) and t for t in titles)
    assert len(set(titles)) == len(titles)
    assert titles[0] == "Summary" and {"Budget", "Caveats", "Versions"} <= set(titles)
    for s in secs:
        assert set(s) == KEYS, s["title"]
        assert any(s[k] for k in KEYS - {"title"}), f"section {s['title']!r} is empty"
    # sections() reads the content and leaves it as it was
    assert sections(content) == secs


def test_every_rendering_holds_every_section_title_in_order(content):
    secs = sections(content)
    text, md, markup = render_text(secs), render_markdown(secs), render_html(secs)
    for out, line in ((text, "\n{}\n"), (md, "\n## {}\n"), (markup, "<h3>{}</h3>")):
        at = [out.find(line.format(html.escape(s["title"]) if out is markup else s["title"])) for s in secs]
        assert all(i >= 0 for i in at), [s["title"] for s, i in zip(secs, at) if i < 0]
        assert at == sorted(at)  # in the order of the sections
    assert text.startswith("pymc_dp privacy report\n") and md.startswith("# pymc_dp privacy report\n")
    assert markup.startswith('<div class="pymc-dp-report">')


def test_renderings_write_every_part_of_a_section_and_escape_it():
    secs = [{
        "title": "A <b> & c", "lead": "lead text", "alerts": [("danger", "bad | worse"), ("note", "just so")],
        "paragraphs": ["first paragraph"], "kv": [("key | 1", "value <1>")],
        "tables": [{"caption": "cap", "headers": ["h1", "h|2"], "rows": [["1.5", "x|y"]]}],
    }]
    text, md, markup = render_text(secs), render_markdown(secs), render_html(secs)
    for out in (text, md):
        assert "lead text" in out and "first paragraph" in out and "cap" in out and "just so" in out
    assert "WARNING: bad | worse" in text and "Note: just so" in text
    assert "> **WARNING:** bad \\| worse" in md and "| key \\| 1 | value <1> |" in md
    assert "| h1 | h\\|2 |" in md and "| 1.5 | x\\|y |" in md
    assert "<h3>A &lt;b&gt; &amp; c</h3>" in markup and "<b>" not in markup
    assert '<div class="alert danger">bad | worse</div>' in markup and "value &lt;1&gt;" in markup
    assert '<td class="num">1.5</td>' in markup
