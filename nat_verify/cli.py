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

import attrs
import click

from nat_verify.model.cluster import Cluster
from nat_verify.model.outcome import Trace
from nat_verify.model.packet import PROTOS, Packet, parse_endpoint
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.parse import DumpError, parse_file
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.node.facts import NodeFacts

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
    from nat_verify.node.errors import FactError
    from nat_verify.report.document import ReportInputError
    from nat_verify.report.files import OutputError

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (DumpError, KubeInputError, CompileError, ReportInputError, InputError, OutputError, FactError) as e:
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

    try:
        ruleset = parse_file(path, family=family)
    except DumpError as e:
        raise _suggest_partial(path, e) from None
    validate_ruleset(ruleset)
    return ruleset


# -- partial dumps (--partial, --table) ---------------------------------------------------------


def _suggest_partial(path: str, e: DumpError) -> DumpError:
    """The strict reader's error, with a hint when the file reads like a pasted excerpt."""
    from nat_verify.netfilter.excerpt import looks_like_excerpt

    try:
        with open(path, "rb") as f:
            head = f.read(1 << 16).decode("utf-8", "replace")
    except OSError:
        return e
    if not looks_like_excerpt(head):
        return e
    return DumpError(e.file, e.line, f"{e.message} (this looks like an excerpt of a dump: --partial reads excerpts)")


def partial_options(fn: F) -> F:
    """``--partial`` and ``--table`` for the commands that read excerpts (trace, check, diff)."""
    fn = click.option(
        "--table", "table", type=click.Choice(["raw", "mangle", "nat", "filter", "security"]),
        help="with --partial: the table of rules that have no '*table' header",
    )(fn)  # fmt: skip
    fn = click.option(
        "--partial", is_flag=True,
        help="read an excerpt (a grep, iptables -S, a paste with prompts or quote marks): what it does not "
        "show makes answers inconclusive, results are at most 'holds'",
    )(fn)  # fmt: skip
    return fn


def load_rules(path: str, family: int | None, partial: bool, table: str | None) -> tuple[Ruleset, Any]:
    """The ruleset of DUMP, strictly or (``--partial``) as an excerpt; the ``Excerpt`` or None.

    With ``--partial`` every line that could not be used, and what the excerpt does not show,
    is listed on stderr.
    """
    if not partial:
        if table is not None:
            raise InputError("--table", "--table is for excerpts: give --partial too")
        return load_dump(path, family), None
    from nat_verify.netfilter.excerpt import read_excerpt, refuse_line
    from nat_verify.netfilter.interpreter import validate_ruleset

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise DumpError(path, 0, f"cannot read: {e.strerror}") from None
    ex = read_excerpt(data, source=path, family=family, table=table)
    # a rule the model refuses (a bad option value, an extension Linux lacks) is one more line
    # not used, not the end of the excerpt (bounded: each round removes one rule)
    for _ in range(10_000):
        try:
            validate_ruleset(ex.ruleset)
            break
        except DumpError as e:
            try:
                ex = refuse_line(ex, e.line, e.message)
            except ValueError:
                raise e from None
    else:
        validate_ruleset(ex.ruleset)
    for note in ex.notes():
        click.echo(f"nat-verify: {note}", err=True)
    return ex.ruleset, ex


def at_most_holds(results: Sequence[Any]) -> list[Any]:
    """Results read from an excerpt: what it does not show could break a proof."""
    import attrs

    return [attrs.evolve(r, status="holds") if r.status == "proved" else r for r in results]


def require_node(cluster: Cluster, node: str) -> None:
    if node not in {n.name for n in cluster.nodes}:
        names = ", ".join(n.name for n in cluster.nodes) or "none"
        raise InputError("--node", f"no node {node!r} in the cluster (nodes: {names})")


