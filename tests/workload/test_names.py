"""Workload names: the limit elastix states is exactly the longest name whose derived names all
fit, for every TPU type and flag combination, and a longer name is exit 2 before anything is sent.

"Fit" is judged by the fake API server's admission code (tests/fakes/k8s_admission.py,
k8s_jobset_webhook.py), written from the Kubernetes and JobSet sources independently of
elastix's own check (elastix.workload.names), and by the Jobs and Pods the fake JobSet
controller makes from the manifest.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
from pathlib import Path

import k8s_jobset_webhook as webhook
import pytest
from k8s_admission import dns1035_label, object_meta, pod_and_job
from render_cases import COMBOS, spec_values, tpu_types

from elastix.errors import ManifestError, SpecError
from elastix.workload import rbac
from elastix.workload.render import parse, render, render_text
from elastix.workload.spec import build_spec

# Every length is tried on these (a single host; 4 hosts; 64 hosts, two-digit pod indexes); the
# limit alone on every TPU type.
REPRESENTATIVE = ("v4-8", "v5litepod-16", "v6e-256")


def stated_limit(tpu_type: str, combo: str) -> int:
    """The limit elastix states, read from its error for a name far too long."""
    with pytest.raises(SpecError) as err:
        render(build_spec(None, spec_values(tpu_type, combo, "a" * 200)))
    (field, msg, hint), = err.value.problems
    assert field == "name" and "\n" not in msg, msg
    return int(re.search(r"use at most (\d+) characters", msg).group(1))


def refusals(manifest: dict, children: bool = True) -> list[str]:
    """What the fake API server's rules refuse: the JobSet and the head's RBAC objects at
    admission, then (``children``) the Jobs, Pods and headless Service the JobSet controller
    would make."""
    out = [str(c) for c in object_meta("jobsets", manifest["metadata"], creating=True)]
    crd, hook = webhook.admit(manifest, None)
    out += [str(c) for c in crd + hook]
    head = rbac.wanted(manifest)
    for _, plural, obj in rbac.objects(head, "default") if head else []:
        out += [f"{plural}: {c}" for c in object_meta(plural, obj["metadata"], creating=True)]
    network = manifest["spec"].get("network") or {}
    service = network.get("subdomain") or manifest["metadata"]["name"]
    out += [f"service {service}: {m}" for m in dns1035_label(service)]
    for plural, obj in _children(manifest) if children else []:
        out += [f"{plural} {obj['metadata']['name']}: {c}"
                for c in object_meta(plural, obj["metadata"], creating=True)
                + pod_and_job(plural, obj)]
    return out


def _children(manifest: dict) -> list[tuple[str, dict]]:
    """The Jobs and Pods the fake JobSet controller creates for the manifest."""
    from k8s_jobset import Cluster, Config
    from k8s_store import Resource, Store

    async def run() -> list[tuple[str, dict]]:
        store = Store()
        cluster = Cluster(store, Config(start_delay=3600))  # pods stay Pending: no timers run
        jobsets = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
        store.register(jobsets)
        md = {**manifest["metadata"], "namespace": "default"}
        store.put(jobsets, {**manifest, "metadata": md})
        return ([("jobs", j) for j in store.list(cluster.jobs)]
                + [("pods", p) for p in store.list(cluster.pods)])

    return asyncio.run(run())


@pytest.mark.parametrize("combo", sorted(COMBOS))
@pytest.mark.parametrize("tpu_type", REPRESENTATIVE)
def test_every_length_up_to_the_stated_limit_fits(tpu_type, combo):
    limit = stated_limit(tpu_type, combo)
    for n in range(1, limit + 1):  # the controller's children at the longest name only
        manifest = render(build_spec(None, spec_values(tpu_type, combo, "w" * n)))
        assert refusals(manifest, children=n == limit) == [], (n, refusals(manifest)[:2])
    # one more character and the fake's rules refuse it: the limit is not overly cautious
    spec = build_spec(None, spec_values(tpu_type, combo, "w" * limit))
    assert refusals(parse(render_text(_named(spec, "w" * (limit + 1))))), limit


def _named(spec, name):
    return dataclasses.replace(spec, name=name)


@pytest.mark.parametrize("combo", ["single", "wide"])  # the fewest and the most Jobs
def test_limit_for_every_tpu_type(combo):
    """Every TPU type: one character past the limit is refused by elastix as a spec error
    (exit 2) that names the rule and the limit, and the limit fits."""
    for tpu_type in tpu_types():
        with pytest.raises(SpecError) as err:
            render(build_spec(None, spec_values(tpu_type, combo, "z" * 23)))
        assert err.value.exit_code == 2
        assert "2n+19 characters; JobSet requires <= 63: use at most 22" in err.value.message
        assert not refusals(render(build_spec(None, spec_values(tpu_type, combo, "z" * 22))),
                            children=False)


def test_error_says_the_limit_and_why():
    with pytest.raises(SpecError) as err:
        render(build_spec(None, spec_values("v5litepod-16", "elastic", "my-long-workload-name-x")))
    (field, msg, hint), = err.value.problems
    assert msg == ("'my-long-workload-name-x' is 23 characters: the coordinator label "
                   "(jobset.sigs.k8s.io/coordinator) '<name>-pathways-head-0-0.<name>' is "
                   "2n+19 characters; JobSet requires <= 63: use at most 22 characters")
    assert hint == "e.g. 'my-long-workload-name'"


def test_limit_follows_the_template(tmp_path):
    """A user's template with a longer replicated job name gets a shorter limit, and the rule
    that binds is named (here the pod names of the long replicated job)."""
    from elastix.templates import __file__ as templates_init

    text = (Path(templates_init).parent / "pathways-jobset.yaml.j2").read_text()
    text = text.replace("- name: {{ labels.WORKER_JOB }}", "- name: " + "w" * 40)
    tpl = tmp_path / "long.yaml.j2"
    tpl.write_text(text)
    spec = build_spec(None, spec_values("v5litepod-16", "multi", "abcdefghijklmn"))
    with pytest.raises(SpecError) as err:
        render(spec, tpl)
    msg = err.value.problems[0][1]
    # <name>-<40 w>-3-3-abcde: n + 51 <= 63
    assert "pod name of " + "w" * 40 in msg and "is n+51 characters" in msg, msg
    assert "use at most 12 characters" in msg
    assert not refusals(render(_named(spec, "a" * 12), tpl))


def test_a_rule_the_name_does_not_cause_is_a_manifest_error(tmp_path):
    from elastix.templates import __file__ as templates_init

    text = (Path(templates_init).parent / "pathways-jobset.yaml.j2").read_text()
    tpl = tmp_path / "bad.yaml.j2"
    tpl.write_text(text.replace("- name: {{ labels.WORKER_JOB }}", "- name: " + "w" * 70))
    with pytest.raises(ManifestError) as err:
        render(build_spec(None, spec_values("v5litepod-16", "multi", "a")), tpl)
    assert "would be refused" in err.value.message and "DNS-1035" in err.value.message


def test_help_states_the_computed_limit():
    from typer.testing import CliRunner

    from elastix.main import app

    out = CliRunner().invoke(app, ["workload", "create", "--help"], env={"COLUMNS": "300"})
    limit = stated_limit("v5litepod-16", "elastic")
    assert f"at most {limit} characters" in " ".join(out.output.split())


def test_volume_claim_pvc_names_count(tmp_path):
    """A template's volume claim makes a PVC <claim>-<name> that JobSet caps at 63 characters."""
    from elastix.templates import __file__ as templates_init

    claim = "c" * 45
    text = (Path(templates_init).parent / "pathways-jobset.yaml.j2").read_text()
    text = text.replace("spec:\n  coordinator:", "spec:\n  volumeClaimPolicies: [{templates: "
                        f"[{{metadata: {{name: {claim}}}, spec: {{}}}}]}}]\n  coordinator:", 1)
    mount = '[{"name": "shared-tmp", "mountPath": "/tmp"}]'
    head, _, tail = text.rpartition(mount)
    text = head + mount[:-1] + f', {{"name": "{claim}", "mountPath": "/cache"}}]' + tail
    tpl = tmp_path / "claims.yaml.j2"
    tpl.write_text(text)
    spec = build_spec(None, spec_values("v5litepod-16", "multi", "a" * 18))
    with pytest.raises(SpecError) as err:
        render(spec, tpl)
    msg = err.value.problems[0][1]
    assert f"PVC name of volume claim {claim}" in msg and "use at most 17 characters" in msg, msg
    assert not refusals(render(_named(spec, "a" * 17), tpl))
