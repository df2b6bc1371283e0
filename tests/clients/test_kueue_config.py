"""WaitForPodsReady as an installed Kueue runs it (``elastix.clients.kueue``): the defaults of
each Kueue version and config API version, read from kubernetes-sigs/kueue at the cited tags,
and the one line preflight prints for a queued elastic workload."""

from __future__ import annotations

import pytest
import yaml

from elastix.clients import kueue as kq

V1BETA2 = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


@pytest.mark.parametrize("text, seconds", [
    ("30m", 1800), ("1h30m", 5400), ("0s", 0), ("0", 0), ("8760h", 31536000), ("1.5h", 5400),
    ("300ms", 0.3), ("5m0s", 300), ("soon", None), ("", None), ("30", None)])
def test_go_durations(text, seconds):
    assert kq.parse_duration(text) == seconds


def test_release_defaults_evict_a_run_missing_a_slice_for_30_minutes():
    """v0.19.2 with the release's config (no waitForPodsReady block): on, 30m and 30m
    (CHANGELOG-0.19.md L215; apis/config/v1beta2/defaults.go L48, L99-117)."""
    pr = kq.pods_ready(dict(V1BETA2), "v0.19.2")
    assert (pr.enabled, pr.timeout, pr.recovery) == (True, 1800, 1800)
    assert pr.describe() == ("WaitForPodsReady on: timeout 30m, recoveryTimeout 30m "
                             "(Kueue v0.19.2 defaults)")
    line = pr.effect()
    assert line is not None and "\n" not in line
    assert line.startswith("Kueue's WaitForPodsReady on: timeout 30m, recoveryTimeout 30m")
    assert "evicts and requeues this workload whole, every slice, on once running, a slice " \
        "missing for 30m" in line
    assert "timeout 8760h and no recoveryTimeout" in line


def test_what_elastix_installs_keeps_elastic_runs():
    cfg = {**V1BETA2, "waitForPodsReady": {"timeout": kq.ELASTIX_TIMEOUT,
                                           "recoveryTimeout": kq.ELASTIX_RECOVERY}}
    pr = kq.pods_ready(cfg, "v0.19.2")
    assert (pr.enabled, pr.timeout, pr.recovery) == (True, 365 * 86400, None)
    assert pr.keeps_elastic_runs and pr.effect() is None
    assert pr.describe().startswith("WaitForPodsReady on: timeout 8760h, recoveryTimeout off "
                                    "(timeout and recoveryTimeout set in ConfigMap")


@pytest.mark.parametrize("cfg, version, want", [
    # before 0.19 an absent block is off (v1beta2 defaults.go L94 @ v0.15.0 … v0.18.2)
    (dict(V1BETA2), "v0.17.1", (False, None, None)),
    # an explicit block before 0.19: recoveryTimeout defaults to the timeout from 0.16
    ({**V1BETA2, "waitForPodsReady": {"timeout": "10m"}}, "v0.17.1", (True, 600, 600)),
    ({**V1BETA2, "waitForPodsReady": {"timeout": "10m"}}, "v0.15.0", (True, 600, None)),
    # v1beta1 config: off unless enable: true; 5m default timeout (v1beta1 defaults.go L46)
    ({"apiVersion": "config.kueue.x-k8s.io/v1beta1"}, "v0.19.2", (False, None, None)),
    ({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "waitForPodsReady": {"enable": True}},
     "v0.14.3", (True, 300, None)),
    # the alpha gate turns it off (waitforpodsready.go L24-29)
    ({**V1BETA2, "featureGates": {"DisableWaitForPodsReady": True}}, "v0.19.2",
     (False, None, None)),
    # an unknown version (a custom image tag) is taken as the newest
    (dict(V1BETA2), "main", (True, 1800, 1800)),
])
def test_defaults_by_version(cfg, version, want):
    pr = kq.pods_ready(cfg, version)
    assert (pr.enabled, pr.timeout, pr.recovery) == want


def test_the_gate_given_as_a_flag_turns_it_off():
    dep = {"spec": {"template": {"spec": {"containers": [
        {"name": "manager", "args": ["--config=/c.yaml",
                                     "--feature-gates=DisableWaitForPodsReady=true"]}]}}}}
    pr = kq.pods_ready(dict(V1BETA2), "v0.19.2", kq._gates(dep))
    assert not pr.enabled and pr.effect() is None


def test_a_short_timeout_alone_is_still_said():
    """recoveryTimeout off but a 2h timeout: a --flex wait or a run started on fewer slices
    is evicted after 2h."""
    cfg = {**V1BETA2, "waitForPodsReady": {"timeout": "2h", "recoveryTimeout": "0s"}}
    line = kq.pods_ready(yaml.safe_load(yaml.safe_dump(cfg)), "v0.19.2").effect()
    assert line is not None and "once running" not in line
    assert "a slice not ready 2h after admission" in line


@pytest.mark.parametrize("cfg, version, blocks", [
    # a v1beta1 file defaults blockAdmission to enable (apis/config/v1beta1/defaults.go L98
    # @ v0.15.8), v1beta2 to false (apis/config/v1beta2/defaults.go L95 @ v0.15.8)
    ({"apiVersion": "config.kueue.x-k8s.io/v1beta1", "waitForPodsReady": {
        "enable": True, "timeout": "8760h"}}, "v0.14.3", True),
    ({**V1BETA2, "waitForPodsReady": {"timeout": "8760h"}}, "v0.15.8", False),
    ({**V1BETA2, "waitForPodsReady": {"timeout": "8760h", "recoveryTimeout": "0s",
                                      "blockAdmission": True}}, "v0.19.2", True),
])
def test_block_admission_is_read_and_said(cfg, version, blocks):
    pr = kq.pods_ready(cfg, version)
    assert pr.keeps_elastic_runs and pr.block_admission is blocks
    line = pr.effect()
    if not blocks:
        assert line is None
    else:
        assert "blockAdmission on" in line and "admits no other workload" in line
        assert "\n" not in line


@pytest.mark.parametrize("version, off", [("v0.14.3", False), ("v0.15.8", False),
                                          ("v0.16.0", True), ("v0.19.2", True),
                                          (None, False), ("main", False)])
def test_zero_is_off_only_from_v0_16(version, off):
    """kueue pkg/controller/core/core.go L113 @ v0.16.0 (#8493), L110-112 @ v0.15.8."""
    assert kq.zero_recovery_disables(version) is off
    # and what elastix reads of it agrees: 0s before v0.16 evicts at once
    cfg = {**V1BETA2, "waitForPodsReady": {"timeout": "1h", "recoveryTimeout": "0s"}}
    if version and version.startswith("v"):
        assert (kq.pods_ready(cfg, version).recovery is None) is off
