"""Bad Kubernetes input: one KubeInputError naming the file, the line and what was wrong.

Each fixture in ``data/kube/`` marks the line the error must point at with ``# <- error``
(the line a person fixing the file would go to: the offending value, or the key that
introduced a mapping lacking a required field, or the object's first line for problems of the
object as a whole). The expected line is read from that marker, not from the loader.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nat_verify.kube import KubeInputError, load_cluster, load_clusters

DATA = Path(__file__).parent / "data" / "kube"

# fixture -> fragments the message must contain (what was expected, what was received)
CASES: dict[str, tuple[str, ...]] = {
    "malformed-yaml.yaml": ("malformed YAML",),
    "duplicate-key.yaml": ("duplicate key 'port'",),
    "not-a-mapping.yaml": ("must be a mapping", "got a list"),
    "list-item-not-mapping.yaml": ("items[1] must be a mapping", "'just a string'"),
    "unknown-apiversion.yaml": ("'discovery.k8s.io/v1'", "got 'discovery.k8s.io/v1beta1'"),
    "missing-kind.yaml": ("'kind' is required",),
    "service-no-ports.yaml": ("Service default/no-ports", "'spec.ports' must list at least one"),
    "port-out-of-range.yaml": ("'spec.ports[1].port'", "1..65535", "got 70000"),
    "targetport-out-of-range.yaml": ("'spec.ports[0].targetPort'", "got 0"),
    "nodeport-out-of-range.yaml": ("'spec.ports[0].nodePort'", "got 65536"),
    "bad-targetport-name.yaml": ("port name", "got '8080'"),
    "bad-protocol.yaml": ("TCP, UDP, SCTP", "got 'tcp'"),
    "multiport-without-names.yaml": ("'spec.ports[1].name' is required",),
    "invalid-ip.yaml": ("must be an IP address", "got '10.43.0.999'"),
    "invalid-external-ip.yaml": ("'spec.externalIPs'", "got 'not-an-ip'"),
    "invalid-cidr.yaml": ("Node node-1", "must be a CIDR", "got '10.42.1.0/33'"),
    "invalid-source-range.yaml": ("loadBalancerSourceRanges", "must be a CIDR", "198.51.100.7"),
    "invalid-cluster-cidr.yaml": ("at most one CIDR per IP family",),
    "invalid-endpoint-address.yaml": ("an IPv4 address", "got 'fd00:42::7'"),
    "slice-without-service-label.yaml": ("kubernetes.io/service-name", "got labels {'app': 'web'}"),
    "duplicate-objects.yaml": ("duplicate Pod default/web-1", "duplicate-objects.yaml:1)"),
    "unquoted-label.yaml": ("Pod default/p", "'metadata.labels.enabled'", "got True"),
    "etp-on-clusterip.yaml": ("externalTrafficPolicy", "type is ClusterIP"),
    "bad-detect-local.yaml": ("'detectLocal.bridgeInterface' is required",),
}


def marked_line(path: Path) -> int:
    lines = [n for n, text in enumerate(path.read_text().splitlines(), 1) if "# <- error" in text]
    assert len(lines) == 1, f"{path.name} must mark exactly one line"
    return lines[0]


def test_every_fixture_has_a_case() -> None:
    marked = {p.name for p in DATA.glob("*.yaml")}
    assert marked == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_names_file_and_line(name: str) -> None:
    path = DATA / name
    with pytest.raises(KubeInputError) as info:
        load_cluster([path])
    err = info.value
    assert err.file == str(path)
    assert err.line == marked_line(path)
    assert str(err).startswith(f"{path}:{err.line}: ")
    for fragment in CASES[name]:
        assert fragment in err.message


def test_malformed_json_points_at_the_missing_comma() -> None:
    # Line 6 holds the second list element, which follows line 5 without a comma.
    path = DATA / "malformed-json.json"
    with pytest.raises(KubeInputError) as info:
        load_cluster([path])
    assert (info.value.file, info.value.line) == (str(path), 6)
    assert info.value.message == "malformed JSON: Expecting ',' delimiter"


def test_errors_in_one_file_of_a_directory_name_that_file(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    bad = tmp_path / "sub" / "b.yml"
    bad.parent.mkdir()
    bad.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n2}\n---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
    )
    # n1 is defined in a.yaml (line 1) and again in sub/b.yml (line 5, after the `---`).
    with pytest.raises(KubeInputError) as info:
        load_cluster([tmp_path])
    assert (info.value.file, info.value.line) == (str(bad), 5)
    assert f"first defined at {tmp_path / 'a.yaml'}:1" in info.value.message


def test_missing_path() -> None:
    with pytest.raises(KubeInputError) as info:
        load_cluster(["/nonexistent/cluster.yaml"])
    assert info.value.file == "/nonexistent/cluster.yaml"
    assert info.value.line == 0
    assert str(info.value) == "/nonexistent/cluster.yaml: no such file or directory"


def test_directory_without_specs(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("not a spec\n")
    with pytest.raises(KubeInputError, match="no \\*.yaml"):
        load_cluster([tmp_path])
    with pytest.raises(KubeInputError, match="no \\*.yaml"):
        load_clusters([tmp_path])


def test_undecodable_bytes(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"apiVersion: v1\nkind: Node\nmetadata: {name: caf\xe9}\n")
    with pytest.raises(KubeInputError) as info:
        load_cluster([path])
    assert info.value.line == 3
    assert "UTF-8" in info.value.message


def test_str_is_file_line_message() -> None:
    err = KubeInputError("a.yaml", 7, "bad")
    assert str(err) == "a.yaml:7: bad"
    assert (err.file, err.line, err.message) == ("a.yaml", 7, "bad")


def test_json_errors_point_at_the_field(tmp_path: Path) -> None:
    path = tmp_path / "svc.json"
    path.write_text(
        "{\n"  # 1
        '  "apiVersion": "v1",\n'  # 2
        '  "kind": "Service",\n'  # 3
        '  "metadata": {"name": "s"},\n'  # 4
        '  "spec": {\n'  # 5
        '    "selector": {"app": "s"},\n'  # 6
        '    "ports": [\n'  # 7
        '      {"port": 80,\n'  # 8
        '       "nodePort": 99999}\n'  # 9: the bad value
        "    ]\n"
        "  }\n"
        "}\n"
    )
    with pytest.raises(KubeInputError) as info:
        load_cluster([path])
    assert info.value.line == 9
    assert "'spec.ports[0].nodePort' must be an integer in 1..65535 (got 99999)" in str(info.value)


def test_json_duplicate_key_and_non_object(tmp_path: Path) -> None:
    dup = tmp_path / "dup.json"
    dup.write_text('{"apiVersion": "v1",\n "kind": "Node",\n "kind": "Pod"}\n')
    with pytest.raises(KubeInputError) as info:
        load_cluster([dup])
    assert (info.value.file, info.value.line) == (str(dup), 3)
    assert "duplicate key 'kind'" in info.value.message
    arr = tmp_path / "arr.json"
    arr.write_text('\n\n[{"apiVersion": "v1", "kind": "Node"}]\n')
    with pytest.raises(KubeInputError) as info:
        load_cluster([arr])
    assert info.value.line == 3
    assert "must be a mapping" in info.value.message


@pytest.mark.parametrize("bad", ["010.0.0.1", "256.1.1.1", "1.2.3", "1.2.3.4.5", "10.0.0.1/32"])
def test_invalid_ipv4_spellings(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nstatus:\n  podIP: '{bad}'\n"
    )
    with pytest.raises(KubeInputError) as info:
        load_cluster([path])
    assert info.value.line == 5
    assert f"must be an IP address (got '{bad}')" in info.value.message
