"""Object metadata shared by every kind: name, namespace, labels, and the message prefix."""

from __future__ import annotations

import attrs

from nat_verify.kube.documents import RawObject
from nat_verify.kube.fields import Fields
from nat_verify.kube.names import namespace_problem, object_name_problem
from nat_verify.model.cluster import OwnerRef, SourceRef


@attrs.frozen(eq=False)
class Meta:
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    deleting: bool  # metadata.deletionTimestamp is set
    source: SourceRef
    fields: Fields  # the whole object, with messages prefixed "Kind ns/name"
    owner: OwnerRef | None = None  # the controlling ownerReferences entry
    lines: tuple[tuple[str, int], ...] = ()  # metadata.name, metadata.labels


def read_meta(obj: RawObject, kind: str, *, namespaced: bool = True) -> Meta:
    top = Fields(obj.file, obj.data, kind)
    md = top.mapping("metadata")
    if md is None:
        top.fail("metadata", "is required (with at least a name)")
    name = md.text("name", required=True)
    problem = object_name_problem(kind, name)
    if problem:
        md.fail("name", problem)
    # The API server puts an object without a namespace into the request's namespace, which
    # for `kubectl apply -f` of a plain manifest is "default".
    namespace = md.text("namespace", "default") or "default" if namespaced else ""
    problem = namespace_problem(namespace) if namespaced else None
    if problem:
        md.fail("namespace", problem)
    what = f"{kind} {namespace}/{name}" if namespaced else f"{kind} {name}"
    fields = Fields(obj.file, obj.data, what)
    md = fields.mapping_or_empty("metadata")  # again, so messages name the object
    lines = tuple((md.field(k), md.line(k)) for k in ("name", "labels", "annotations") if md.has(k))
    return Meta(
        name=name,
        namespace=namespace,
        labels=md.string_map("labels") or {},
        annotations=md.string_map("annotations") or {},
        deleting=md.has("deletionTimestamp"),
        source=SourceRef(obj.file, obj.line),
        fields=fields,
        owner=_controller(md),
        lines=lines,
    )


def _controller(md: Fields) -> OwnerRef | None:
    """The ``ownerReferences`` entry with ``controller: true`` (the first one if none says so)."""
    refs = [(r.text("kind"), r.text("name"), r.boolean("controller", False)) for r in md.items("ownerReferences")]
    chosen = next((r for r in refs if r[2]), refs[0] if refs else None)
    if chosen is None or not chosen[0] or not chosen[1]:
        return None
    return OwnerRef(chosen[0], chosen[1])