def context_from_options(
    cluster: Cluster | None,
    node: str | None,
    node_ips: Sequence[str],
    pod_cidrs: Sequence[str],
    family: int,
    facts: NodeFacts | None = None,
    ruleset: Ruleset | None = None,
) -> NodeContext:
    """The node the packets run on: the cluster's Node ``node``, or the addresses given, with
    every node fact of the options (``node_fact_options``)."""
    from nat_verify.node.build import node_context as build_context

    facts = facts or NodeFacts()
    if cluster is not None:
        if not node:
            raise InputError("--node", "--cluster needs --node NAME")
        require_node(cluster, node)
        return build_context(family, facts, cluster=cluster, node=node, ruleset=ruleset)
    if not node_ips and not facts.interfaces:
        raise InputError("", "say which node: --cluster PATH --node NAME, or --node-ip IP (repeatable) [--pod-cidr CIDR], or --interface NAME=CIDR / --ip-addr FILE")
    try:
        addrs = tuple(ipaddress.ip_address(a) for a in node_ips)
        nets = tuple(ipaddress.ip_network(c, strict=False) for c in pod_cidrs)
    except ValueError as e:
        raise InputError("--node-ip/--pod-cidr", str(e)) from None
    facts = attrs.evolve(facts, node_ips=addrs, pod_cidrs=nets)
    return attrs.evolve(build_context(family, facts, ruleset=ruleset), name=node or "")


def node_fact_options(fn: F) -> F:
    """The node-fact options of trace, check, diff and oracle, gathered into ``facts``."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from nat_verify.node.facts import gather

        kwargs["facts"] = gather(
            interfaces=kwargs.pop("interfaces"), ip_addr=kwargs.pop("ip_addr"),
            pod_interfaces=kwargs.pop("pod_interfaces"), cni=kwargs.pop("cni") or "",
            ip_route=kwargs.pop("ip_route"), ipset=kwargs.pop("ipset_files"), sysctls=kwargs.pop("sysctls"),
        )  # fmt: skip
        return fn(*args, **kwargs)

    options = [
        click.option("--interface", "interfaces", multiple=True, metavar="NAME=CIDR[,CIDR]", help="an interface of the node and its addresses (repeatable)"),
        click.option("--ip-addr", "ip_addr", multiple=True, metavar="FILE", help="the node's interfaces: the output of `ip -j addr`"),
        click.option("--pod-interface", "pod_interfaces", multiple=True, metavar="NAME", help="the interface pods' packets arrive on (NAME, or PREFIX+ such as cali+)"),
        click.option("--cni", metavar="NAME", help="the pod interface by a CNI plugin's convention (flannel, calico, cilium, weave, ...)"),
        click.option("--ip-route", "ip_route", multiple=True, metavar="FILE", help="the node's routes: the output of `ip -j route`"),
        click.option("--ipset", "ipset_files", multiple=True, metavar="FILE", help="the node's ipsets: the output of `ipset save`"),
        click.option("--sysctl", "sysctls", multiple=True, metavar="KEY=VALUE", help="net.ipv4.conf.all.route_localnet, net.bridge.bridge-nf-call-iptables (repeatable)"),
    ]  # fmt: skip
    out: Any = wrapper
    for opt in reversed(options):
        out = opt(out)
    return out


def premises_json(ctx: NodeContext) -> list[dict[str, str]]:
    """What a model answer rests on that the user did not give (``"assumptions"`` in JSON)."""
    return [{"node": ctx.name, **p.to_json()} if ctx.name else p.to_json() for p in ctx.assumptions]


def echo_assumptions(items: Sequence[dict[str, str]], *, err: bool = False) -> None:
    from nat_verify.report.text import assumption_lines

    for line in assumption_lines(items):
        click.echo(line, err=err)


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
@partial_options
@guarded
@node_fact_options
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
    facts: NodeFacts,
    partial: bool = False,
    table: str | None = None,
) -> None:
    """Run packets through a node's rules: every outcome, its probability and its rule path.

    Every default the answer rests on (a node fact not given) is listed after it, on stderr
    (``"assumptions"`` in JSON)."""
    if not packets_file and not (src and dst):
        raise InputError("", "give --src and --dst, or --packets FILE.jsonl")
    if partial and kernel:
        raise InputError("--kernel", "the kernel cannot load an excerpt: --kernel and --partial exclude each other")
    ruleset, excerpt = load_rules(dump, dump_family(dump, src), partial, table)
    cluster = load_cluster(cluster_path) if cluster_path else None
    ctx = context_from_options(cluster, node, node_ips, pod_cidrs, ruleset.family, facts, ruleset)
    premises = [] if kernel else premises_json(ctx)
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
            doc = tr.to_json()
            if excerpt is not None:
                doc["partial"] = True
                if not packets_file:
                    doc["excerpt"] = excerpt.to_json()
            if premises:
                doc["assumptions"] = premises
            click.echo(json.dumps(doc, separators=(",", ":") if packets_file else None))
        else:
            from nat_verify.report.text import render_trace_text, want_color

            click.echo(
                render_trace_text(tr, verbose=verbose, color=want_color(sys.stdout), source_lines=source_lines),
                nl=False,
            )
    if fmt == "text":
        echo_assumptions(premises, err=True)  # stdout keeps one line per outcome
    sys.exit(code)


# -- kube-proxy version (layout era) ----------------------------------------------------------


def kube_proxy_version_option(fn: F) -> F:
    """``--kube-proxy-version X.Y``: the kube-proxy release whose rule layout to use (docs/eras.md)."""
    return click.option(
        "--kube-proxy-version", "kube_proxy_version", default="", metavar="X.Y[.Z]",
        help="the kube-proxy release that wrote the rules (1.16 or later; a patch release tells the "
             "1.16-1.18 ones before the mark fix); default: the cluster's "
             "KubeProxyConfiguration, else the layout the dump shows (check) or the newest (compile)",
    )(fn)  # fmt: skip


def checked_version(version: str) -> Any:
    """The layout era of ``version`` (None for ""), or exit 2 naming the option."""
    if not version:
        return None
    from nat_verify.kubeproxy.eras import UnknownVersion, era_for_version

    try:
        return era_for_version(version)
    except UnknownVersion as e:
        raise InputError("--kube-proxy-version", str(e)) from None


# -- verify / check -----------------------------------------------------------------------------


def _verify_size(clusters: Sequence[Cluster]) -> int:
    """How many (Service, node, family) checks ``verify`` will run: the progress bar's total."""
    from nat_verify.check import families
    from nat_verify.intent import destinations

    return sum(
        len({d.service for d in destinations(c, n.name, fam)})
        for c in clusters for n in c.nodes for fam in families(c, n.name)
    )  # fmt: skip


