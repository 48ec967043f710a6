"""The shape cache of the rule grouping never changes what a rule means.

``ruleargs`` decides how a rule's tokens group once per *shape* and replays that decision on
every rule of the same shape. These properties check the claim its docstring makes: any two
token lists with the same shape group identically (or fail identically) when the decision of
the first is replayed on the second, and the cached path equals the grouping from scratch.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nat_verify.netfilter import ruleargs
from nat_verify.netfilter.ruleargs import Token, group_from_scratch, parse_rule, shape, tokenize

OPTIONS = ["-s", "-d", "-p", "--protocol", "-i", "-o", "-f", "-m", "--match", "-j", "-g", "--goto", "-c",
           "--dport", "--sport", "--comment", "--set-xmark", "--to-destination", "--ctstate", "--mode",
           "!", "-A", "-5", "-", "!x", "!5", "--"]  # fmt: skip
PLAIN_ARGS = ["tcp", "TCP", "udp", "sctp", "icmp", "all", "comment", "statistic", "KUBE-SEP-X", "ACCEPT",
              "10.0.0.1/32", "80", "0x4000/0x4000", "a", "1", "12", "x y"]  # fmt: skip

plain_arg = st.one_of(st.sampled_from(PLAIN_ARGS), st.from_regex(r"[A-Za-z0-9_./:]{1,6}", fullmatch=True))
quoted_arg = st.text(alphabet='ab -!"\\', max_size=5)


@st.composite
def token_lists(draw: st.DrawFn) -> list[Token]:
    toks: list[Token] = [(draw(st.sampled_from(["-A", "-A", "--append", "-I"])), False), ("KUBE-X", False)]
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.integers(0, 4))
        if kind <= 1:
            toks.append((draw(st.sampled_from(OPTIONS)), False))
        elif kind <= 3:
            toks.append((draw(plain_arg).replace(" ", ""), False) if kind == 2 else (draw(plain_arg), True))
        else:
            toks.append((draw(quoted_arg), True))
    return [t for t in toks if t[0] or t[1]]


def _same_shape_variant(draw: st.DrawFn, toks: list[Token]) -> list[Token]:
    """Another token list with the shape of ``toks``: every blanked argument replaced."""
    out = list(toks)
    for i, key in enumerate(shape(toks)):
        if i == 0:
            continue
        if key == "":
            out[i] = (draw(plain_arg).replace(" ", "") or "z", False)
        elif key == '"' and not (toks[i - 1][0] in ("-p", "--protocol", "!") and not toks[i - 1][1]):
            out[i] = (draw(quoted_arg), True)  # (a quoted protocol after -p is kept, even "")
    return out


def _outcome(f, *args):  # type: ignore[no-untyped-def]
    try:
        return f(*args)
    except ValueError:
        return "error"


@given(st.data())
def test_replaying_a_shape_plan_equals_grouping_from_scratch(data: st.DataObject) -> None:
    first = data.draw(token_lists())
    second = _same_shape_variant(data.draw, first)
    assert shape(second) == shape(first)
    try:
        plan = ruleargs._make_plan(first)
    except ValueError:
        # a shape that does not group fails for every rule of that shape
        assert _outcome(group_from_scratch, second) == "error"
        return
    replayed = _outcome(ruleargs._apply, plan, [t for t, _ in second])
    assert replayed == _outcome(group_from_scratch, second)


@given(token_lists())
def test_cached_path_equals_grouping_from_scratch(toks: list[Token]) -> None:
    assert _outcome(ruleargs.parse_rule_args, toks) == _outcome(group_from_scratch, toks)
    if not any(q for _, q in toks):
        words = [t for t, _ in toks]
        assert ruleargs._plain_shape(words) == shape(toks)


@given(st.lists(st.sampled_from([*OPTIONS, *PLAIN_ARGS, '"a b"', '"-j"', '"\\"q\\""']), max_size=12))
def test_parse_rule_equals_tokenize_then_group(words: list[str]) -> None:
    body = " ".join(["-A", "C", *words])
    try:
        toks = tokenize(body)
    except ValueError:
        return
    assert _outcome(parse_rule, body) == _outcome(group_from_scratch, toks)


def test_past_the_cache_limits_rules_are_the_same(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # a long-lived process (fuzzing, a server) fills the caches; past their limits nothing is
    # remembered and every rule is grouped from scratch, to the same values
    from nat_verify.netfilter.parse import parse
    from tests.fuzz.seeds import dumps

    text = dumps()[-1].decode()
    expected = parse(text)
    for name in ("_PLANS", "_GROUP_IDS", "_OPTIONS", "_MATCHES", "_TARGETS"):
        monkeypatch.setattr(ruleargs, name, {})
    monkeypatch.setattr(ruleargs, "_INTERN_LIMIT", 0)
    assert parse(text) == expected
    assert not ruleargs._PLANS and not ruleargs._GROUP_IDS and not ruleargs._MATCHES
