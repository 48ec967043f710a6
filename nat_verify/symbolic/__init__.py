"""The Z3 encoding of a ruleset: every packet at once (DESIGN.md: the only package that imports z3).

The same netfilter semantics as the interpreter, over a *symbolic* packet whose source and
destination addresses and ports, protocol and mark are packet variables (Z3 bit vectors):

* ``state``: the walk state with variables in it, and the set of packets it stands for (an
  interval set per variable, ``domain``, and Z3 formulas for the rest);
* ``evaluate``: the predicate language (``netfilter.predicate``) on such a state, per branch;
* ``walk``: the interpreter's hooks, chains and rules, forking where a verdict depends on the
  packet: the result is a list of paths (a constraint, and what happens to the packets in it);
* ``paths``: a path's outcome for one concrete packet, built by the interpreter's own code;
* ``classes``: Z3 enumerates the packets that take different sets of paths, one per set, with
  a proof (unsat) that there is no other;
* ``engine``: the ``z3`` engine of ``check``: per Service address, intent classes x semantic
  classes, every packet replayed through the interpreter before the catalogue judges it;
* ``slices``, ``whole``: every packet of a dump, destination slice by slice;
* ``query``: whole-dump questions (reach after NAT, masquerade, client IP), ``yes`` with a
  replayed witness or ``no`` proved;
* ``equivalence``: ``diff`` over every packet, the distinguishing packet replayed on both dumps.

Nothing here restates what a match or a target means: leaves whose fields are concrete are
evaluated by the predicate's own evaluator, targets by their registry effect, outcomes by the
interpreter's outcome builder; what this package adds is the encoding of the tests on packet
variables (stated per predicate value in ``netfilter.predicate``) and the search. The property
tests hold it to the interpreter on random clusters and on rulesets drawn from the registry.
"""