def _emit(report: dict[str, Any], fmt: str, output: str | None, reports: Sequence[str] = ()) -> None:
    """The report on stdout (or ``-o FILE``) in ``fmt``, and in every ``--report FILE``."""
    import os

    from nat_verify.report import render
    from nat_verify.report.files import format_of, write_all
    from nat_verify.report.text import render_text, terminal_width, want_color

    to_stdout = output in (None, "-")
    root = os.getcwd()  # SARIF locations are relative to where the command runs
    if fmt == "text":
        tty = to_stdout and want_color(sys.stdout)
        text = render_text(report, color=tty, width=terminal_width(sys.stdout) if to_stdout else 80)
    else:
        text = render(report, fmt, root=root)
    files = [(path, render(report, format_of(path), root=root)) for path in reports]
    if not to_stdout:
        assert output is not None
        files.insert(0, (output, text))
    write_all(files)
    if to_stdout:
        click.echo(text, nl=not text.endswith("\n"))


def _check_outputs(output: str | None, reports: Sequence[str]) -> None:
    """Refuse unknown report extensions and missing directories before any work is done."""
    from nat_verify.report.files import check_writable, format_of

    for path in reports:
        format_of(path)
        check_writable(path)
    if output not in (None, "-"):
        assert output is not None
        check_writable(output)


def _inputs(clusters: Sequence[Cluster]) -> list[str]:
    """Refuse clusters without a Service (exit 2); say on stderr which objects were skipped."""
    from nat_verify.kube.loader import describe_skipped, require_services

    out = []
    for c in clusters:
        require_services(c)
        for s in c.skipped:
            line = f"{c.name or c.source.file}: skipped {describe_skipped(s)}"
            click.echo(f"nat-verify: note: {line}", err=True)
            out.append(line)
    return out


