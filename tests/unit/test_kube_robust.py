"""Hostile manifests end in one KubeInputError naming the file and line, quickly.

Alias bombs, deep nesting, control characters, huge integers, lone surrogates, merge keys and
names the API server would refuse. Expected lines are where the input puts the problem (shown
in each case); messages are checked for the words a reader needs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nat_verify.kube import KubeInputError, load_cluster
from nat_verify.kube.documents import ALIAS_BUDGET, MAX_DEPTH, parse_text
from nat_verify.kube.jsontext import parse_json
from nat_verify.kube.names import dns1035_label, dns1123_label, dns1123_subdomain


def _error(text: str, file: str = "m.yaml") -> KubeInputError:
    with pytest.raises(KubeInputError) as e:
        parse_text(text, file)
    assert e.value.file == file
    return e.value


def _bomb(levels: int) -> str:
    # each level names the previous one 9 times: 9**levels strings from ~60 bytes a level
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_at_the_alias_that_crosses_the_budget() -> None:
    text = "kind: Service\n" + _bomb(8)  # 9**9 = 387 million strings; 600 bytes
    err = _error(text)
    # a{k} stands for 9**(k+1) values, so the uses of a5 (line 8 = 2 + 6) cross 1,000,000 in total
    assert 9**6 * 9 > ALIAS_BUDGET > 9**5 * 9 + 9**5
    assert err.line == 8
    assert "alias" in err.message


def test_aliases_within_the_budget_are_read_as_shared_values() -> None:
    (obj,) = parse_text("kind: X\n" + _bomb(2), "m.yaml")
    assert len(obj.data["a2"]) == 9 and obj.data["a2"][0] is obj.data["a1"]


def test_recursive_alias_is_refused() -> None:
    err = _error("kind: X\nspec: &s\n  again: *s\n")
    assert err.line == 3 and "contains it" in err.message


@pytest.mark.parametrize("opening", ["[", "{a: ", "- "])
def test_deep_nesting_is_refused_with_its_line_at_any_depth(opening: str) -> None:
    # 100,000 levels used to overflow the C stack of the YAML composer (a crash, not an error)
    closing = {"[": "]", "{a: ": "}", "- ": ""}[opening]
    text = "kind: X\nspec:\n  deep: " + opening * 100_000 + "1" + closing * 100_000 + "\n"
    if opening == "- ":
        text = "kind: X\nspec:\n  deep:\n    " + opening * 100_000 + "1\n"
    err = _error(text)
    assert err.line in (3, 4) and f"nested more than {MAX_DEPTH}" in err.message


def test_nesting_below_the_limit_is_read() -> None:
    (obj,) = parse_text("kind: X\nspec: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n", "m.yaml")
    assert obj.data["kind"] == "X"


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1b", "\x7f", "\x9b"])
def test_control_characters_are_refused_with_their_line(char: str) -> None:
    err = _error(f"kind: X\nmetadata:\n  name: a{char}b\n")
    assert err.line == 3 and f"U+{ord(char):04X}" in err.message


def test_integer_past_the_conversion_limit_names_its_line() -> None:
    err = _error("kind: X\nspec:\n  port: " + "9" * 5000 + "\n")
    assert err.line == 3 and "digits" in err.message and "5,000 characters" in err.message


def test_impossible_timestamp_is_an_error_not_a_traceback() -> None:
    err = _error("kind: X\nmetadata:\n  creationTimestamp: 2001-02-30\n")
    assert err.line == 3 and "timestamp" in err.message


def test_merge_keys_follow_yaml_precedence_without_calling_them_duplicates() -> None:
    (obj,) = parse_text(
        "kind: X\nbase: &b {x: 1, y: 2}\nother: &o {y: 5, z: 6}\nc:\n  <<: [*b, *o]\n  x: 3\n", "m.yaml"
    )
    # explicit keys win over merged ones; in a merge list, earlier mappings win
    assert obj.data["c"] == {"x": 3, "y": 2, "z": 6}


def test_duplicate_explicit_keys_are_still_refused() -> None:
    err = _error("kind: X\nspec:\n  port: 1\n  port: 2\n")
    assert err.line == 4 and "duplicate key 'port'" in err.message


def test_merge_of_a_scalar_is_refused() -> None:
    err = _error("kind: X\nspec:\n  <<: 3\n")
    assert "merge key" in err.message


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('{"kind": "X",\n "a": "\\ud800"}', 2, "surrogate"),
        ('{"kind": "X",\n "\\udc00": 1}', 2, "surrogate"),
        ('{"kind": "X",\n "a": ' + "9" * 5000 + "}", 2, "digits"),
        ("9" * 5000, 1, "digits"),
        ('{"kind": "X",\n "a": ' + "[" * 50_000 + "]" * 50_000 + "}", 2, "nested more than"),
        ('{"kind": "X",\n "a": "x\x00"}', 2, "control character"),
    ],
    ids=["lone-high-surrogate", "lone-low-surrogate-key", "huge-integer", "huge-top-level-integer", "deep", "nul"],
)
def test_json_errors_name_the_line(text: str, line: int, words: str) -> None:
    err = _error(text, "m.json")
    assert err.line == line
    assert words in err.message.lower()


def test_json_surrogate_pair_is_fine() -> None:
    value, _ = parse_json('{"a": "\\ud83d\\ude00"}', "m.json")
    assert value["a"] == "\U0001f600"


# ---- names --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("check", "good", "bad"),
    [
        (dns1123_label, ["a", "0", "a-b", "1ab", "x" * 63], ["", "-a", "a-", "A", "a_b", "a.b", "x" * 64, "a b", "ä"]),
        (dns1035_label, ["a", "a-b", "a1", "x" * 63], ["1ab", "-a", "a-", "A", "a.b", "x" * 64]),
        (dns1123_subdomain, ["a", "a.b", "0.a-b.c", "x" * 253], ["", ".a", "a.", "a..b", "a.-b", "A.b", "a/b", "x" * 254]),
    ],
)
def test_name_rules(check, good: list[str], bad: list[str]) -> None:  # type: ignore[no-untyped-def]
    for name in good:
        assert check(name) is None, name
    for name in bad:
        assert check(name) is not None, name


SERVICE = """apiVersion: v1
kind: Service
metadata:
  name: {name}
  namespace: {namespace}
