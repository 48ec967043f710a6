"""The ``nat-verify`` command line: parse options, call the library, hand results to report/.

Exit codes (DESIGN.md): 0 all hold (``diff``: equivalent), 1 a violation or difference, 2 bad
usage or bad input, 3 inconclusive with no violation.
"""

from __future__ import annotations

import ipaddress
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click

from nat_verify.model.cluster import Cluster
from nat_verify.model.outcome import Trace
from nat_verify.model.packet import PROTOS, Packet, parse_endpoint
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.parse import DumpError, parse_file
from nat_verify.netfilter.ruleset import Ruleset

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_VIOLATION, EXIT_INPUT, EXIT_INCONCLUSIVE = 0, 1, 2, 3


class InputError(Exception):
    """Bad input detected by the CLI itself (``where`` is ``file:line`` or an option name)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}" if where else message)


def fail(message: str) -> NoReturn:
    click.echo(f"nat-verify: error: {message}", err=True)
    sys.exit(EXIT_INPUT)


def guarded(fn: F) -> F:
    """Turn every known input error into one message and exit code 2, never a traceback."""
    import functools

    from nat_verify.kube.errors import KubeInputError
    from nat_verify.kubeproxy.errors import CompileError
    from nat_verify.report.document import ReportInputError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (DumpError, KubeInputError, CompileError, ReportInputError, InputError) as e:
            fail(str(e))
        except Exception as e:  # the oracle's own refusals (no kernel, restore refused)
            if type(e).__name__ in ("KernelUnavailable", "OracleUnsupported", "RestoreError"):
                fail(str(e))
            raise
        except BrokenPipeError:
            sys.exit(EXIT_OK)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="nat-verify")
def main() -> None:
    """Verify Kubernetes Service networking: proofs and counterexamples for kube-proxy's rules."""


# -- shared helpers ---------------------------------------------------------------------------


def load_cluster(path: Sequence[str]) -> Cluster:
    from nat_verify.kube.loader import load_cluster as _load

    return _load(list(path))


def load_dump(path: str, family: int | None = None) -> Ruleset:
    from nat_verify.netfilter.validate import validate_ruleset

    ruleset = parse_file(path, family=family)
    validate_ruleset(ruleset)
    return ruleset


def require_node(cluster: Cluster, node: str) -> None:
    if node not in {n.name for n in cluster.nodes}:
        names = ", ".join(n.name for n in cluster.nodes) or "none"
        raise InputError("--node", f"no node {node!r} in the cluster (nodes: {names})")


def context_from_options(
    cluster: Cluster | None, node: str | None, node_ips: Sequence[str], pod_cidrs: Sequence[str], family: int
) -> NodeContext:
    if cluster is not None:
        from nat_verify.check.nodectx import node_context

        if not node:
            raise InputError("--node", "--cluster needs --node NAME")
        require_node(cluster, node)
        return node_context(cluster, node, family)
    if not node_ips:
        raise InputError("", "say which node: --cluster PATH --node NAME, or --node-ip IP (repeatable) [--pod-cidr CIDR]")
    try:
        addrs = tuple(ipaddress.ip_address(a) for a in node_ips)
        nets = tuple(ipaddress.ip_network(c, strict=False) for c in pod_cidrs)
    except ValueError as e:
        raise InputError("--node-ip/--pod-cidr", str(e)) from None
    return NodeContext(family=family, addresses=addrs, pod_cidrs=nets, local_pod_cidrs=nets, name=node or "")


def make_packet(
    src: str, dst: str, proto: str, origin: str | None, ctx: NodeContext, where: str = "--src/--dst"
) -> Packet:
    try:
        s_ip, s_port = parse_endpoint(src)
        d_ip, d_port = parse_endpoint(dst, port_required=proto != "icmp")
    except ValueError as e:
        raise InputError(where, str(e)) from None
    if s_ip.version != d_ip.version:
        raise InputError(where, f"source {src} and destination {dst} are of different IP families")
    if proto not in (*PROTOS, "icmp"):
        raise InputError(where, f"expected proto tcp, udp or sctp, received {proto!r}")
    if origin is None:
        origin = ctx.origin_of(s_ip)
    if origin not in ("external", "pod", "host"):
        raise InputError(where, f"expected from external, pod or host, received {origin!r}")
    return Packet(src=s_ip, dst=d_ip, dport=d_port, sport=s_port or 40000, proto=proto, origin=origin)  # type: ignore[arg-type]