REPORT_FORMATS = ["text", "json", "md", "html", "sarif", "junit"]
REPORT_HELP = (
    "also write the report to FILE, in the format its extension names: .html, .md, .sarif, "
    ".xml (JUnit), .json, .txt (repeatable)"
)


@main.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option("--random", "random_n", default=0, show_default=True, help="also verify N clusters generated by Hypothesis")
@click.option("--seed", default=0, show_default=True, help="seed for --random")
@click.option("--format", "fmt", default="text", type=click.Choice(REPORT_FORMATS), show_default=True)
@click.option("-o", "--output", help="write the report to this file instead of stdout ('-': stdout)")
@click.option("--report", "reports", multiple=True, metavar="FILE", help=REPORT_HELP)
@guarded
def verify(paths: tuple[str, ...], random_n: int, seed: int, fmt: str, output: str | None, reports: tuple[str, ...]) -> None:
    """Every invariant on every node of every cluster under PATHS (default: specs/)."""
    from nat_verify.check import CheckReport
    from nat_verify.check.sharing import verify_shared
    from nat_verify.kube.loader import load_clusters
    from nat_verify.progress import Progress
    from nat_verify.report import build_report
    from nat_verify.report.evidence import verify_evidence

    _check_outputs(output, reports)
    clusters = load_clusters(list(paths) or ["specs"])
    skipped = _inputs(clusters)
    loaded = len(clusters)
    if random_n:
        from nat_verify.strategies import sample_clusters

        clusters += sample_clusters(random_n, seed=seed)
    total = CheckReport((), ())
    parts: list[CheckReport] = []
    with Progress() as bar:
        task = bar.task("verifying", _verify_size(clusters), "Services")
        step = bar.services(task)
        for i, c in enumerate(clusters):
            task.description = f"verifying {c.name}"
            # generated clusters' Pods exercise the rules, not the objects: rules only
            parts.append(verify_shared(c, progress=step, objects=i < loaded))
            total = total.merged(parts[-1])
    findings: list[Any] = []
    shares: list[Any] = []
    for c, part in zip(clusters, parts, strict=True):
        # rule text, outcomes and endpoint shares, from the rules verify checked
        annotated, found = verify_evidence(c, part.findings)
        findings += annotated
        shares += found
    report = build_report(
        total.results, findings, command="verify", clusters=[c.name for c in clusters],
        meta={"packets": total.packets, **({"skipped": skipped} if skipped else {})}, shares=shares,
        assumptions=total.assumptions_json(),
    )  # fmt: skip
    _emit(report, fmt, output, reports)
    sys.exit(report["summary"]["exit_code"])


@main.command()
@click.argument("dump", type=click.Path())
@click.option("--cluster", "cluster_path", multiple=True, required=True, help="the cluster's objects (YAML/JSON files or directories)")
@click.option("--node", help="the node the dump was taken on (required for one dump; not with a directory)")
@click.option("--format", "fmt", default="text", type=click.Choice(REPORT_FORMATS), show_default=True)
@click.option("-o", "--output", help="write the report to this file instead of stdout ('-': stdout)")
@click.option("--report", "reports", multiple=True, metavar="FILE", help=REPORT_HELP)
@click.option("--kernel-probes", default=0, show_default=True, type=click.IntRange(0, 100_000),
              help="also send each Service's ClusterIP packet N times through the kernel (root): "
                   "the report charts the observed shares beside the model's")  # fmt: skip
@click.option("--manifest", help="DUMP is a directory: the file mapping nodes to dumps (default: DIR/manifest.json or .yaml, else file names)")
@click.option("--executor", default="local", type=click.Choice(["local", "dask"]), show_default=True,
              help="DUMP is a directory: where the per-node work runs")  # fmt: skip
@click.option("--scheduler", metavar="ADDRESS", help="with --executor dask: a running Dask scheduler (default: a local cluster)")
@click.option("--workers", type=int, default=0,
              help="worker processes (default: one per CPU, for one dump of 100 Service ports or more, a local "
                   "Dask cluster; else 1); the results do not depend on it")  # fmt: skip
