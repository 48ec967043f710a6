"""Group the tokens of one ``-A CHAIN ...`` rule into core options, matches and a target.

iptables groups a rule's options the way its parser meets them: the core options (``-s -d -p
-i -o -f``), then one group per ``-m MODULE`` (options after ``-p tcp`` and before any ``-m``
belong to the implicitly loaded ``tcp`` module), then the target and its options after ``-j``
or ``-g``. ``!`` before an option negates it (current spelling); ``--opt ! value`` does too
(old spelling).

Design: a dump of 400,000 rules is written from a few dozen rule *shapes* (kube-proxy's
templates), so the grouping is decided once per shape and replayed on every rule of that
shape. A shape is the token list with every argument token blanked, except the ones the
grouping reads: option tokens (which start with ``-``), ``!``, and the protocol after ``-p``
(it decides which module owns ``--dport``). Two token lists with the same shape are grouped
identically, position by position, because every decision of the grouping reads only what
the shape keeps: whether a token is an option, ``!``, quoted or a plain argument, the option
names, and the protocol; the values only fill the slots (a property test checks this against
the grouping computed from scratch). Anything malformed raises ``ValueError`` with a message;
a shape that does not group is never remembered, so each bad rule gets its own message.
"""

from __future__ import annotations

import re
from itertools import pairwise

from nat_verify.netfilter.ruleset import Match, Option, Target

CORE_OPTIONS = {
    "-s": "-s", "--source": "-s", "--src": "-s",
    "-d": "-d", "--destination": "-d", "--dst": "-d",
    "-p": "-p", "--protocol": "-p",
    "-i": "-i", "--in-interface": "-i",
    "-o": "-o", "--out-interface": "-o",
    "-f": "-f", "--fragment": "-f",
}  # fmt: skip

CORE_ORDER = {"-s": 0, "-d": 1, "-i": 2, "-o": 3, "-p": 4, "-f": 5}

# options whose value is free text (iptables prints them with xtables_save_string)
STRING_OPTIONS = frozenset({"--comment", "--log-prefix", "--nflog-prefix", "--helper"})

# protocols whose match module iptables loads implicitly after "-p PROTO"
IMPLICIT_MODULES = frozenset({"tcp", "udp", "sctp", "icmp", "icmpv6", "ipv6-icmp", "udplite", "dccp"})

# the token after one of these is kept in the shape (the protocol, or a negated value)
_KEEP_NEXT = frozenset({"-p", "--protocol", "!"})