def read_packets(path: str, ctx: NodeContext, default_proto: str) -> Iterator[Packet]:
    try:
        f = open(path, encoding="utf-8") if path != "-" else sys.stdin  # noqa: SIM115
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror}") from None
    with f:
        for no, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{no}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(where, f"not JSON: {e.msg}") from None
            if not isinstance(obj, dict) or "src" not in obj or "dst" not in obj:
                raise InputError(where, 'expected an object like {"src": "10.0.0.2", "dst": "172.30.0.41:80"}')
            yield make_packet(
                str(obj["src"]), str(obj["dst"]), str(obj.get("proto", default_proto)), obj.get("from"), ctx, where
            )


def dump_family(path: str, src: str | None) -> int | None:
    """The family asked for by the packet, if any (a dump of the other family is bad input)."""
    if not src:
        return None
    try:
        return parse_endpoint(src)[0].version
    except ValueError:
        return None


# -- trace ------------------------------------------------------------------------------------


@main.command()
@click.argument("dump", type=click.Path(dir_okay=False))
@click.option("--cluster", "cluster_path", multiple=True, help="Kubernetes YAML (file or directory) describing the cluster")
@click.option("--node", help="the node whose rules DUMP holds (with --cluster)")
@click.option("--node-ip", "node_ips", multiple=True, help="an address of the node (repeatable), without --cluster")
@click.option("--pod-cidr", "pod_cidrs", multiple=True, help="the pod network (repeatable), without --cluster")
@click.option("--src", help="source IP[:PORT]")
@click.option("--dst", help="destination IP:PORT")
@click.option("--proto", default="tcp", type=click.Choice(["tcp", "udp", "sctp"]), show_default=True)
@click.option("--from", "origin", type=click.Choice(["external", "pod", "host"]), help="where the packet enters (inferred from --src when omitted)")
@click.option("--packets", "packets_file", help="JSON Lines file of packets ('-' for stdin); one result per line")
@click.option("--kernel", is_flag=True, help="answer from the real kernel (a throwaway network namespace) instead of the model")
@click.option("--format", "fmt", default="text", type=click.Choice(["text", "json"]), show_default=True)
@click.option("-v", "--verbose", is_flag=True, help="list every rule of every outcome with its dump line")
@guarded
def trace(
    dump: str,
    cluster_path: tuple[str, ...],
    node: str | None,
    node_ips: tuple[str, ...],
    pod_cidrs: tuple[str, ...],
    src: str | None,
    dst: str | None,
    proto: str,
    origin: str | None,
    packets_file: str | None,
    kernel: bool,
    fmt: str,
    verbose: bool,
) -> None:
    """Run packets through a node's rules: every outcome, its probability and its rule path."""
    if not packets_file and not (src and dst):
        raise InputError("", "give --src and --dst, or --packets FILE.jsonl")
    ruleset = load_dump(dump, dump_family(dump, src))
    cluster = load_cluster(cluster_path) if cluster_path else None
    ctx = context_from_options(cluster, node, node_ips, pod_cidrs, ruleset.family)
    if packets_file:
        packets: Sequence[Packet] | Iterator[Packet] = read_packets(packets_file, ctx, proto)
    else:
        assert src and dst
        packets = [make_packet(src, dst, proto, origin, ctx)]
    if kernel:
        from nat_verify.oracle.bridge import kernel_traces

        traces: Iterator[Trace] = kernel_traces(dump, ruleset, ctx, packets, cluster=cluster)
    else:
        it = Interpreter(ruleset, ctx)
        traces = (it.trace(p) for p in packets)
    code = EXIT_OK
    source_lines = Path(dump).read_text(errors="replace").split("\n") if verbose else None
    for tr in traces:
        if tr.inconclusive:
            code = EXIT_INCONCLUSIVE
        if fmt == "json":
            click.echo(json.dumps(tr.to_json(), separators=(",", ":") if packets_file else None))
        else:
            from nat_verify.report.text import render_trace_text, want_color

            click.echo(
                render_trace_text(tr, verbose=verbose, color=want_color(sys.stdout), source_lines=source_lines),
                nl=False,
            )
    sys.exit(code)