@partial_options
@kube_proxy_version_option
@guarded
@node_fact_options
def check(
    dump: str, cluster_path: tuple[str, ...], node: str | None, fmt: str, output: str | None, reports: tuple[str, ...],
    kernel_probes: int, manifest: str | None, executor: str, scheduler: str | None, workers: int, facts: NodeFacts,
    partial: bool = False, table: str | None = None, kube_proxy_version: str = "",
) -> None:  # fmt: skip
    """A real node's iptables-save dump against the cluster's objects; or DUMP a directory of
    dumps, one per node (named after the node, or mapped by a manifest), checked as a fleet.

    Without a KubeProxyConfiguration, kube-proxy's settings are read back from the dump's
    rules; what was inferred and what assumed is listed with the results."""
    from nat_verify.check import check_objects
    from nat_verify.check.nodectx import node_context
    from nat_verify.node.proxyconfig import with_inferred_config
    from nat_verify.report import build_report
    from nat_verify.report.evidence import service_shares, with_evidence

    _check_outputs(output, reports)
    checked_version(kube_proxy_version)
    if Path(dump).is_dir():
        if node:
            raise InputError("--node", "DUMP is a directory of node dumps: the node of each comes from its file name or the manifest")
        if partial:
            raise InputError("--partial", "excerpts are read one at a time: give one dump file with --node")
        if kube_proxy_version:
            raise InputError("--kube-proxy-version", "DUMP is a directory: each node's layout is read from its own dump "
                             "(pin one for all with the KubeProxyConfiguration's annotation nat-verify.io/kube-proxy-version)")
        _check_fleet(dump, cluster_path, fmt, output, reports, manifest, executor, scheduler, workers)
    if manifest or scheduler or executor != "local":
        raise InputError("--manifest/--executor/--scheduler", "only with DUMP a directory of node dumps")
    if not node:
        raise InputError("--node", "say which node the dump was taken on: --node NAME")
    ruleset, excerpt = load_rules(dump, None, partial, table)
    cluster = load_cluster(cluster_path)
    skipped = _inputs([cluster])
    require_node(cluster, node)
    # an excerpt shows a few rules: what it lacks is not drift
    if excerpt is not None:
        click.echo("nat-verify: NV015 (drift) is not checked on an excerpt: rules it does not show are not missing", err=True)
    rep = _check_with_progress(cluster, node, ruleset, drift_check=excerpt is None, facts=facts,
                               kube_proxy_version=kube_proxy_version, workers=workers)  # fmt: skip
    rep = rep.merged(check_objects(cluster))  # NV016-NV028: the cluster's objects, no rules
    results = rep.results if excerpt is None else at_most_holds(rep.results)
    effective, _ = with_inferred_config(cluster, node, ruleset)
    interp = Interpreter(ruleset, node_context(effective, node, ruleset.family, facts, ruleset))
    lines = Path(dump).read_text(encoding="utf-8", errors="replace").split("\n")
    shares = service_shares(effective, node, interp)
    if kernel_probes:
        from nat_verify.oracle import kernel_available
        from nat_verify.report.evidence import kernel_shares

        reason = kernel_available()
        if reason is not None:
            raise InputError("--kernel-probes", f"the kernel oracle is unavailable here: {reason}")
        shares = kernel_shares(ruleset, interp.ctx, shares, kernel_probes, source=dump)
    meta: dict[str, Any] = {"dump": dump, "node": node, "packets": rep.packets}
    if skipped:
        meta["skipped"] = skipped
    if excerpt is not None:
        meta.update(partial=True, excerpt=excerpt.to_json())
    report = build_report(
        results, with_evidence(rep.findings, interp, lines), command="check",
        clusters=[cluster.name or ",".join(cluster_path)],
        meta=meta,
        shares=shares, assumptions=rep.assumptions_json(),
    )  # fmt: skip
    _emit(report, fmt, output, reports)
    sys.exit(report["summary"]["exit_code"])


