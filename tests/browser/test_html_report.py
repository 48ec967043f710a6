"""The HTML report of the README's broken node, as a person sees it in a real browser.

``nat-verify check broken.save --cluster specs/web-svc.yaml --node node-1 --report out.html``:
node-1's rules without the KUBE-EXT rule that marks external NodePort traffic for masquerade.
By the README's reasoning the report has NV004 findings (NodePort traffic DNATed to 10.42.1.7:8080
or 10.42.2.3:8080 keeps its client IP) and one NV015 finding (the missing rule). The page is
opened at a desktop and a phone width; it must raise no console error, load nothing from
elsewhere, never scroll sideways, and show each path as a picture with its faulty step marked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nat_verify.cli import main

pytestmark = pytest.mark.browser

SPECS = Path(__file__).resolve().parents[2] / "specs"
WEB = str(SPECS / "web-svc.yaml")
MASQ_RULE = "masquerade traffic for default/web-svc:http external destinations"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}


def run(*args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args))
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout


@pytest.fixture(scope="module")
def page_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("html")
    code, out = run("compile", WEB, "--node", "node-1", "--style", "save")
    assert code == 0
    (d / "broken.save").write_text("".join(ln for ln in out.splitlines(True) if MASQ_RULE not in ln))
    code, _ = run("check", str(d / "broken.save"), "--cluster", WEB, "--node", "node-1",
                  "--report", str(d / "out.html"))  # fmt: skip
    assert code == 1
    return d / "out.html"


def _shots_dir(tmp: Path) -> Path:
    # NAT_VERIFY_SCREENSHOTS=DIR keeps the screenshots for a person to look at
    keep = os.environ.get("NAT_VERIFY_SCREENSHOTS")
    return Path(keep) if keep else tmp


@pytest.mark.parametrize("device", sorted(WIDTHS))
def test_report_in_a_browser(browser: Any, page_file: Path, tmp_path: Path, device: str) -> None:
    width, height = WIDTHS[device]
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    shots = _shots_dir(tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(shots / f"report-{device}.png"), full_page=True)

    assert errors == []
    assert requests == [page_file.as_uri()]  # nothing loaded from elsewhere
    # no sideways scrolling of the page, and the summary table fits without its scroller
    doc_w, view_w = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert doc_w <= view_w, f"{device}: the page is {doc_w}px wide in a {view_w}px window"
    table_w, box_w = page.evaluate(
        "(() => { const s = document.querySelector('table.summary').parentElement;"
        " return [s.scrollWidth, s.clientWidth]; })()"
    )
    assert table_w <= box_w, f"{device}: the summary table needs {table_w}px of {box_w}px"
    # every finding with a packet has its path drawn, inside the window, the faulty step marked
    cards = page.locator("section.finding")
    assert cards.count() >= 3
    pictures = page.locator("section.finding svg.path")
    assert pictures.count() == cards.count() - 1  # NV015 (a missing rule) has no packet
    for i in range(pictures.count()):
        box = pictures.nth(i).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= view_w
        assert pictures.nth(i).locator("rect.fault").count() == 1
    # NV004: the marked step is nat POSTROUTING, where the packet leaves without masquerade
    first = page.locator("section.finding", has_text="NV004").first
    fault_text = first.locator("svg.path text").all_text_contents()
    assert any(t == "nat POSTROUTING" for t in fault_text)
    # "expected" reads as plain text, not in the alarm colour of a violation
    style = page.evaluate(
        "(() => { const dd = [...document.querySelectorAll('section.finding dl.facts dt')]"
        ".find(dt => dt.textContent === 'expected').nextElementSibling;"
        " const s = getComputedStyle(dd); return [s.color, s.fontWeight]; })()"
    )
    assert style[0] != "rgb(207, 34, 46)" and int(style[1]) < 600, style
    # the endpoint chart: web-svc's two endpoints, a bar each
    assert page.locator("svg.shares rect.bar").count() == 2
    page.close()


@pytest.mark.parametrize("device", sorted(WIDTHS))
def test_explain_page_in_a_browser(browser: Any, tmp_path: Path, device: str) -> None:
    # `nat-verify explain default/web-svc`: 7 flows of 2 outcomes each (README's web-svc: two
    # endpoints; ClusterIP and NodePort from a pod, the node and outside; localhost NodePort)
    code, _ = run("explain", "default/web-svc", "--cluster", WEB, "--report", str(tmp_path / "e.html"))
    assert code == 0
    width, height = WIDTHS[device]
    page = browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto((tmp_path / "e.html").as_uri())
    page.screenshot(path=str(_shots_dir(tmp_path) / f"explain-{device}.png"), full_page=True)
    assert errors == []
    doc_w, view_w = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert doc_w <= view_w
    assert page.locator("svg.path").count() == 14
    page.close()