# -- verify / check -----------------------------------------------------------------------------


def _progress(enabled: bool) -> Any:
    """A rich progress bar on stderr when it is a terminal; otherwise nothing."""
    if not enabled or not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=Console(stderr=True), transient=True,
    )  # fmt: skip


def _emit(report: dict[str, Any], fmt: str, output: str | None) -> None:
    from nat_verify.report import render
    from nat_verify.report.text import render_text, want_color

    if fmt == "json":
        text = json.dumps(report, indent=2) + "\n"
    elif fmt == "text":
        text = render_text(report, color=output is None and want_color(sys.stdout))
    else:
        text = render(report, fmt)
    if output:
        _write_atomically(output, text)
    else:
        click.echo(text, nl=not text.endswith("\n"))


def _write_atomically(path: str, text: str) -> None:
    """Write all or nothing: a half-written report is worse than none."""
    import os
    import tempfile

    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=str(target.parent or Path(".")))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, target)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise InputError(path, f"cannot write: {e.strerror}") from None


REPORT_FORMATS = ["text", "json", "md", "html", "sarif", "junit"]


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--random", "random_n", default=0, show_default=True, help="also verify N clusters generated by Hypothesis")
@click.option("--seed", default=0, show_default=True, help="seed for --random")
@click.option("--format", "fmt", default="text", type=click.Choice(REPORT_FORMATS), show_default=True)
@click.option("-o", "--output", help="write the report to this file instead of stdout")
@guarded
def verify(paths: tuple[str, ...], random_n: int, seed: int, fmt: str, output: str | None) -> None:
    """Every invariant on every node of every cluster under PATHS (default: specs/)."""
    from nat_verify.check import CheckReport, verify_cluster
    from nat_verify.kube.loader import load_clusters
    from nat_verify.report import build_report

    clusters = load_clusters(list(paths) or ["specs"])
    if random_n:
        from nat_verify.strategies import sample_clusters

        clusters += sample_clusters(random_n, seed=seed)
    total = CheckReport((), ())
    bar = _progress(True)
    if bar is not None:
        with bar:
            task = bar.add_task("verifying", total=len(clusters))
            for c in clusters:
                bar.update(task, description=f"verifying {c.name}")
                total = total.merged(verify_cluster(c, progress=lambda _d: bar.refresh()))
                bar.advance(task)
    else:
        for c in clusters:
            total = total.merged(verify_cluster(c))
    report = build_report(
        total.results, total.findings, command="verify", clusters=[c.name for c in clusters],
        meta={"packets": total.packets},
    )  # fmt: skip
    _emit(report, fmt, output)
    sys.exit(report["summary"]["exit_code"])


@main.command()
@click.argument("dump", type=click.Path(dir_okay=False))
@click.option("--cluster", "cluster_path", multiple=True, required=True, help="the cluster's objects (YAML/JSON files or directories)")
@click.option("--node", required=True, help="the node the dump was taken on")
@click.option("--format", "fmt", default="text", type=click.Choice(REPORT_FORMATS), show_default=True)
@click.option("-o", "--output", help="write the report to this file instead of stdout")
@guarded
def check(dump: str, cluster_path: tuple[str, ...], node: str, fmt: str, output: str | None) -> None:
    """A real node's iptables-save dump against the cluster's objects."""
    from nat_verify.check import check_ruleset
    from nat_verify.report import build_report

    ruleset = load_dump(dump)
    cluster = load_cluster(cluster_path)
    require_node(cluster, node)
    rep = check_ruleset(cluster, node, ruleset)
    report = build_report(
        rep.results, rep.findings, command="check", clusters=[cluster.name or ",".join(cluster_path)],
        meta={"dump": dump, "node": node, "packets": rep.packets},
    )  # fmt: skip
    _emit(report, fmt, output)
    sys.exit(report["summary"]["exit_code"])