def _check_with_progress(
    cluster: Cluster, node: str, ruleset: Ruleset, *, drift_check: bool = True, facts: NodeFacts | None = None,
    kube_proxy_version: str = "",
    workers: int = 0,
) -> Any:
    """Every invariant (one exhaustive check per shape of Service port, ``check.sharing``: the
    same report as checking each on its own), with progress per Service on stderr."""
    import os

    from nat_verify.check.sharing import check_shared
    from nat_verify.intent import destinations
    from nat_verify.progress import Progress

    with Progress() as bar:
        total = len({d.service for d in destinations(cluster, node, ruleset.family)})
        n = workers or ((os.cpu_count() or 1) if total >= 100 else 1)
        task = bar.task(f"checking {node}", total, "Services")
        return check_shared(
            cluster, node, ruleset, drift_check=drift_check, progress=bar.services(task), facts=facts,
            kube_proxy_version=kube_proxy_version, workers=n,
        )  # fmt: skip


def _check_fleet(
    directory: str, cluster_path: tuple[str, ...], fmt: str, output: str | None, reports: tuple[str, ...],
    manifest: str | None, executor_name: str, scheduler: str | None, workers: int,
) -> NoReturn:  # fmt: skip
    """``check DIR``: every node's dump in DIR, identical nodes grouped, one report."""
    from nat_verify.check import check_objects
    from nat_verify.executors import ExecutorUnavailable
    from nat_verify.fleet import FleetInputError, check_fleet, load_fleet, make_executor
    from nat_verify.progress import Progress
    from nat_verify.report import build_report

    cluster = load_cluster(cluster_path)
    _inputs([cluster])
    try:
        fleet = load_fleet(directory, cluster, manifest)
        import os

        n_workers = workers or (os.cpu_count() or 1 if executor_name == "dask" else 1)
        ex = make_executor(executor_name, scheduler, n_workers)
        with Progress() as bar:
            task = bar.task(f"checking {len(fleet.nodes)} nodes ({ex.name})", len(fleet.nodes), "nodes")
            res = check_fleet(cluster, fleet, ex, progress=task.advance)
    except (FleetInputError, ExecutorUnavailable) as e:
        raise InputError("", str(e)) from None
    total = res.merged().merged(check_objects(cluster))  # the objects once, not per node
    group_of = res.group_of
    per_node = {
        n.node: {
            "dumps": list(n.dumps), "group": group_of[n.node],
            "violated": sum(r.status == "violated" for r in n.report.results),
            "inconclusive": sum(r.status == "inconclusive" for r in n.report.results),
            "proved": sum(r.status == "proved" for r in n.report.results),
        }
        for n in res.nodes
    }  # fmt: skip
    report = build_report(
        total.results, total.findings, command="check", clusters=[cluster.name or ",".join(cluster_path)],
        meta={"dump": directory, "nodes": per_node, "groups": [list(g) for g in res.groups],
              "nodes_without_dump": list(res.missing), "executor": ex.name, "packets": total.packets},
    )  # fmt: skip
    _emit(report, fmt, output, reports)
    sys.exit(report["summary"]["exit_code"])


# -- compile ----------------------------------------------------------------------------------


NFT_STYLES = ("batch", "text", "json")


@main.command("compile")
@click.argument("path", nargs=-1, required=True, type=click.Path())
@click.option("--node", required=True, help="the node to compile for")
@click.option("--family", default="ipv4", type=click.Choice(["ipv4", "ipv6"]), show_default=True)
@click.option("--mode", type=click.Choice(["iptables", "nftables"]),
              help="kube-proxy's mode (default: the KubeProxyConfiguration's mode, else iptables)")  # fmt: skip
@click.option("--style", type=click.Choice(["restore", "save", *NFT_STYLES]),
              help="iptables: restore (as kube-proxy writes it, the default) or save (as iptables-save prints it); "
                   "nftables: batch (as kube-proxy writes it, the default), text (as nft list prints it) or json (nft -j list)")  # fmt: skip
