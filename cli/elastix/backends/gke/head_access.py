"""The head pod's ServiceAccount, Role and RoleBinding on the cluster: made before the JobSet,
owned by it once it exists, and never left without an owner by a create that failed.

The objects (``elastix.workload.rbac``) must exist before the JobSet: a pod naming a missing
ServiceAccount is rejected. So a create that fails after them has something to undo:

- the API server certainly made no JobSet (it answered and refused: 4xx, or its own 429/503
  after the retries): the objects this create made are deleted at once, with no further read
  (the API server may still be refusing reads: issue 34 saw them left behind that way);
- the answer is unknown (a timeout, a cut connection, a 5xx from elsewhere): the JobSet may
  exist, or still be being made. If it is there, it is made their owner; if not, they are left
  (deleting them could break a JobSet that the API server makes a moment later, whose head
  would then be refused) and the error says so: ``workload delete`` removes them.

Objects already owned by a JobSet (a workload of the same name) are never deleted here, and
after a successful create the new JobSet owns every one of them (a stale owner's garbage
collector would otherwise take them from the new workload).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from elastix import interrupts
from elastix.backends.gke.api import Namespace
from elastix.clients.kube import (
    JOBSET_GROUP,
    JOBSET_VERSION,
    ApiUnavailable,
    Busy,
    Forbidden,
    api_path,
)
from elastix.errors import (
    BackendError,
    ConflictError,
    ElastixError,
    ManifestError,
    NotFoundError,
)
from elastix.workload import rbac


@dataclasses.dataclass(frozen=True)
class Applied:
    """One object applied for the head: where it is, and whether a JobSet already owned it."""

    api_version: str
    plural: str
    name: str
    owned: bool  # owned by a JobSet before this create: not this create's to delete


def apply(ns: Namespace, manifest: dict[str, Any], dry_run: bool) -> list[Applied]:
    """Server-side apply the head's objects when the manifest asks for them (objects left by a
    JobSet deleted with kubectl are taken over, not a conflict); what was applied.

    Raises:
        Forbidden: the identity may not make them (what was made before is undone).
    """
    name = rbac.wanted(manifest)
    if name is None:
        return []
    applied: list[Applied] = []
    try:
        for api_version, plural, obj in rbac.objects(name, ns.name):
            obj_name = obj["metadata"]["name"]
            # Ctrl-C held while it is in flight: the API server may make it whatever the
            # client does, so it is recorded (to undo) before the Ctrl-C acts.
            with interrupts.deferred(), ns.tr(f"granting workload {name}'s head read access "
                                              f"to its pods ({obj['kind']})", namespace=ns.name):
                out = ns.request("PATCH", api_path(api_version, plural, obj_name, ns.name),
                                 {"fieldManager": "elastix", "force": "true",
                                  "dryRun": "All" if dry_run else None}, body=obj,
                                 content_type="application/apply-patch+yaml")
                if not dry_run:
                    owners = ((out or {}).get("metadata") or {}).get("ownerReferences") \
                        if isinstance(out, dict) else None
                    applied.append(Applied(api_version, plural, obj_name, bool(owners)))
    except BaseException as err:
        try:
            with interrupts.deferred():  # a second Ctrl-C must not cut the undo short
                delete(ns, applied)
        except ElastixError as cleanup:
            _hint(err, f"the head's objects made so far could not be removed ({cleanup.message})"
                       f": `elastix workload delete {name}` removes them")
        raise
    return applied


def own(ns: Namespace, applied: list[Applied], jobset: Any, notices: list[str]) -> None:
    """Make the JobSet the owner of the head's objects, so Kubernetes' garbage collector
    deletes them with a JobSet deleted by other tools (ownerReferences: "Owners and
    Dependents", kubernetes.io/docs/concepts/overview/working-with-objects/owners-dependents/).
    The workload runs either way: a refusal is a note, not a failed submit."""
    md = (jobset.get("metadata") or {}) if isinstance(jobset, dict) else {}
    if not applied or not md.get("uid"):
        return
    owner = {"apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}", "kind": "JobSet",
             "name": md.get("name"), "uid": md["uid"]}
    try:
        for a in applied:
            with ns.tr(f"making the JobSet own {a.plural} {a.name}", namespace=ns.name):
                ns.request("PATCH", api_path(a.api_version, a.plural, a.name, ns.name),
                           body={"metadata": {"ownerReferences": [owner]}},
                           content_type="application/merge-patch+json")
    except BackendError as e:
        notices.append(f"the head pod's account, Role and RoleBinding are not owned by the "
                       f"JobSet ({e}): `elastix workload delete` removes them, deleting the "
                       "JobSet by other means leaves them")


def delete(ns: Namespace, applied: list[Applied]) -> int:
    """Delete the applied objects no JobSet owned (reverse order; already gone is fine); how
    many were there."""
    gone = 0
    for a in reversed([a for a in applied if not a.owned]):
        try:
            with ns.tr(f"deleting {a.plural} {a.name}", namespace=ns.name):
                ns.request("DELETE", api_path(a.api_version, a.plural, a.name, ns.name))
            gone += 1
        except NotFoundError:
            pass
    return gone


def delete_own(ns: Namespace, workload: str) -> tuple[int, list[str]]:
    """Delete the workload's head objects that are elastix's (``workload delete``): each is
    read first, deleted only when its labels say elastix made it for ``workload``
    (:func:`elastix.workload.labels.elastix_made`), and with the uid read as a precondition,
    so one made again in between by someone else is not deleted (409). Returns how many were
    deleted, and the kinds of those left because they are not elastix's."""
    from elastix.workload.labels import elastix_made

    gone, left = 0, []
    for api_version, plural, body in rbac.objects(workload, ns.name):
        name, kind = body["metadata"]["name"], body["kind"]
        path = api_path(api_version, plural, name, ns.name)
        try:
            with ns.tr(f"reading {kind} {name}", namespace=ns.name):
                obj = ns.request("GET", path)
        except NotFoundError:
            continue
        md = (obj or {}).get("metadata") or {}
        if not elastix_made(md.get("labels"), workload) or not md.get("uid"):
            left.append(kind)
            continue
        try:
            with ns.tr(f"deleting {kind} {name}", namespace=ns.name):
                ns.request("DELETE", path, body={"apiVersion": "v1", "kind": "DeleteOptions",
                                                 "preconditions": {"uid": md["uid"]}})
            gone += 1
        except NotFoundError:
            pass
        except ConflictError:  # replaced since it was read: not the object that was checked
            left.append(kind)
    return gone, left


def left_alone(workload: str, kinds: list[str]) -> str:
    """The words for head objects :func:`delete_own` left because they are not elastix's."""
    return (f"{_and(kinds)} {rbac.service_account(workload)} "
            f"{'are' if len(kinds) > 1 else 'is'} not elastix's (no elastix.dev/workload and "
            "app.kubernetes.io/managed-by=elastix labels): left as "
            f"{'they are' if len(kinds) > 1 else 'it is'}")


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def not_created(err: BaseException) -> bool:
    """Whether a create that raised ``err`` certainly made no object: the API server answered
    and refused (4xx, or its own 429/503)."""
    if isinstance(err, Busy):
        return err.not_processed
    return isinstance(err, (ManifestError, NotFoundError, Forbidden))


def after_failed_create(ns: Namespace, name: str, applied: list[Applied], err: BaseException,
                        notices: list[str], sent: bool = True) -> None:
    """Undo or adopt the head's objects after the JobSet's create raised ``err`` (see the
    module's docstring); a problem doing so is added to ``err``'s hint, never raised over it.
    ``sent`` False: the JobSet's POST was never sent (Ctrl-C before it), so none can exist."""
    if not applied:
        return
    left = f"the head's ServiceAccount, Role and RoleBinding {rbac.service_account(name)}"
    try:
        if not sent or not_created(err):
            delete(ns, applied)
            return
        if not isinstance(err, Exception):
            return  # Ctrl-C: no more requests; delete removes them
        try:
            jobset = ns.jobset(name)
        except ApiUnavailable:
            raise
        except NotFoundError:
            _hint(err, f"{left} are left, in case the JobSet is still being made: check with "
                       f"`elastix workload status {name}`; `elastix workload delete {name}` "
                       "removes them (and the JobSet, if it was made)")
            return
        own(ns, applied, jobset, notices)
        _hint(err, f"a JobSet {name} exists now (this create may have made it before its "
                   f"answer was lost): check with `elastix workload status {name}`")
    except ElastixError as cleanup:
        _hint(err, f"{left} could not be removed ({cleanup.message}): `elastix workload "
                   f"delete {name}` removes them")


def _hint(err: BaseException, text: str) -> None:
    if isinstance(err, ElastixError):
        err.hint = f"{err.hint}; {text}" if err.hint else text