_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"|([^\s"]+)|(")')
_UNESCAPE = re.compile(r"\\(.)")

Token = tuple[str, bool]  # text, was quoted
Grouped = tuple[str, tuple[Option, ...], tuple[Match, ...], Target, tuple[int, int] | None]


def tokenize(text: str) -> list[Token]:
    """Split a rule into (token, quoted) pairs the way iptables-restore does.

    Double quotes group words; a backslash inside quotes escapes the next character.
    Raises ValueError on an unterminated quote.
    """
    if '"' not in text:
        return [(t, False) for t in text.split()]
    out: list[Token] = []
    for quoted, plain, stray in _QUOTED.findall(text):
        if stray:
            raise ValueError("unterminated double quote")
        if plain:
            out.append((plain, False))
        else:
            out.append((_UNESCAPE.sub(r"\1", quoted), True))
    return out


def _is_option(tok: str, quoted: bool) -> bool:
    return not quoted and tok.startswith("-") and len(tok) > 1 and not tok[1].isdigit()


# ---- the plan of one shape --------------------------------------------------------------
# An option slot is (name, first argument position, end position, negated, join): the option's
# arguments are tokens[first:end]; ``join`` glues an unquoted multi-word comment into one.
_Slot = tuple[str, int, int, bool, bool]
# A match or the target: (group id, lo, hi, name position or -1, implicit name, goto, slots).
# Its value is decided by the group id (which names the positions) and tokens[lo:hi], the span
# that holds its name and every slot, so equal (id, span) pairs are one interned object.
_Group = tuple[int, int, int, int, str, bool, tuple[_Slot, ...]]
# (core slots in save order, matches, target, counters position or -1)
_Plan = tuple[tuple[_Slot, ...], tuple[_Group, ...], _Group, int]
_GROUP_IDS: dict[tuple[int, int, str, bool, tuple[_Slot, ...]], int] = {}


def _group(pos: int, implicit: str, goto: bool, slots: list[_Slot]) -> _Group:
    lo = pos if pos >= 0 else min((s[1] for s in slots), default=0)
    hi = max((s[2] for s in slots), default=pos + 1 if pos >= 0 else 0)
    hi = max(hi, pos + 1)
    key = (pos, lo, implicit, goto, tuple(slots))
    gid = _GROUP_IDS.get(key)
    if gid is None:
        # past the limit a group gets no id (-1) and its values are not interned
        gid = len(_GROUP_IDS) if len(_GROUP_IDS) < _INTERN_LIMIT else -1
        if gid >= 0:
            _GROUP_IDS[key] = gid
    return (gid, lo, hi, pos, implicit, goto, tuple(slots))


def _make_plan(tokens: list[Token]) -> _Plan:
    """Decide the grouping of a rule's tokens by position. Raises ValueError with a message."""
    if len(tokens) < 2 or tokens[0][0] not in ("-A", "--append"):
        raise ValueError(f"expected '-A CHAIN ...', received {' '.join(t for t, _ in tokens[:3])!r}")
    core: list[_Slot] = []
    matches: list[tuple[int, str, list[_Slot]]] = []
    target_pos = -1
    goto = False
    target: list[_Slot] = []
    counters = -1
    proto = ""
    i = 2
    n = len(tokens)
    pending_neg = False
    in_target = False
    while i < n:
        tok, quoted = tokens[i]
        if tok == "!" and not quoted:
            pending_neg = True
            i += 1
            continue
        if quoted or len(tok) < 2 or tok[0] != "-" or tok[1].isdigit():
            raise ValueError(f"unexpected argument {tok!r} (not after an option)")
        i += 1
        if tok in ("-m", "--match"):
            if i >= n:
                raise ValueError("'-m' needs a module name")
            matches.append((i, "", []))
            i += 1
            in_target = False
            continue
        if tok in ("-j", "--jump", "-g", "--goto"):
            if i >= n:
                raise ValueError(f"{tok!r} needs a target")
            if target_pos >= 0:
                raise ValueError("a rule has one target, received a second -j/-g")
            target_pos = i
            goto = tok in ("-g", "--goto")
            i += 1
            in_target = True
            continue
        if tok in ("-c", "--set-counters"):
            if i + 1 >= n:
                raise ValueError("'-c' needs packets and bytes")
            counters = i
            i += 2
            continue
        first = i
        neg = pending_neg
        pending_neg = False
        while i < n:
            t, q = tokens[i]
            if not q and t[:1] in ("-", "!"):
                if t == "!":
                    # old spelling: "--opt ! value" negates this option
                    if i + 1 < n and not _is_option(*tokens[i + 1]) and i == first:
                        neg = True
                        i += 1
                        first = i
                        continue
                    break
                if len(t) > 1 and not t[1].isdigit():
                    break  # the next option
            i += 1
        nargs = i - first
        name = CORE_OPTIONS.get(tok)
        if name is not None and not in_target:
            if name == "-p":
                if not nargs:
                    raise ValueError("'-p' needs a protocol")
                proto = tokens[first][0].lower()
            elif name != "-f" and not nargs:
                raise ValueError(f"{tok!r} needs an argument")
            core.append((name, first, i, neg, False))
            continue
        # kube-proxy's restore input may leave a multi-word comment unquoted
        slot = (tok, first, i, neg, tok in STRING_OPTIONS and nargs > 1)
        if in_target:
            target.append(slot)
        elif matches:
            matches[-1][2].append(slot)
        elif proto in IMPLICIT_MODULES:
            # "-p tcp --dport 80": the protocol's own match is loaded implicitly
            matches.append((-1, proto, [slot]))
        else:
            raise ValueError(f"option {tok!r} does not belong to any '-m' module")
    if pending_neg:
        raise ValueError("'!' at the end of the rule negates nothing")
    # the core options are one set (the IP header match); keep them in iptables-save's order
    core.sort(key=lambda s: CORE_ORDER[s[0]])
    return (
        tuple(core),
        tuple(_group(pos, name, False, slots) for pos, name, slots in matches),
        _group(target_pos, "", goto, target),
        counters,
    )


def shape(tokens: list[Token]) -> tuple[str, ...]:
    """What the grouping of ``tokens`` depends on (see the module docstring)."""
    out = [tokens[0][0] if tokens else ""]
    for (p, pq), (t, q) in pairwise(tokens):
        keep = p in _KEEP_NEXT and not pq  # a quoted "-p" or "!" is an argument
        if q:
            out.append('"' + t if keep else '"')
        else:
            out.append(t if t[0] in "-!" or keep else "")
    return tuple(out)


def _plain_shape(words: list[str]) -> tuple[str, ...]:
    # shape() for a rule without quotes, in one pass at C speed per token
    return (words[0], *(t if t[0] in "-!" or p in _KEEP_NEXT else "" for p, t in pairwise(words)))


# Rules repeat the same options over and over (-p tcp, -m comment fragments, KUBE-MARK-MASQ):
# interning them makes a large dump several times smaller in memory and faster to build.
_INTERN_LIMIT = 1 << 20
_PLANS: dict[tuple[str, ...], _Plan] = {}
_OPTIONS: dict[tuple[str, tuple[str, ...], bool], Option] = {}
_MATCHES: dict[tuple[object, ...], Match] = {}
_TARGETS: dict[tuple[object, ...], Target] = {}


def _options(slots: tuple[_Slot, ...], words: list[str]) -> tuple[Option, ...]:
    out = []
    get = _OPTIONS.get
    for name, a, b, neg, join in slots:
        args = (" ".join(words[a:b]),) if join else tuple(words[a:b])
        key = (name, args, neg)
        o = get(key)
        if o is None:
            o = Option(name, args, neg)
            if len(_OPTIONS) < _INTERN_LIMIT:
                _OPTIONS[key] = o
        out.append(o)
    return tuple(out)


def _match(g: _Group, words: list[str]) -> Match:
    key = (g[0], *words[g[1] : g[2]])
    m = _MATCHES.get(key) if g[0] >= 0 else None
    if m is None:
        m = Match(words[g[3]] if g[3] >= 0 else g[4], _options(g[6], words))
        if g[0] >= 0 and len(_MATCHES) < _INTERN_LIMIT:
            _MATCHES[key] = m
    return m


def _target(g: _Group, words: list[str]) -> Target:
    key = (g[0], *words[g[1] : g[2]])
    t = _TARGETS.get(key) if g[0] >= 0 else None
    if t is None:
        t = Target(words[g[3]] if g[3] >= 0 else "", _options(g[6], words), g[5])
        if g[0] >= 0 and len(_TARGETS) < _INTERN_LIMIT:
            _TARGETS[key] = t
    return t


def _apply(plan: _Plan, words: list[str]) -> Grouped:
    core_s, match_g, target_g, counters_pos = plan
    counters = None
    if counters_pos >= 0:
        a, b = words[counters_pos], words[counters_pos + 1]
        if not (a.isascii() and b.isascii() and a.isdigit() and b.isdigit() and len(a) <= 20 and len(b) <= 20):
            raise ValueError("'-c' needs two integers (64-bit packet and byte counters)")
        counters = (int(a), int(b))
    return (
        words[1],
        _options(core_s, words),
        tuple([_match(g, words) for g in match_g]),
        _target(target_g, words),
        counters,
    )


def _grouped(key: tuple[str, ...], tokens: list[Token] | None, words: list[str]) -> Grouped:
    plan = _PLANS.get(key)
    if plan is None:
        plan = _make_plan(tokens if tokens is not None else [(w, False) for w in words])
        if len(_PLANS) < _INTERN_LIMIT:
            _PLANS[key] = plan
    return _apply(plan, words)


def parse_rule_args(tokens: list[Token]) -> Grouped:
    """Group a rule's tokens; returns (chain, core, matches, target, counters).

    ``tokens`` start with ``-A CHAIN``. Raises ValueError with a message.
    """
    return _grouped(shape(tokens), tokens, [t for t, _ in tokens])


def parse_rule(body: str) -> Grouped:
    """``parse_rule_args(tokenize(body))``, without building token pairs for unquoted rules."""
    if '"' in body:
        return parse_rule_args(tokenize(body))
    words = body.split()
    if not words:
        raise ValueError("expected '-A CHAIN ...', received ''")
    return _grouped(_plain_shape(words), None, words)


def group_from_scratch(tokens: list[Token]) -> Grouped:
    """The grouping computed without the shape cache (the reference the cache must agree with)."""
    return _apply(_make_plan(tokens), [t for t, _ in tokens])
