"""``workload delete`` on GKE: only what elastix made, and only the object that was read.

A JobSet is deleted when it is a Pathways workload (as for every command) whose labels prove it
elastix's (:func:`~elastix.workload.labels.elastix_made`: submit stamps them on every manifest
it sends), or when the user names it with ``--foreign`` (xpk's, gcluster's, their own YAML's).
Its DELETE carries the uid that was read as a precondition (Kubernetes ``DeleteOptions.
preconditions``): one deleted and made again in between is the API server's 409, and nothing is
deleted. The head's ServiceAccount, Role and RoleBinding go only when they carry the same
labels (:func:`elastix.backends.gke.head_access.delete_own`), also when no JobSet is left (a
create that failed); a name that matches nothing deletes nothing, and says so.
"""

from __future__ import annotations

from elastix.backends.gke import head_access
from elastix.backends.gke.api import Namespace
from elastix.clients.kube import ApiUnavailable
from elastix.errors import ConflictError, NotFoundError, UsageError
from elastix.workload import labels


def delete(ns: Namespace, name: str, foreign: bool = False) -> tuple[str | None, bool]:
    """Delete workload ``name``'s JobSet and head objects as the module says; (a line saying
    what was left or removed, or None; whether a JobSet was deleted).

    Raises:
        UsageError: the JobSet is not a Pathways workload, or not elastix's and not
            ``foreign`` (nothing deleted).
        NotFoundError: no JobSet, and no head object of elastix's (nothing deleted).
        ConflictError: the JobSet was replaced while it was being deleted.
    """
    try:
        js = ns.jobset(name)
    except NotFoundError as e:
        if isinstance(e, ApiUnavailable):
            raise
        # No JobSet; the head's objects of a create whose outcome was unknown may be left.
        gone, left = head_access.delete_own(ns, name)
        if gone:
            return ("only its head's ServiceAccount, Role and RoleBinding were left (by a "
                    "create that failed): removed" + (
                        f"; {head_access.left_alone(name, left)}" if left else "")), False
        raise NotFoundError(f"{e.message}; nothing was deleted" + (
            f" ({head_access.left_alone(name, left)})" if left else ""),
            hint=e.hint) from None
    md = js.get("metadata") or {}
    if not foreign and not labels.elastix_made(md.get("labels"), name):
        who = labels.made_by(md.get("labels"))
        by = (f"was made by {who}, not by elastix" if who not in ("other", "elastix") else
              f"does not carry elastix's labels ({labels.WORKLOAD}: {name} and "
              f"{labels.MANAGED_BY}: {labels.MANAGED_BY_VALUE}): elastix did not make it")
        raise UsageError(f"JobSet {name} in namespace {ns.name} {by}: nothing was deleted",
                         hint=f"delete it with the tool that made it, or name it: elastix "
                              f"workload delete {name} --foreign")
    try:
        with ns.tr(f"deleting workload {name}", name=name, namespace=ns.name):
            ns.request("DELETE", ns.path("jobsets", name),
                       body={"apiVersion": "v1", "kind": "DeleteOptions",
                             "propagationPolicy": "Background",
                             "preconditions": {"uid": md.get("uid")}})
    except ConflictError as e:
        raise ConflictError(
            f"workload {name} was replaced while it was being deleted (the JobSet read, uid "
            f"{md.get('uid')}, is gone; another has its name): nothing was deleted",
            hint=f"look at the one there now: elastix workload status {name}") from e
    # The head's account, if submit made one (deleting what is not there is no error).
    _, left = head_access.delete_own(ns, name)
    return (head_access.left_alone(name, left) if left else None), True