@kube_proxy_version_option
@guarded
def compile_cmd(
    path: tuple[str, ...], node: str, family: str, mode: str | None, style: str | None, kube_proxy_version: str = ""
) -> None:
    """The rules kube-proxy writes on NODE for the cluster in PATH."""
    from nat_verify.kubeproxy import compile_node
    from nat_verify.netfilter.parse import parse
    from nat_verify.netfilter.render import render
    from nat_verify.netfilter.saveform import to_save_form

    cluster = load_cluster(path)
    require_node(cluster, node)
    fam = 6 if family == "ipv6" else 4
    mode = mode or cluster.proxy.mode
    if mode not in ("iptables", "nftables"):
        fail(f"{cluster.proxy.source}: kube-proxy mode {mode!r} is not modelled (iptables and nftables are)")
    if mode == "nftables":
        if kube_proxy_version:
            fail("--kube-proxy-version picks a layout of kube-proxy's iptables rules; it does not apply with --mode nftables")
        if style in ("restore", "save"):
            fail(f"--style {style} is an iptables form; with --mode nftables use one of {', '.join(NFT_STYLES)}")
        click.echo(compile_nftables(cluster, node, fam, style or "batch"), nl=False)
        return
    if style in NFT_STYLES:
        fail(f"--style {style} is an nftables form: give --mode nftables (the cluster's mode is {cluster.proxy.mode})")
    text = compile_node(cluster, node, fam, era=checked_version(kube_proxy_version))
    if style == "save":
        tool = "ip6tables-save" if fam == 6 else "iptables-save"
        text = render(to_save_form(parse(text, source="<compiled>", family=fam)), header=f"Generated by nat-verify as {tool} prints it")
    click.echo(text, nl=False)


def compile_nftables(cluster: Cluster, node: str, family: int, style: str) -> str:
    """kube-proxy's nftables transaction, as it writes it or as nft lists it once loaded."""
    from nat_verify.kubeproxy.nftables import compile_node_nft
    from nat_verify.nftables import parse_ruleset, render_json, render_listing

    text = compile_node_nft(cluster, node, family)
    if style == "batch":
        return text
    ruleset = parse_ruleset(text, source="<compiled>")
    return render_listing(ruleset) if style == "text" else render_json(ruleset)


# -- diff -------------------------------------------------------------------------------------


