"""The Z3 encoding on rulesets drawn from the registry (every modelled match module and target,
not only kube-proxy's): for every packet the symbolic paths give exactly the interpreter's
outcomes, and Z3's classes leave no packet out.

* Agreement: one walk per origin and protocol over every source, destination, port and mark,
  instantiated for random packets, equals the rule-by-rule interpreter (verdict, translated
  destination and source, masquerade, REJECT type, probabilities, rule path, reasons).
* Completeness of the classes: for one destination, every source and source port takes one of
  the sets of paths ``classes`` enumerated (so checking one packet per class checks them all),
  asked of the solver for every class (``solve=True``).
"""

from __future__ import annotations

import ipaddress

from hypothesis import given, settings
from hypothesis import strategies as st

from nat_verify.model.packet import Packet
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.symbolic import domain
from nat_verify.symbolic.classes import classes
from nat_verify.symbolic.paths import assignment_of, holds, outcomes, same_outcomes
from nat_verify.symbolic.slices import sources
from nat_verify.symbolic.state import Var, initial
from nat_verify.symbolic.walk import Walker
from tests.property import rules as R


@settings(max_examples=max(100, settings.default.max_examples))
@given(R.rulesets(), st.lists(R.packets(), min_size=1, max_size=30))
def test_symbolic_paths_equal_the_interpreter_on_registry_rulesets(rs: Ruleset, pkts: list[Packet]) -> None:
    ctx = R.context()
    it = Interpreter(rs, ctx, linear=True)
    walker = Walker(it.program)
    walks: dict[tuple[str, str], list] = {}
    for p in pkts:
        key = (p.origin, p.proto)
        if key not in walks:
            walks[key] = walker.every_packet(p.origin, p.proto, mark=Var("mark"))
        assert same_outcomes(outcomes(p, walks[key]), it.trace(p).outcomes), p


@settings(max_examples=max(50, settings.default.max_examples))
@given(R.rulesets(), st.data())
def test_every_packet_lies_in_a_class_z3_found(rs: Ruleset, data: st.DataObject) -> None:
    ctx = R.context()
    it = Interpreter(rs, ctx, linear=True)
    walker = Walker(it.program)
    dst = ipaddress.ip_address(data.draw(st.sampled_from(R.ADDRESSES)))
    dport = data.draw(st.sampled_from(R.PORTS))
    proto = data.draw(st.sampled_from(("tcp", "udp")))
    origin = data.draw(st.sampled_from(("external", "pod", "host")))
    src_span = sources(ctx, origin, dst in ctx.loopback)
    if not src_span:
        return
    st0 = initial(walker.space, ctx, origin, src=Var("src"), sport=Var("sport"), dst=dst, dport=dport, proto=proto)
    st0.doms = {"src": src_span, "sport": ((1, 65535),)}
    paths = walker.run(origin, st0)
    region = {"src": src_span, "sport": ((1, 65535),)}
    found = list(classes(walker.space, [s for s, _ in paths], region, solve=True))
    taken = {f.taken for f in found}
    assert len(taken) == len(found)  # one packet per set of paths
    for f in found:  # each packet Z3 gave is in the region and takes the paths it says
        assert domain.contains(src_span, f.values["src"]) and 1 <= f.values["sport"] <= 65535
        a = {**f.values, "dst": int(dst), "dport": dport}
        assert tuple(i for i, (s, _) in enumerate(paths) if holds(s, a)) == f.taken
    for _ in range(data.draw(st.integers(1, 10))):
        src = data.draw(st.sampled_from(R.ADDRESSES).map(lambda a: int(ipaddress.ip_address(a))) | st.integers(0, 2**32 - 1))
        sport = data.draw(st.sampled_from(R.PORTS))
        if not domain.contains(src_span, src):
            continue
        p = Packet(src=ipaddress.IPv4Address(src), dst=dst, dport=dport, sport=sport, proto=proto, origin=origin)  # type: ignore[arg-type]
        a = assignment_of(p)
        mine = tuple(i for i, (s, _) in enumerate(paths) if holds(s, a))
        assert mine in taken, p
        assert same_outcomes(outcomes(p, paths), it.trace(p).outcomes), p