# -- compile ----------------------------------------------------------------------------------


@main.command("compile")
@click.argument("path", nargs=-1, required=True, type=click.Path())
@click.option("--node", required=True, help="the node to compile for")
@click.option("--family", default="ipv4", type=click.Choice(["ipv4", "ipv6"]), show_default=True)
@click.option("--style", default="restore", type=click.Choice(["restore", "save"]), show_default=True,
              help="restore: as kube-proxy writes it; save: as iptables-save prints it")  # fmt: skip
@guarded
def compile_cmd(path: tuple[str, ...], node: str, family: str, style: str) -> None:
    """The rules kube-proxy (iptables mode) writes on NODE for the cluster in PATH."""
    from nat_verify.kubeproxy import compile_node
    from nat_verify.netfilter.parse import parse
    from nat_verify.netfilter.render import render
    from nat_verify.netfilter.saveform import to_save_form

    cluster = load_cluster(path)
    require_node(cluster, node)
    fam = 6 if family == "ipv6" else 4
    text = compile_node(cluster, node, fam)
    if style == "save":
        tool = "ip6tables-save" if fam == 6 else "iptables-save"
        text = render(to_save_form(parse(text, source="<compiled>", family=fam)), header=f"Generated by nat-verify as {tool} prints it")
    click.echo(text, nl=False)


# -- diff -------------------------------------------------------------------------------------


@main.command()
@click.argument("dump_a", type=click.Path(dir_okay=False))
@click.argument("dump_b", type=click.Path(dir_okay=False))
@click.option("--cluster", "cluster_path", multiple=True, help="Kubernetes YAML describing the cluster")
@click.option("--node", help="the node (with --cluster)")
@click.option("--node-ip", "node_ips", multiple=True, help="an address of the node (repeatable), without --cluster")
@click.option("--pod-cidr", "pod_cidrs", multiple=True, help="the pod network (repeatable), without --cluster")
@click.option("--format", "fmt", default="text", type=click.Choice(["text", "json"]), show_default=True)
@guarded
def diff(
    dump_a: str, dump_b: str, cluster_path: tuple[str, ...], node: str | None, node_ips: tuple[str, ...],
    pod_cidrs: tuple[str, ...], fmt: str,
) -> None:  # fmt: skip
    """Are two dumps equivalent for every packet? Exit 0 if so, 1 with one packet that differs."""
    from nat_verify.check.equivalence import equivalent

    a = load_dump(dump_a)
    b = load_dump(dump_b, a.family)
    cluster = load_cluster(cluster_path) if cluster_path else None
    ctx = context_from_options(cluster, node, node_ips, pod_cidrs, a.family)
    res = equivalent(a, b, ctx)
    d = res.difference
    if fmt == "json":
        doc: dict[str, Any] = d.to_json() if d else {"equivalent": True}
        doc.update({"format": "nat_verify.diff/v1", "classes": res.classes, "inconclusive": res.inconclusive})
        click.echo(json.dumps(doc, indent=2))
    elif d is None:
        click.echo(f"equivalent: {res.classes} packet classes compared ({res.inconclusive} inconclusive)")
    else:
        from nat_verify.model.outcome import Trace
        from nat_verify.report.text import render_trace_text

        click.echo(f"different after {res.classes} packet classes: {d.packet}")
        click.echo(f"--- {dump_a}")
        click.echo(render_trace_text(Trace(d.packet, d.a)), nl=False)
        click.echo(f"+++ {dump_b}")
        click.echo(render_trace_text(Trace(d.packet, d.b)), nl=False)
    sys.exit(EXIT_VIOLATION if d else EXIT_INCONCLUSIVE if res.inconclusive else EXIT_OK)