@main.command()
@click.argument("dump_a", type=click.Path(dir_okay=False))
@click.argument("dump_b", type=click.Path(dir_okay=False))
@click.option("--cluster", "cluster_path", multiple=True, help="Kubernetes YAML describing the cluster")
@click.option("--node", help="the node (with --cluster)")
@click.option("--node-ip", "node_ips", multiple=True, help="an address of the node (repeatable), without --cluster")
@click.option("--pod-cidr", "pod_cidrs", multiple=True, help="the pod network (repeatable), without --cluster")
@click.option("--format", "fmt", default="text", type=click.Choice(["text", "json"]), show_default=True)
@partial_options
@guarded
@node_fact_options
def diff(
    dump_a: str, dump_b: str, cluster_path: tuple[str, ...], node: str | None, node_ips: tuple[str, ...],
    pod_cidrs: tuple[str, ...], fmt: str, facts: NodeFacts, partial: bool = False, table: str | None = None,
) -> None:  # fmt: skip
    """Are two dumps equivalent for every packet? Exit 0 if so, 1 with one packet that differs."""
    from nat_verify.check.equivalence import equivalent

    a, ex_a = load_rules(dump_a, None, partial, table)
    b, ex_b = load_rules(dump_b, a.family, partial, table)
    cluster = load_cluster(cluster_path) if cluster_path else None
    ctx = context_from_options(cluster, node, node_ips, pod_cidrs, a.family, facts, a)
    res = equivalent(a, b, ctx)
    d = res.difference
    if fmt == "json":
        doc: dict[str, Any] = d.to_json() if d else {"equivalent": True}
        doc.update({"format": "nat_verify.diff/v1", "classes": res.classes, "inconclusive": res.inconclusive,
                    "assumptions": premises_json(ctx)})  # fmt: skip
        if partial:
            doc.update(partial=True, excerpts={dump_a: ex_a.to_json(), dump_b: ex_b.to_json()})
        click.echo(json.dumps(doc, indent=2))
    elif d is None:
        what = " on what the excerpts show (at most holds)" if partial else ""
        click.echo(f"equivalent{what}: {res.classes} packet classes compared ({res.inconclusive} inconclusive)")
    else:
        from nat_verify.model.outcome import Trace
        from nat_verify.report.text import render_trace_text

        click.echo(f"different after {res.classes} packet classes: {d.packet}")
        click.echo(f"--- {dump_a}")
        click.echo(render_trace_text(Trace(d.packet, d.a)), nl=False)
        click.echo(f"+++ {dump_b}")
        click.echo(render_trace_text(Trace(d.packet, d.b)), nl=False)
    if fmt == "text":
        echo_assumptions(premises_json(ctx))
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
@node_fact_options
def oracle(
    dump: str, cluster_path: tuple[str, ...], node: str | None, node_ips: tuple[str, ...], pod_cidrs: tuple[str, ...],
    packets_file: str | None, random_n: int, seed: int, probes: int, backend: str, proto: str, fmt: str,
    facts: NodeFacts,
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
    ctx = context_from_options(cluster, node, node_ips, pod_cidrs, ruleset.family, facts, ruleset)
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


# -- explain ----------------------------------------------------------------------------------


@main.command()
@click.argument("target")
@click.option("--cluster", "cluster_path", multiple=True, required=True, help="the cluster's objects (YAML/JSON files or directories)")
@click.option("--node", help="the node whose rules to trace (default: the target's node, else the first node)")
@click.option("--dump", help="the node's own iptables-save dump (default: the rules nat-verify compiles for it)")
@click.option("--format", "fmt", default="text", type=click.Choice(["text", "json"]), show_default=True)
@click.option("--report", "reports", multiple=True, metavar="FILE", help=REPORT_HELP)
@guarded
def explain(target: str, cluster_path: tuple[str, ...], node: str | None, dump: str | None, fmt: str, reports: tuple[str, ...]) -> None:
    """What TARGET (an address, IP:PORT or namespace/service) is, which Pods it selects and why,
    and what the node's rules do to a packet to it from a pod, the node and outside."""
    from nat_verify.explain import TargetError, identify
    from nat_verify.explain import explain as explain_doc
    from nat_verify.explain.render import render_explain
    from nat_verify.report.evidence import compiled_ruleset
    from nat_verify.report.files import format_of, write_all
    from nat_verify.report.text import terminal_width

    _check_outputs(None, reports)
    cluster = load_cluster(cluster_path)
    try:
        who = identify(cluster, target)
    except TargetError as e:
        raise InputError("TARGET", str(e)) from None
    if node is None and dump is not None:
        raise InputError("--dump", "say which node the dump is from: --node NAME")
    name = node or who.node or (cluster.nodes[0].name if cluster.nodes else "")
    if not name:
        raise InputError("--cluster", "the cluster has no Node, so there are no rules to trace")
    require_node(cluster, name)
    from nat_verify.check.nodectx import node_context
    from nat_verify.check.runner import families

    if who.ip:
        fams: tuple[int, ...] = (6 if ":" in who.ip else 4,)
    else:  # a Service: every family the node has an address of (a dual-stack Service twice)
        fams = families(cluster, name)
    traced = []
    if dump is not None:
        ruleset = load_dump(dump, fams[0] if who.ip else None)
        lines = Path(dump).read_text(encoding="utf-8", errors="replace").split("\n")
        traced.append((Interpreter(ruleset, node_context(cluster, name, ruleset.family)), lines))
        rules = f"the node's own, from {dump}"
    else:
        for fam in fams:
            ruleset, lines = compiled_ruleset(cluster, name, fam)
            traced.append((Interpreter(ruleset, node_context(cluster, name, fam)), lines))
        rules = f"compiled by nat-verify for {name}, as kube-proxy writes them (--dump FILE for the node's own)"
    doc = explain_doc(cluster, who, name, traced, rules=rules)
    write_all([(path, render_explain(doc, format_of(path))) for path in reports])
    if fmt == "json":
        click.echo(render_explain(doc, "json"), nl=False)
    else:
        from nat_verify.explain.render import render_explain_text

        text = render_explain_text(doc, width=terminal_width(sys.stdout))
        click.echo(text, nl=not text.endswith("\n"))
    sys.exit(EXIT_INCONCLUSIVE if any(o["verdict"] == "inconclusive" for f in doc["flows"] for o in f["outcomes"]) else EXIT_OK)


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
