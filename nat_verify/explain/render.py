"""The explanation (``nat_verify.explain/v1``) as text, Markdown, HTML, SARIF, JUnit or JSON.

Every renderer is a pure function of the document. Paths are drawn from each outcome's trace by
``report.flow`` (the SVG of the HTML, the Mermaid chart of the Markdown), as in check reports;
every string passes through the same escaping as the reports.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from nat_verify.explain.flows import CLASS_WORDS, ORIGIN_WORDS
from nat_verify.model.outcome import probability_text
from nat_verify.report.document import json_text
from nat_verify.report.flow import flow
from nat_verify.report.graph import flow_mermaid
from nat_verify.report.junit import xml_text
from nat_verify.report.markdown import md_code, md_text
from nat_verify.report.sarif import SARIF_SCHEMA
from nat_verify.report.svg import esc, path_svg
from nat_verify.report.text import _print
from nat_verify.report.words import packet_json_text, visible

Doc = Mapping[str, Any]


def flow_title(f: Mapping[str, Any]) -> str:
    src = str(f["packet"]["src"]).rsplit(":", 1)[0]
    return (
        f"{CLASS_WORDS.get(f['class'], f['class'])} {f['address']}/{f['proto']} "
        f"{ORIGIN_WORDS.get(f['origin'], f['origin'])} ({src})"
    )


def _walk(o: Mapping[str, Any]) -> str:
    labels = [h["label"] for h in o["hops"] if h["kind"] in ("hook", "chain", "nat", "routing")]
    return " -> ".join(labels)


def _changes(o: Mapping[str, Any]) -> list[str]:
    return [h["edge"] for h in o["hops"] if h.get("edge") and h["kind"] != "address"]


def _verdict(o: Mapping[str, Any]) -> str:
    chance = Fraction(str(o.get("probability", "1")))
    p = "always" if chance == 1 else f"p={probability_text(chance)}"
    ep = o.get("endpoint") or {}
    who = ", ".join(x for x in (ep.get("pod", ""), f"on {ep['node']}" if ep.get("node") else "") if x)
    end = next((h["label"] for h in reversed(o["hops"]) if h["kind"] == "end"), o.get("verdict", ""))
    return f"{p}  {end}" + (f" ({who})" if who else "")


def _pods_line(p: Mapping[str, Any]) -> str:
    ports = "; ".join(
        f"{x['service_port']} -> {x['resolved']}" + (f" (container port {x['container_port']})" if x["container_port"] else "")
        if x["resolved"] is not None else f"{x['service_port']}: no port ({x['reason']})"
        for x in p["ports"]
    )  # fmt: skip
    where = f"on {p['node']}" if p["node"] else "unscheduled"
    return f"Pod {p['pod']} {p['ip'] or '(no IP)'} {where}: {p['readiness']}; {ports}"


def _slice_line(s: Mapping[str, Any]) -> str:
    eps = "; ".join(
        f"{e['address']} {'ready' if e['ready'] else 'not ready'}"
        + (" terminating" if e["terminating"] else "") + (f" on {e['node']}" if e["node"] else "")
        for e in s["endpoints"]
    )  # fmt: skip
    origin = "" if s["origin"] == "given" else f", {s['origin']} from the Pods"
    return f"EndpointSlice {s['name']} ({s['location']}{origin}): {eps or 'no endpoints'}; ports {', '.join(s['ports']) or '-'}"


def _selector(svc: Mapping[str, Any]) -> str:
    sel = svc.get("selector")
    if sel is None:
        return "no selector: kube-proxy uses the EndpointSlices someone else wrote"
    return ", ".join(f"{k}={v}" for k, v in sel.items()) or "{} (selects every Pod of the namespace)"


# --- text ---------------------------------------------------------------------------------------


def render_explain_text(doc: Doc, *, width: int = 80) -> str:
    items: list[Any] = []

    def head(text: str) -> None:
        items.append(Text(""))
        items.append(Text(visible(text), style="bold underline"))

    def line(text: str, indent: int = 2) -> None:
        items.append(Padding(Text(visible(text)), (0, 0, 0, indent)))

    items.append(Text(visible(f"nat-verify explain {doc['target']} on {doc['node']}"), style="bold"))
    items.append(Text(visible(f"rules: {doc['rules']}")))
    head("What it is")
    for w in doc["what"]:
        line(w)
    for svc in doc["services"]:
        head(f"{svc['service']}: which Pods, and why")
        line(f"selector: {_selector(svc)}")
        for p in svc["pods"]:
            line(_pods_line(p))
        if not svc["pods"] and svc.get("selector") is not None:
            line("no Pod matches the selector")
        for m in svc["near_misses"]:
            line(f"almost: {m}")
        for s in svc["slices"]:
            line(_slice_line(s) + " (kube-proxy reads this)")
        if not svc["slices"]:
            line("no EndpointSlice: kube-proxy has no endpoint for this Service")
    head(f"Flows on {doc['node']}")
    for f in doc["flows"]:
        items.append(Padding(Text(visible(flow_title(f)), style="bold"), (0, 0, 0, 2)))
        grid = Table.grid(padding=(0, 1), pad_edge=False)
        grid.add_column(no_wrap=True)
        grid.add_column(ratio=1, overflow="fold")
        for o in f["outcomes"]:
            grid.add_row("*", visible(_verdict(o)))
            grid.add_row("", visible(_walk(o)))
            for c in _changes(o):
                grid.add_row("", visible(c))
            if o.get("client"):
                grid.add_row("", visible(o["client"]))
        items.append(Padding(grid, (0, 0, 0, 4)))
    if doc["facts"]:
        head("What these flows show")
        grid = Table.grid(padding=(0, 1), pad_edge=False)
        grid.add_column(no_wrap=True)
        grid.add_column(ratio=1, overflow="fold")
        for fact in doc["facts"]:
            grid.add_row("-", visible(fact["text"]))
            if fact.get("evidence"):
                grid.add_row("", Text(visible(fact["evidence"]), style="dim"))
        items.append(Padding(grid, (0, 0, 0, 2)))
    return _print(items, color=False, width=width, soft_wrap=False)


# --- Markdown -----------------------------------------------------------------------------------


def render_explain_markdown(doc: Doc) -> str:
    out = [f"# nat-verify explain {md_code(doc['target'])} on {md_code(doc['node'])}", "", md_text(doc["rules"]), ""]
    out += ["## What it is", ""] + [f"- {md_text(w)}" for w in doc["what"]] + [""]
    for svc in doc["services"]:
        out += [f"## {md_code(svc['service'])}: which Pods, and why", "", f"- selector: {md_text(_selector(svc))}"]
        out += [f"- {md_text(_pods_line(p))}" for p in svc["pods"]]
        out += [f"- almost: {md_text(m)}" for m in svc["near_misses"]]
        out += [f"- {md_text(_slice_line(s))} (kube-proxy reads this)" for s in svc["slices"]]
        out.append("")
    out += [f"## Flows on {md_code(doc['node'])}", ""]
    for f in doc["flows"]:
        out += [f"### {md_text(flow_title(f))}", ""]
        for o in f["outcomes"]:
            out.append(f"- **{md_text(_verdict(o))}**" + (f": {md_text(o['client'])}" if o.get("client") else ""))
            out += ["", "```mermaid", flow_mermaid(flow(o["trace"])).rstrip("\n"), "```", ""]
    if doc["facts"]:
        out += ["## What these flows show", ""]
        for fact in doc["facts"]:
            ev = f" ({md_code(fact['evidence'])})" if fact.get("evidence") else ""
            out.append(f"- {md_text(fact['text'])}{ev}")
        out.append("")
    return "\n".join(out)


# --- HTML ---------------------------------------------------------------------------------------


def render_explain_html(doc: Doc) -> str:
    from nat_verify.report.html import _CSS

    body = [f"<h1>nat-verify explain <code>{esc(doc['target'])}</code></h1>",
            f"<p>on <code>{esc(doc['node'])}</code>: {esc(doc['rules'])}</p>", "<h2>What it is</h2><ul>"]  # fmt: skip
    body += [f"<li>{esc(w)}</li>" for w in doc["what"]] + ["</ul>"]
    for svc in doc["services"]:
        body += [f"<h2><code>{esc(svc['service'])}</code>: which Pods, and why</h2><ul>",
                 f"<li>selector: <code>{esc(_selector(svc))}</code></li>"]  # fmt: skip
        body += [f"<li>{esc(_pods_line(p))}</li>" for p in svc["pods"]]
        body += [f"<li>almost: {esc(m)}</li>" for m in svc["near_misses"]]
        body += [f"<li>{esc(_slice_line(s))} (kube-proxy reads this)</li>" for s in svc["slices"]]
        body.append("</ul>")
    body.append(f"<h2>Flows on <code>{esc(doc['node'])}</code></h2>")
    for f in doc["flows"]:
        body.append(f'<section class="finding card-note"><h3>{esc(flow_title(f))}</h3>')
        for o in f["outcomes"]:
            client = f" {esc(o['client'])}" if o.get("client") else ""
            body += [f"<p><strong>{esc(_verdict(o))}</strong>{client}</p>", "<figure>",
                     path_svg(flow(o["trace"]), title=f"path of {packet_json_text(f['packet'])}"), "</figure>"]  # fmt: skip
        body.append("</section>")
    if doc["facts"]:
        body.append("<h2>What these flows show</h2><ul>")
        for fact in doc["facts"]:
            ev = f"<br><code>{esc(fact['evidence'])}</code>" if fact.get("evidence") else ""
            body.append(f"<li>{esc(fact['text'])}{ev}</li>")
        body.append("</ul>")
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>nat-verify explain {esc(doc['target'])}</title>", f"<style>{_CSS}</style>", "</head>",
        "<body>", *body, "</body>", "</html>", "",
    ])  # fmt: skip


# --- SARIF and JUnit ----------------------------------------------------------------------------


def render_explain_sarif(doc: Doc) -> str:
    """The facts as SARIF notes (rule ``explain``), for tools that collect SARIF."""
    results = [
        {"ruleId": "explain", "ruleIndex": 0, "level": "note", "kind": "informational",
         "message": {"text": f["text"] + (f" ({f['evidence']})" if f.get("evidence") else "")},
         "properties": {"fact": f["fact"], "packet": f["packet"]}}
        for f in doc["facts"]
    ]  # fmt: skip
    rule = {"id": "explain", "name": "Explain", "shortDescription": {"text": "What the node's rules do to a Service's packets"}}
    tool = doc.get("tool", {})
    run = {"tool": {"driver": {"name": "nat-verify", "version": str(tool.get("version", "")), "rules": [rule]}},
           "results": results, "properties": {"target": doc["target"], "node": doc["node"]}}  # fmt: skip
    return json_text({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]})


def render_explain_junit(doc: Doc) -> str:
    """One test case per flow (they describe; none fails), the flow's text as its output."""
    root = ET.Element("testsuites", name="nat-verify explain")
    suite = ET.SubElement(root, "testsuite", name=xml_text(doc["target"]))
    for f in doc["flows"]:
        case = ET.SubElement(suite, "testcase", name=xml_text(flow_title(f)), classname="nat_verify.explain")
        case.set("time", "0")
        text = "\n".join(f"{_verdict(o)}\n  {_walk(o)}" + "".join(f"\n  {c}" for c in _changes(o)) for o in f["outcomes"])
        ET.SubElement(case, "system-out").text = xml_text(text)
    n = str(len(doc["flows"]))
    for el in (root, suite):
        el.set("tests", n)
        el.set("failures", "0")
        el.set("errors", "0")
        el.set("skipped", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


RENDERERS = {
    "text": render_explain_text,
    "md": render_explain_markdown,
    "html": render_explain_html,
    "sarif": render_explain_sarif,
    "junit": render_explain_junit,
    "json": json_text,
}


def render_explain(doc: Doc, fmt: str) -> str:
    return RENDERERS[fmt](doc)

