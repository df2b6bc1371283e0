"""A fake Kubernetes API server over real HTTP on 127.0.0.1, with JobSet semantics.

Run it as a process::

    python tests/fakes/fake_k8s.py --port-file /tmp/port [--jobset-crd PATH] [--tls-dir DIR]

It serves discovery (so ``kubectl`` and the official client both work), generic CRUD for built-in
kinds and for any CRD created through the API (``kubectl apply`` of the JobSet release manifest
works), list/watch with label and field selectors, pod logs (``follow`` streams), and the JobSet
controller of ``k8s_jobset``. ``POST /_fake/config`` (JSON body, fields of ``Config``) changes
timings and scripted faults; ``POST /_fake/log`` appends log lines (``"timestamps": true``: each
line led by its RFC3339 time, a recorded log);
``GET /_fake/requests`` is the log of every API request (method, path, query, and a DELETE's
body: its DeleteOptions; ``POST`` with ``{"clear": true}`` also empties it);
``POST /_fake/restart_container`` restarts one container in place (its log so far becomes the
``previous=true`` log); ``POST /_fake/cut`` cuts the log streams of a pod;
``POST /_fake/kueue`` installs Kueue's kinds and turns its visibility API on or off, ``POST
/_fake/kueue_workload`` sets a JobSet's Kueue Workload status, ``POST /_fake/kueue_clock``
advances Kueue's WaitForPodsReady clock (``k8s_kueue``);
``POST /_fake/rotate_log`` rotates one container's log as the kubelet does (only the new file
is served); ``POST /_fake/service_account_token`` (``token``, ``namespace``, ``name``) makes a
bearer token a service account's, whose requests then pass RBAC (``k8s_rbac``). Dry-run, strict
field validation for CRDs, 409 on existing names and
preconditions on delete behave as the real API server's do. Creates and updates pass the
admission rules of ``k8s_admission`` and ``k8s_jobset_webhook`` (Kubernetes' name and label
rules, the JobSet CRD's CEL rules and the JobSet v0.12.0 webhook), refused with the 422 Status a
real API server sends.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import dataclasses
import datetime as dt
import functools
import json
import os
import re
import sys

import yaml
from aiohttp import web

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import k8s_jobset_webhook  # noqa: E402
import k8s_kueue  # noqa: E402
import k8s_rbac  # noqa: E402
from k8s_admission import invalid_status, object_meta, pod_and_job  # noqa: E402
from k8s_jobset import Cluster, Config  # noqa: E402
from k8s_store import Resource, Store, is_builtin, merge_patch, now, ts  # noqa: E402
from k8s_validate import unknown_fields  # noqa: E402

JSON = "application/json"


def status(code: int, reason: str, message: str, details: dict | None = None) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    return web.json_response(body, status=code)


def not_found(res: Resource, name: str) -> web.Response:
    what = f"{res.plural}.{res.group}" if res.group else res.plural
    return status(
        404,
        "NotFound",
        f'{what} "{name}" not found',
        {"name": name, "group": res.group, "kind": res.plural},
    )


def precondition_failed(res: Resource, ns: str | None, name: str, uid: str,
                        actual: str) -> web.Response:
    """A delete whose uid precondition does not hold, as the API server answers it: storage's
    ``checkPreconditions`` (k8s.io/apiserver ``pkg/storage/etcd3/store.go``: "Precondition
    failed: UID in precondition: %v, UID in object meta: %v") as an invalid-object
    ``StorageError`` (``pkg/storage/errors.go``: "StorageError: %s, Code: %d, Key: %s,
    ResourceVersion: %d, AdditionalErrorMsg: %s", code 4), which ``InterpretDeleteError``
    (``pkg/storage/errors/storage.go``) makes a 409 ``NewConflict``: "Operation cannot be
    fulfilled on %s %q: %v" (k8s.io/apimachinery ``pkg/api/errors/errors.go``). The key is
    etcd's: ``/registry/<group>/<plural>/...`` for a custom resource, without the group for a
    built-in one."""
    what = f"{res.plural}.{res.group}" if res.group else res.plural
    key = "/".join(p for p in ("/registry", "" if is_builtin(res) else res.group, res.plural,
                               ns or "", name) if p)
    return status(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {what} "{name}": StorageError: invalid object, '
        f"Code: 4, Key: {key}, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
        f"UID in precondition: {uid}, UID in object meta: {actual}",
        {"name": name, "group": res.group, "kind": res.plural},
    )


def _user_metadata(meta: dict) -> dict:
    """What of an update's or a patch's metadata a client may change (the rest is the server's:
    name, uid, resourceVersion, ...)."""
    return {k: v for k, v in meta.items()
            if k in ("labels", "annotations", "finalizers", "ownerReferences")}


class Api:
    """aiohttp handlers. Path parsing follows the API server's URL layout."""

    def __init__(self, store: Store, cluster: Cluster, token: str | None = None) -> None:
        self.store, self.cluster = store, cluster
        self.token = token  # when set, every API request must carry it as a bearer token
        self.requests: list[dict] = []  # every API request (not /_fake): GET /_fake/requests
        # bearer token -> (namespace, name) of a service account: its requests pass RBAC
        # (k8s_rbac); POST /_fake/service_account_token registers one
        self.accounts: dict[str, tuple[str, str]] = {}
        self.kueue = k8s_kueue.Kueue(store)  # POST /_fake/kueue installs it (k8s_kueue)

    # --- discovery --------------------------------------------------------------------------

    def discovery(self, parts: list[str]) -> web.Response | None:
        gv = self.store.group_versions()
        if parts == ["version"]:
            return web.json_response(
                {
                    "major": "1",
                    "minor": "32",
                    "gitVersion": "v1.32.0-fake",
                    "platform": "linux/amd64",
                }
            )
        if parts in (["healthz"], ["readyz"], ["livez"]):
            return web.Response(text="ok")
        if parts == ["api"]:
            return web.json_response(
                {
                    "kind": "APIVersions",
                    "versions": gv.get("", []),
                    "serverAddressByClientCIDRs": [],
                }
            )
        if parts == ["apis"]:
            return web.json_response(
                {
                    "kind": "APIGroupList",
                    "apiVersion": "v1",
                    "groups": [self._group(g, vs) for g, vs in sorted(gv.items()) if g],
                }
            )
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in gv:
            return web.json_response(self._group(parts[1], gv[parts[1]]))
        if (len(parts) == 2 and parts[0] == "api") or (len(parts) == 3 and parts[0] == "apis"):
            group, version = ("", parts[1]) if parts[0] == "api" else (parts[1], parts[2])
            if version not in gv.get(group, []):
                return None
            resources = []
            for (g, v, _), r in sorted(self.store.resources.items()):
                if (g, v) != (group, version):
                    continue
                verbs = [
                    "create",
                    "delete",
                    "deletecollection",
                    "get",
                    "list",
                    "patch",
                    "update",
                    "watch",
                ]
                resources.append(
                    {
                        "name": r.plural,
                        "singularName": r.kind.lower(),
                        "namespaced": r.namespaced,
                        "kind": r.kind,
                        "verbs": verbs,
                        "shortNames": list(r.short_names),
                    }
                )
                for sub in ("status",) + (("log",) if r.plural == "pods" else ()):
                    resources.append(
                        {
                            "name": f"{r.plural}/{sub}",
                            "singularName": "",
                            "namespaced": r.namespaced,
                            "kind": r.kind if sub == "status" else "Pod",
                            "verbs": ["get", "patch", "update"],
                        }
                    )
            return web.json_response(
                {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": f"{group}/{version}" if group else version,
                    "resources": resources,
                }
            )
        return None

    @staticmethod
    def _group(g: str, vs: list[str]) -> dict:
        versions = [{"groupVersion": f"{g}/{v}", "version": v} for v in vs]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": g,
            "versions": versions,
            "preferredVersion": versions[0],
        }

    # --- routing ----------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if parts[:1] == ["_fake"]:
            return await self.admin(parts[1:], request)
        seen = {"method": request.method, "path": request.path, "query": dict(request.query)}
        self.requests.append(seen)
        if self.token and request.headers.get("Authorization") != f"Bearer {self.token}":
            return status(401, "Unauthorized", "Unauthorized")
        queue = self.kueue.visibility_path(parts)
        if queue is not None and request.method == "GET":
            if not (self.kueue.installed and self.kueue.visibility):
                return web.Response(status=404, text="404 page not found\n")
            return web.json_response(self.kueue.pending_workloads(*queue))
        if request.method == "GET":
            found = self.discovery(parts)
            if found is not None:
                return found
        route = self._route(parts)
        if route is None:
            return web.Response(status=404, text="404 page not found\n")
        res, ns, name, sub = route
        if isinstance(res, str):
            return status(404, "NotFound", "the server could not find the requested resource")
        refused = self.authorize(request, res, ns, name, sub)
        if refused is not None:
            return refused
        if ns is not None and res.plural != "namespaces" and request.method in ("POST", "PUT"):
            if self.store.get(self.store.resource("", "v1", "namespaces"), None, ns) is None:
                return status(
                    404,
                    "NotFound",
                    f'namespaces "{ns}" not found',
                    {"name": ns, "kind": "namespaces"},
                )
        q = request.query
        try:
            if request.method == "GET" and name is None:
                if q.get("watch") in ("true", "1"):
                    return await self.watch(request, res, ns)
                return self.list(res, ns, q)
            if request.method == "GET" and sub == "log":
                return await self.pod_log(request, ns, name)
            if request.method == "GET":
                obj = self.store.get(res, ns, name)
                return web.json_response(obj) if obj else not_found(res, name)
            body = await self._body(request)
            if request.method == "DELETE" and body is not None:
                seen["body"] = body  # the DeleteOptions: grace and preconditions
            if request.method == "POST" and name is None:
                return self.create(res, ns, body, q)
            if request.method == "PUT":
                return self.replace(res, ns, name, sub, body, q)
            if request.method == "PATCH":
                return self.patch(res, ns, name, body, request.content_type, q)
            if request.method == "DELETE":
                if name is None:
                    return self.delete_collection(res, ns, q)
                return self.delete(res, ns, name, body or {}, q)
        except ValueError as err:
            return status(400, "BadRequest", str(err))
        return status(405, "MethodNotAllowed", f"{request.method} is not supported here")

    def authorize(self, request: web.Request, res: Resource, ns, name, sub):
        """A service account's request that its Roles do not allow: the 403 (k8s_rbac)."""
        auth = request.headers.get("Authorization", "")
        account = self.accounts.get(auth.removeprefix("Bearer ")) if auth else None
        if account is None:
            return None
        verb = k8s_rbac.verb(request.method, name, request.query)
        resource = f"{res.plural}/{sub}" if sub else res.plural
        if k8s_rbac.allowed(self.store, account, verb, res.group, resource, ns, name):
            return None
        return status(403, "Forbidden",
                      k8s_rbac.forbidden_message(account, verb, res.group, res.plural, resource,
                                                 ns, name),
                      {"name": name or "", "group": res.group, "kind": res.plural})

    def _route(self, parts: list[str]):
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        if version not in self.store.group_versions().get(group, []):
            return None
        ns = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            ns, rest = rest[1], rest[2:]
        res = self.store.resource(group, version, rest[0])
        if res is None:
            return "missing", None, None, None
        if res.namespaced is False and ns is not None:
            return "missing", None, None, None
        return res, ns, (rest[1] if len(rest) > 1 else None), (rest[2] if len(rest) > 2 else None)

    @staticmethod
    async def _body(request: web.Request):
        text = await request.text()
        if not text.strip():
            return None
        if "yaml" in request.content_type:
            return yaml.safe_load(text)
        return json.loads(text)

    # --- verbs ------------------------------------------------------------------------------

    def list(self, res: Resource, ns: str | None, q) -> web.Response:
        items = self.store.list(res, ns, q.get("labelSelector"), q.get("fieldSelector"))
        return web.json_response(
            {
                "kind": f"{res.kind}List",
                "apiVersion": res.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)},
                "items": items,
            }
        )

    def create(self, res: Resource, ns: str | None, body: dict, q) -> web.Response:
        if not isinstance(body, dict) or not isinstance(body.get("metadata"), dict):
            return status(400, "BadRequest", "the body of the request was in an unknown format")
        if res.schema is not None and q.get("fieldValidation") == "Strict":
            bad = unknown_fields(body, res.schema)
            if bad:
                return status(
                    400,
                    "BadRequest",
                    "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in bad),
                )
        obj = copy.deepcopy(body)
        md = obj["metadata"]
        if ns is not None and md.get("namespace") not in (None, ns):
            return status(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            )
        if not md.get("name") and not md.get("generateName"):
            return status(422, "Invalid", f"{res.kind} is invalid: metadata.name: Required value")
        refused = self.admission(res, obj)  # before storage finds a name taken, as for real
        if refused is not None:
            return refused
        if (res.group, res.plural) == ("jobset.x-k8s.io", "jobsets"):
            self.kueue.admit_jobset(obj)  # Kueue's mutating webhook, when installed
        if md.get("name") and self.store.get(res, ns, md["name"]) is not None:
            what = f"{res.plural}.{res.group}" if res.group else res.plural
            return status(
                409,
                "AlreadyExists",
                f'{what} "{md["name"]}" already exists',
                {"name": md["name"], "group": res.group, "kind": res.plural},
            )
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        if q.get("dryRun") == "All":
            self.store.new_meta(obj, ns if res.namespaced else None)
            return web.json_response(obj, status=201)
        if res.namespaced:
            md["namespace"] = ns
        if res.plural == "customresourcedefinitions":
            self.register_crd(obj)
        if res.plural == "pods":
            obj.setdefault("status", {"phase": "Pending"})
        return web.json_response(self.store.put(res, obj, "ADDED"), status=201)

    def jobset_gates(self) -> frozenset[str]:
        """The feature gates of the cluster's JobSet controller: its configuration ConfigMap
        (the Deployment's ``manager-config`` volume; none installed: every gate off)."""
        dep = self.store.get(self.store.resource("apps", "v1", "deployments"), "jobset-system",
                             "jobset-controller-manager")
        volumes = ((((dep or {}).get("spec") or {}).get("template") or {}).get("spec")
                   or {}).get("volumes") or []
        name = next((v["configMap"].get("name") for v in volumes
                     if v.get("name") == "manager-config" and v.get("configMap")), None)
        cm = self.store.get(self.store.resource("", "v1", "configmaps"), "jobset-system",
                            name) if name else None
        text = ((cm or {}).get("data") or {}).get("controller_manager_config.yaml", "")
        return k8s_jobset_webhook.gates_on(text)

    def admission(self, res: Resource, obj: dict, old: dict | None = None) -> web.Response | None:
        """The 422 a real API server answers for an object its field validation or the JobSet
        webhook refuses (``old``: the stored object, for an update), else None. Field errors
        come first: the API server validates before it calls validating webhooks (apiserver
        v0.36.0 ``pkg/registry/generic/registry/store.go`` L509-515)."""
        md = obj.get("metadata") or {}
        name = md.get("name") or ""
        causes = object_meta(res.plural, md, creating=old is None)
        if old is None:
            causes += pod_and_job(res.plural, obj)
        webhook: list = []
        if (res.group, res.plural) == ("jobset.x-k8s.io", "jobsets"):
            crd, webhook = k8s_jobset_webhook.admit(obj, old, self.jobset_gates())
            causes += crd
        if causes:
            return web.json_response(invalid_status(res.kind, res.group, name, causes), status=422)
        if webhook:
            return web.json_response(invalid_status(res.kind, res.group, name, webhook,
                                                    webhook=k8s_jobset_webhook.WEBHOOK),
                                     status=422)
        return None

    def register_crd(self, crd: dict) -> None:
        spec = crd.get("spec", {})
        for v in spec.get("versions", []):
            if v.get("served", True):
                self.store.register(
                    Resource(
                        spec["group"],
                        v["name"],
                        spec["names"]["plural"],
                        spec["names"]["kind"],
                        spec.get("scope", "Namespaced") == "Namespaced",
                        tuple(spec["names"].get("shortNames", [])),
                        v.get("schema", {}).get("openAPIV3Schema"),
                    )
                )
        crd["status"] = {
            "acceptedNames": spec.get("names", {}),
            "storedVersions": [v["name"] for v in spec.get("versions", []) if v.get("storage")],
            "conditions": [
                {
                    "type": "Established",
                    "status": "True",
                    "reason": "InitialNamesAccepted",
                    "lastTransitionTime": ts(),
                }
            ],
        }

    def replace(self, res, ns, name, sub, body, q) -> web.Response:
        old = self.store.get(res, ns, name)
        if old is None:
            return not_found(res, name)
        rv = body.get("metadata", {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            return status(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {res.plural} "{name}": '
                "the object has been modified; please apply your "
                "changes to the latest version and try again",
            )
        new = copy.deepcopy(old)
        if sub == "status":
            new["status"] = body.get("status", {})
        else:
            new.update({k: v for k, v in body.items() if k != "metadata"})
            new["metadata"].update(_user_metadata(body["metadata"]))
            refused = self.admission(res, new, old)
            if refused is not None:
                return refused
        if q.get("dryRun") == "All":
            return web.json_response(new)
        return web.json_response(self.store.put(res, new))

    def patch(self, res, ns, name, body, content_type: str, q) -> web.Response:
        old = self.store.get(res, ns, name)
        if old is None:
            if content_type == "application/apply-patch+yaml":
                return self.create(res, ns, body, q)
            return not_found(res, name)
        if content_type == "application/json-patch+json":
            new = json_patch(old, body)
        else:
            new = merge_patch(old, {k: v for k, v in body.items() if k != "metadata"})
            new["metadata"] = merge_patch(old["metadata"],
                                          _user_metadata(body.get("metadata") or {}))
        refused = self.admission(res, new, old)
        if refused is not None:
            return refused
        if q.get("dryRun") == "All":
            return web.json_response(new)
        if res.plural == "customresourcedefinitions":
            self.register_crd(new)
        return web.json_response(self.store.put(res, new))

    def delete(self, res, ns, name, body: dict, q) -> web.Response:
        obj = self.store.get(res, ns, name)
        if obj is None:
            return not_found(res, name)
        uid = (body.get("preconditions") or {}).get("uid")
        if uid and uid != obj["metadata"]["uid"]:
            return precondition_failed(res, ns, name, uid, obj["metadata"]["uid"])
        if q.get("dryRun") == "All" or body.get("dryRun") == ["All"]:
            return web.json_response(obj)
        if res.plural == "pods":
            # As the API server: a body's DeleteOptions, else the query's (never both).
            grace = body.get("gracePeriodSeconds") if body else q.get("gracePeriodSeconds")
            grace = self.cluster.config.terminate_delay if grace is None else float(grace)
            return web.json_response(self.cluster.delete_pod(obj, grace))
        if res.plural == "customresourcedefinitions":
            spec = obj.get("spec", {})
            self.store.unregister(spec.get("group"), spec.get("names", {}).get("plural"))
        if res.plural == "namespaces":
            for (g, p), bucket in list(self.store.objects.items()):
                for ons, oname in [k for k in bucket if k[0] == name]:
                    self.store.remove(self.store.resource(g, _version(self.store, g, p), p), ons, oname)
        return web.json_response(self.store.remove(res, ns, name))

    def delete_collection(self, res, ns, q) -> web.Response:
        items = self.store.list(res, ns, q.get("labelSelector"), q.get("fieldSelector"))
        for obj in items:
            self.delete(res, ns, obj["metadata"]["name"], {}, q)
        return web.json_response(
            {
                "kind": f"{res.kind}List",
                "apiVersion": res.api_version,
                "metadata": {},
                "items": items,
            }
        )

    # --- streams ----------------------------------------------------------------------------

    async def watch(self, request: web.Request, res: Resource, ns: str | None):
        from k8s_store import Watcher, field_matcher, label_matcher

        q = request.query
        w = Watcher(
            res,
            ns,
            label_matcher(q.get("labelSelector")),
            field_matcher(q.get("fieldSelector")),
            asyncio.Queue(),
        )
        rv = q.get("resourceVersion")
        if rv in (None, "", "0"):
            initial = [("ADDED", o) for o in self.store.list(res, ns)]
        else:
            history = self.store.events_since(int(rv))
            if history is None:
                initial = [
                    (
                        "ERROR",
                        {
                            "kind": "Status",
                            "apiVersion": "v1",
                            "status": "Failure",
                            "message": f"too old resource version: {rv}",
                            "reason": "Expired",
                            "code": 410,
                        },
                    )
                ]
            else:
                initial = [(e, o) for _, e, r, o in history if w.wants(r, o)]
        for event, obj in initial:
            if event == "ERROR" or w.wants(res, obj):
                w.queue.put_nowait((event, obj))
        self.store.watchers.append(w)
        resp = web.StreamResponse(headers={"Content-Type": JSON})
        await resp.prepare(request)
        deadline = asyncio.get_running_loop().time() + float(q.get("timeoutSeconds") or 1800)
        try:
            while True:
                left = deadline - asyncio.get_running_loop().time()
                if left <= 0:
                    break
                try:
                    event, obj = await asyncio.wait_for(w.queue.get(), left)
                except asyncio.TimeoutError:
                    break
                await resp.write(json.dumps({"type": event, "object": obj}).encode() + b"\n")
                if event == "ERROR":
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.watchers.remove(w)
        return resp

    async def pod_log(self, request: web.Request, ns: str, name: str):
        pods = self.store.resource("", "v1", "pods")
        pod = self.store.get(pods, ns, name)
        if pod is None:
            return not_found(pods, name)
        q = request.query
        spec = pod.get("spec", {})
        names = [c["name"] for c in spec.get("containers", [])]
        inits = [c["name"] for c in spec.get("initContainers", [])]
        container = q.get("container")
        if not container:
            if len(names) != 1:
                return status(
                    400,
                    "BadRequest",
                    f"a container name must be specified for pod "
                    f"{name}, choose one of: {names} or one of the "
                    f"init containers: {inits}",
                )
            container = names[0]
        if container not in names + inits:
            return status(400, "BadRequest", f"container {container} is not valid for pod {name}")
        if pod["status"].get("phase") == "Pending":
            return status(
                400,
                "BadRequest",
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating',
            )
        previous = q.get("previous") in ("true", "1")
        if previous:  # the API server's answer when the container has not restarted
            counts = {c["name"]: c.get("restartCount", 0)
                      for c in pod["status"].get("containerStatuses", [])
                      + pod["status"].get("initContainerStatuses", [])}
            if not counts.get(container):
                return status(400, "BadRequest", f'previous terminated container "{container}" '
                                                 f'in pod "{name}" not found')
        buf = self.cluster.buffer(ns, name, container, previous=previous)
        lines = list(buf.lines)
        if q.get("sinceSeconds"):
            cutoff = now() - dt.timedelta(seconds=int(q["sinceSeconds"]))
            lines = [x for x in lines if x[0] >= cutoff]
        if q.get("tailLines"):
            n = int(q["tailLines"])
            lines = lines[-n:] if n else []
        stamp = q.get("timestamps") in ("true", "1")

        def fmt(t: dt.datetime, text: str) -> bytes:
            prefix = t.strftime("%Y-%m-%dT%H:%M:%S.%f000Z ") if stamp else ""
            return f"{prefix}{text}\n".encode()

        if q.get("follow") not in ("true", "1"):
            return web.Response(body=b"".join(fmt(*x) for x in lines), content_type="text/plain")
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        sent = len(buf.lines)
        buf.cut = False
        try:
            for x in lines:
                await resp.write(fmt(*x))
            while not buf.closed:
                async with buf.cond:
                    await buf.cond.wait_for(functools.partial(_pending, buf, sent))
                if buf.cut:
                    request.transport.abort()  # a connection dropped mid-stream
                    return resp
                for x in buf.lines[sent:]:
                    await resp.write(fmt(*x))
                sent = len(buf.lines)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp

    # --- admin ------------------------------------------------------------------------------

    async def admin(self, parts: list[str], request: web.Request) -> web.Response:
        body = await self._body(request) or {}
        if parts == ["config"]:
            for k, v in body.items():
                setattr(self.cluster.config, k, v)
            return web.json_response(dataclasses.asdict(self.cluster.config))
        if parts == ["log"]:
            ns = body.get("namespace", "default")
            if body.get("timestamps"):  # a recorded log: each line led by the time it was logged
                buf = self.cluster.buffer(ns, body["pod"], body["container"])
                for line in body["lines"]:
                    stamp, _, text = line.partition(" ")
                    t = dt.datetime.fromisoformat(  # RFC3339Nano: keep the microseconds
                        re.sub(r"(\.\d{6})\d+", r"\1", stamp).replace("Z", "+00:00"))
                    buf.lines.append((t, text))
                self.cluster._wake(buf)
                return web.json_response({"ok": True})
            for line in body["lines"]:
                self.cluster.log(ns, body["pod"], body["container"], line)
            return web.json_response({"ok": True})
        if parts == ["restart_container"]:  # the kubelet restarting a container in place
            ok = self.cluster.restart_container(body.get("namespace", "default"), body["pod"],
                                                body["container"])
            return web.json_response({"ok": ok}, status=200 if ok else 404)
        if parts == ["requests"]:  # the request log; POST {"clear": true} empties it
            out = list(self.requests)
            if body.get("clear"):
                self.requests.clear()
            return web.json_response(out)
        if parts == ["service_account_token"]:  # a pod's mounted token (k8s_rbac)
            self.accounts[body["token"]] = (body.get("namespace", "default"), body["name"])
            return web.json_response({"ok": True})
        if parts == ["rotate_log"]:
            self.cluster.rotate_log(body.get("namespace", "default"), body["pod"],
                                    body["container"])
            return web.json_response({"ok": True})
        if parts == ["kueue"]:  # {"installed": true, "visibility": false} (k8s_kueue)
            if body.get("installed"):
                self.kueue.install()
            if "visibility" in body:
                self.kueue.visibility = bool(body["visibility"])
            return web.json_response({"installed": self.kueue.installed,
                                      "visibility": self.kueue.visibility})
        if parts == ["kueue_clock"]:  # {"advance": seconds}: Kueue's WaitForPodsReady clock
            self.kueue.advance(float(body.get("advance", 0)))
            return web.json_response({"now": ts(self.kueue.time)})
        if parts == ["kueue_workload"]:  # set the status of a JobSet's Workload (k8s_kueue)
            wl = self.kueue.set_status(body.get("namespace", "default"), body["jobset"],
                                       body.get("status") or {})
            return web.json_response(wl or {"error": "no Workload"}, status=200 if wl else 404)
        if parts == ["cut"]:
            n = self.cluster.cut_logs(body.get("namespace", "default"), body["pod"])
            return web.json_response({"cut": n})
        return web.Response(status=404, text="no such admin endpoint\n")


def _pending(buf, sent: int) -> bool:
    return len(buf.lines) > sent or buf.closed or buf.cut


def json_patch(obj: dict, ops: list[dict]) -> dict:
    """RFC 6902 add/replace/remove (what kubectl and clients send for JSON patches)."""
    out = copy.deepcopy(obj)
    for op in ops:
        keys = [k.replace("~1", "/").replace("~0", "~") for k in op["path"].split("/")[1:]]
        parent = out
        for k in keys[:-1]:
            parent = parent[int(k)] if isinstance(parent, list) else parent.setdefault(k, {})
        last = keys[-1]
        if isinstance(parent, list):
            idx = len(parent) if last == "-" else int(last)
            if op["op"] == "remove":
                parent.pop(idx)
            elif op["op"] == "add":
                parent.insert(idx, op["value"])
            else:
                parent[idx] = op["value"]
        elif op["op"] == "remove":
            parent.pop(last, None)
        else:
            parent[last] = op["value"]
    return out


def _version(store: Store, group: str, plural: str) -> str:
    return next(v for (g, v, p) in store.resources if (g, p) == (group, plural))


def make_app(
    config: Config | None = None, jobset_crd: str | None = None, token: str | None = None
) -> web.Application:
    """The aiohttp application; created inside the running loop (the controller needs it)."""
    store = Store()
    cluster = Cluster(store, config or Config())
    api = Api(store, cluster, token)
    if jobset_crd:
        with open(jobset_crd) as f:
            crd = yaml.safe_load(f)
        api.create(store.resource("apiextensions.k8s.io", "v1", "customresourcedefinitions"), None, crd, {})
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app["api"] = api
    app.router.add_route("*", "/{tail:.*}", api.handle)
    return app


async def serve(args: argparse.Namespace) -> None:
    import ssl

    config = Config(**json.loads(args.config)) if args.config else Config()
    app = make_app(config, args.jobset_crd, args.require_token)
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
    await runner.setup()
    ctx = None
    if args.tls_dir:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(os.path.join(args.tls_dir, "cert.pem"), os.path.join(args.tls_dir, "key.pem"))
    site = web.TCPSite(runner, "127.0.0.1", args.port, ssl_context=ctx, shutdown_timeout=0.1)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, args.port_file)  # atomic: readers never see a half-written port
    print(f"fake-k8s listening on 127.0.0.1:{port}", flush=True)
    await asyncio.Event().wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file", help="write the bound port here once listening")
    p.add_argument("--jobset-crd", help="install this CRD (the JobSet CRD yaml) at start-up")
    p.add_argument("--config", help="JSON object of Config fields (timings, unschedulable)")
    p.add_argument("--require-token", help="answer 401 unless requests carry this bearer token")
    p.add_argument("--tls-dir", help="serve HTTPS with cert.pem/key.pem from this directory")
    args = p.parse_args()
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