spec:
  clusterIP: 10.96.0.10
  selector: {{app: web}}
  ports:
  - port: 80
"""


@pytest.mark.parametrize(
    ("name", "namespace", "line", "field"),
    [
        ("a:b", "default", 4, "metadata.name"),
        ("a/b", "default", 4, "metadata.name"),
        ("web", "team/x", 5, "metadata.namespace"),
        ('"w\\x1beb"', "default", 4, "metadata.name"),
        ("x" * 70_000, "default", 4, "metadata.name"),
        ("Web", "default", 4, "metadata.name"),
        ("1web", "default", 4, "metadata.name"),
    ],
    ids=["colon", "slash", "namespace-slash", "escape", "70000-characters", "upper-case", "leading-digit"],
)
def test_invalid_names_point_at_their_field_and_line(tmp_path: Path, name: str, namespace: str, line: int, field: str) -> None:
    f = tmp_path / "svc.yaml"
    f.write_text(SERVICE.format(name=name, namespace=namespace))
    with pytest.raises(KubeInputError) as e:
        load_cluster(f)
    assert e.value.file == str(f)
    assert e.value.line == line
    assert f"'{field}'" in e.value.message
    assert len(str(e.value)) < 400  # a 70,000-character name is not echoed whole


def test_valid_names_load(tmp_path: Path) -> None:
    f = tmp_path / "svc.yaml"
    f.write_text(SERVICE.format(name="web-1", namespace="team-x"))
    cluster = load_cluster(f)
    assert [s.name for s in cluster.services] == ["web-1"]
