"""``elastix logs --previous`` on GKE, against the fake API server: the head container's previous
instance after an in-place restart, and a clear answer when the JobSet recreated the head pod
(a deleted pod's log is gone from the Kubernetes API: Cloud Logging keeps it)."""

from __future__ import annotations

import urllib.request

from fake_cluster import CREATE, elastix, wait_for

JS = "jobset.sigs.k8s.io/"
HEAD = f"{JS}jobset-name=demo,{JS}replicatedjob-name=pathways-head"


def _head(fake) -> dict:
    return wait_for(lambda: [p for p in fake.pods(HEAD) if p["status"].get("phase") == "Running"
                             and not p["metadata"].get("deletionTimestamp")], what="head")[0]


def test_previous_shows_the_restarted_container_and_explains_a_recreated_pod(fake_cluster):
    fake = fake_cluster
    elastix(fake, *CREATE, "--max-restarts", "1")
    head = _head(fake)
    name = head["metadata"]["name"]
    main = "jax-tpu"  # the head's main container (labels.MAIN_CONTAINER)

    # no restart yet: nothing previous, and it says why (one line, a hint, exit 1)
    r = elastix(fake, "logs", "demo", "--previous", check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    err = r.stderr.replace("\n", " ")
    assert f"container {main} of head pod {name} has no previous instance" in err, err
    assert "JobSet restarted" not in err

    # the kubelet restarts the main container in place: --previous shows its first instance
    wait_for(lambda: "fake-trainer step 2 " in elastix(fake, "logs", "demo").stdout,
             what="steps")
    fake.admin("restart_container", {"pod": name, "container": main})
    prev = elastix(fake, "logs", "demo", "--previous")
    assert "fake-trainer step 2 " in prev.stdout and "restarted in place" not in prev.stdout
    assert f"previous instance of container {main} in pod {name} (restarted 1 time)" in \
        prev.stderr.replace("\n", " ")
    now = elastix(fake, "logs", "demo").stdout
    assert "restarted in place" in now and "fake-trainer step 2 " not in now

    # the head pod is deleted: the JobSet restarts and recreates it; the old pod's log is gone
    req = urllib.request.Request(
        f"{fake.url}/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0", method="DELETE")
    assert urllib.request.urlopen(req, timeout=10).status == 200
    new = wait_for(lambda: [p for p in fake.pods(HEAD) if p["metadata"]["name"] != name
                            and p["status"].get("phase") == "Running"], what="new head")[0]
    r = elastix(fake, "logs", "demo", "--previous", check=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    err = r.stderr.replace("\n", " ")
    assert f"head pod {new['metadata']['name']} has no previous instance" in err, err
    assert "the JobSet restarted 1 time" in err and "were deleted with their logs" in err
    assert "Cloud Logging" in err and "gcloud logging read" in err

    r = elastix(fake, "logs", "demo", "--previous", "-f", check=False)
    assert r.returncode == 2 and "--previous cannot be combined with --follow" in r.stderr
