"""RBAC for service-account tokens in the fake API server: what a pod's own token may do.

Only requests carrying a token the test registered (``POST /_fake/service_account_token``,
``{"token", "namespace", "name"}``: a pod's mounted token, which the real API server maps to
``system:serviceaccount:<namespace>:<name>``) are authorized; any other request (the tests'
kubeconfig user) is let through as before, as a cluster admin's would be.

The decision is Kubernetes' RBAC authorizer's (kubernetes ``plugin/pkg/auth/authorizer/rbac/
rbac.go`` ``RuleAllows`` over the rules of every RoleBinding in the request's namespace and every
ClusterRoleBinding naming the account; the matchers of ``pkg/apis/rbac/v1/
evaluation_helpers.go``: ``VerbMatches``, ``APIGroupMatches``, ``ResourceMatches``,
``ResourceNameMatches``, where ``*`` matches all and an empty ``resourceNames`` any name). The
verb is the request's (apiserver ``pkg/endpoints/request/requestinfo.go``: GET of a name is
``get``, of a collection ``list`` or, with ``watch=true``, ``watch``; POST ``create``; PUT
``update``; PATCH ``patch``; DELETE ``delete`` or ``deletecollection``). Discovery is allowed to
every authenticated user (the ``system:discovery`` ClusterRole bound to
``system:authenticated``). A refusal is the 403 ``Forbidden`` Status with the message of
apiserver ``pkg/endpoints/handlers/responsewriters/errors.go`` ``forbiddenMessage``.

Not modelled: aggregated ClusterRoles, non-resource URLs, impersonation, token expiry.
"""

from __future__ import annotations

RBAC = "rbac.authorization.k8s.io"


def verb(method: str, name: str | None, query) -> str:
    """The RBAC verb of a resource request."""
    if method == "GET":
        if name is not None:
            return "get"
        return "watch" if query.get("watch") in ("true", "1") else "list"
    if method == "DELETE":
        return "delete" if name is not None else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def _matches(rule: dict, verb_: str, group: str, resource: str, name: str | None) -> bool:
    verbs, groups = rule.get("verbs") or [], rule.get("apiGroups") or []
    resources, names = rule.get("resources") or [], rule.get("resourceNames") or []
    sub = resource.partition("/")[2]
    return (("*" in verbs or verb_ in verbs)
            and ("*" in groups or group in groups)
            and ("*" in resources or resource in resources
                 or (bool(sub) and f"*/{sub}" in resources))
            and (not names or name in names))


def _bound(binding: dict, ns: str, sa: str) -> bool:
    return any(s.get("kind") == "ServiceAccount" and s.get("name") == sa
               and s.get("namespace") == ns for s in binding.get("subjects") or [])


def allowed(store, account: tuple[str, str], verb_: str, group: str, resource: str,
            namespace: str | None, name: str | None) -> bool:
    """Whether ``account`` (namespace, name) may ``verb_`` the resource (``pods/log`` for a
    subresource) named ``name`` in ``namespace``, by the Roles and ClusterRoles bound to it."""
    sa_ns, sa = account

    def kind(plural: str):
        return store.resource(RBAC, "v1", plural)

    rules: list[dict] = []
    bindings = [(b, namespace) for b in store.list(kind("rolebindings"), namespace)] \
        if namespace else []
    bindings += [(b, None) for b in store.list(kind("clusterrolebindings"))]
    for binding, ns in bindings:
        if not _bound(binding, sa_ns, sa):
            continue
        ref = binding.get("roleRef") or {}
        role = (store.get(kind("roles"), ns, ref.get("name", "")) if ref.get("kind") == "Role"
                and ns else store.get(kind("clusterroles"), None, ref.get("name", "")))
        rules += (role or {}).get("rules") or []
    return any(_matches(r, verb_, group, resource, name) for r in rules)


def forbidden_message(account: tuple[str, str], verb_: str, group: str, plural: str,
                      resource: str, namespace: str | None, name: str | None) -> str:
    """The API server's message for a refused request (``apierrors.NewForbidden`` around
    ``forbiddenMessage``)."""
    user = f"system:serviceaccount:{account[0]}:{account[1]}"
    what = f"{plural}.{group}" if group else plural
    subject = f'{what} "{name}"' if name else what
    where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    return (f'{subject} is forbidden: User "{user}" cannot {verb_} resource "{resource}" in API '
            f'group "{group}" {where}')