# -- oracle -----------------------------------------------------------------------------------


@main.command()
@click.argument("dump", type=click.Path(dir_okay=False))
@click.option("--cluster", "cluster_path", multiple=True, help="Kubernetes YAML describing the cluster")
@click.option("--node", help="the node whose rules DUMP holds (with --cluster)")
@click.option("--node-ip", "node_ips", multiple=True, help="an address of the node (repeatable), without --cluster")
@click.option("--pod-cidr", "pod_cidrs", multiple=True, help="the pod network (repeatable), without --cluster")
@click.option("--packets", "packets_file", help="JSON Lines file of packets; default: random packets aimed at the dump's addresses")
@click.option("--random", "random_n", default=200, show_default=True, help="how many random packets without --packets")
@click.option("--seed", default=0, show_default=True)
@click.option("--probes", default=1, show_default=True, help="first connections per packet")
@click.option("--backend", default="nft", type=click.Choice(["nft", "legacy"]), show_default=True)
@click.option("--proto", default="tcp", type=click.Choice(["tcp", "udp", "sctp"]), show_default=True)
@click.option("--format", "fmt", default="text", type=click.Choice(["text", "json"]), show_default=True)
@guarded
def oracle(
    dump: str, cluster_path: tuple[str, ...], node: str | None, node_ips: tuple[str, ...], pod_cidrs: tuple[str, ...],
    packets_file: str | None, random_n: int, seed: int, probes: int, backend: str, proto: str, fmt: str,
) -> None:  # fmt: skip
    """Every disagreement between the model and the real kernel on DUMP (needs root)."""
    from nat_verify.oracle import kernel_available
    from nat_verify.oracle.differential import run_oracle
    from nat_verify.oracle.targets import packets_for_ruleset

    reason = kernel_available()
    if reason is not None:
        raise InputError("", f"the kernel oracle is unavailable here: {reason}")
    ruleset = load_dump(dump)
    cluster = load_cluster(cluster_path) if cluster_path else None
    ctx = context_from_options(cluster, node, node_ips, pod_cidrs, ruleset.family)
    pkts = list(read_packets(packets_file, ctx, proto)) if packets_file else packets_for_ruleset(ruleset, ctx, random_n, seed)
    found = run_oracle(ruleset, ctx, pkts, probes=probes, backend=backend)
    disagree = [d for d in found if d.kind == "disagree"]
    if fmt == "json":
        click.echo(json.dumps({"format": "nat_verify.oracle/v1", "packets": len(pkts), "probes": probes,
                               "disagreements": [d.to_json() for d in found]}, indent=2))  # fmt: skip
    else:
        for d in found:
            click.echo(f"{d.kind}: {d.message}")
        click.echo(f"nat-verify oracle: {len(pkts)} packets x {probes} probes, {len(disagree)} disagreement(s), "
                   f"{sum(d.kind == 'inconclusive' for d in found)} inconclusive, {sum(d.kind == 'unprobed' for d in found)} not probed")  # fmt: skip
    sys.exit(EXIT_VIOLATION if disagree else EXIT_INCONCLUSIVE if found else EXIT_OK)


# -- report -----------------------------------------------------------------------------------


@main.command()
@click.argument("result", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", required=True, type=click.Choice(["md", "html", "sarif", "junit", "text", "json"]))
@click.option("-o", "--output", help="the file to write (default: stdout)")
@guarded
def report(result: str, fmt: str, output: str | None) -> None:
    """Render a verify/check JSON result as Markdown, HTML, SARIF or JUnit."""
    from nat_verify.report import load_report

    doc = load_report(result)
    _emit(doc, fmt, output)


if __name__ == "__main__":  # pragma: no cover
    main()
