"""The plugin's own check of its NodeModelStore spec, and the capacity rule."""

from __future__ import annotations

import os
import pathlib

import pytest

from nodeplugin.nodestore import spec as specs
from nodeplugin.nodestore import watermarks
from tests.unit.nodeplugin import fakes

GIB = 2**30


def _parse(spec: dict[str, object]) -> specs.NodeSpec:
    return specs.parse(fakes.node_store(spec=spec, generation=4))


def test_an_empty_spec_takes_the_defaults() -> None:
    node = _parse({})
    assert (node.high_percent, node.low_percent, node.concurrency, node.bytes_per_second) == (
        80, 70, 8, 0)
    assert node.hub.huggingface_endpoint == "https://huggingface.co"
    assert node.kubelet is None and node.pinned == frozenset() and node.generation == 4


def test_a_full_spec_is_read_field_by_field() -> None:
    digest = "sha256:" + "ab" * 32
    node = _parse({
        "watermarks": {"highPercent": 60, "lowPercent": 40},
        "download": {"concurrency": 3, "bytesPerSecond": 1000},
        "hub": {"huggingFaceEndpoint": "https://hf.mirror.example", "httpsProxy":
                "http://proxy:3128", "noProxy": "10.0.0.0/8", "caBundleConfigMap": "hub-ca"},
        "kubelet": {"nodefsAvailable": "5Gi", "imagefsAvailable": "15%",
                    "imageGCHighThresholdPercent": 90},
        "pinned": [digest],
    })
    assert (node.high_percent, node.low_percent, node.concurrency) == (60, 40, 3)
    assert node.hub.https_proxy == "http://proxy:3128" and node.hub.ca_bundle_configmap == "hub-ca"
    assert node.kubelet is not None and node.kubelet.nodefs_available is not None
    assert node.kubelet.nodefs_available.bytes == 5 * GIB
    assert node.kubelet.image_gc_high_percent == 90 and node.pinned == {digest}


@pytest.mark.parametrize(("spec", "names"), [
    ({"watermarks": {"highPercent": 50, "lowPercent": 60}}, "spec.watermarks.lowPercent"),
    ({"watermarks": {"highPercent": 99}}, "spec.watermarks.highPercent"),
    ({"download": {"concurrency": 0}}, "spec.download.concurrency"),
    ({"hub": {"huggingFaceEndpoint": "ftp://x"}}, "huggingFaceEndpoint"),
    ({"hub": {"httpsProxy": "not a url"}}, "httpsProxy"),
    ({"kubelet": {"nodefsAvailable": "lots"}}, "spec.kubelet.nodefsAvailable"),
    ({"pinned": ["latest"]}, "spec.pinned"),
    ({"watermarks": "high"}, "spec.watermarks"),
])
def test_a_failing_spec_names_the_field(spec: dict[str, object], names: str) -> None:
    with pytest.raises(specs.SpecError) as info:
        _parse(spec)
    assert names in info.value.message


def _kubelet(nodefs: str = "", imagefs: str = "", gc: int | None = None) -> specs.Kubelet:
    node = _parse({"kubelet": {"nodefsAvailable": nodefs, "imagefsAvailable": imagefs,
                               **({"imageGCHighThresholdPercent": gc} if gc is not None
                                  else {})}})
    assert node.kubelet is not None
    return node.kubelet


def test_a_dedicated_filesystem_uses_the_settings_as_written() -> None:
    found = watermarks.effective(95, 90, None, total_bytes=100 * GIB, shared=False)
    assert (found.high_percent, found.low_percent, found.notes) == (95, 90, ())


def test_kubelets_defaults_cap_at_eighty_and_do_not_lower_the_default() -> None:
    found = watermarks.effective(80, 70, None, total_bytes=100 * GIB, shared=True)
    assert (found.high_percent, found.low_percent) == (80, 70)
    assert "could not be read" in found.notes[0]
    higher = watermarks.effective(90, 70, None, total_bytes=100 * GIB, shared=True)
    assert higher.high_percent == 80 and "capped at 80%" in higher.notes[-1]
    assert "kubelet's defaults" in higher.notes[-1]


def test_the_cap_is_the_lowest_threshold_and_lowers_the_low_watermark() -> None:
    found = watermarks.effective(80, 78, _kubelet("20%", "10%", 90), total_bytes=100 * GIB,
                                 shared=True)
    assert (found.high_percent, found.low_percent) == (75, 74)
    assert "nodefs.available 20%" in found.notes[0] and "lowered to 74%" in found.notes[1]
    gc = watermarks.effective(80, 70, _kubelet(gc=60), total_bytes=100 * GIB, shared=True)
    assert gc.high_percent == 55 and "imageGCHighThresholdPercent 60" in gc.notes[0]
    unset = watermarks.effective(80, 70, _kubelet(), total_bytes=100 * GIB, shared=True)
    assert unset.high_percent == 80  # unset thresholds take kubelet's defaults


def test_a_quantity_is_a_share_of_the_filesystem() -> None:
    found = watermarks.effective(90, 70, _kubelet("30Gi", "1Gi", 99), total_bytes=100 * GIB,
                                 shared=True)
    assert found.high_percent == 65  # 30 GiB of 100 GiB: 100 - 30 - 5
    too_big = watermarks.effective(90, 70, _kubelet("200Gi", "1Gi", 99),
                                   total_bytes=100 * GIB, shared=True)
    assert too_big.high_percent == 85  # the default 10% instead, said so
    assert any("200Gi is not smaller" in note for note in too_big.notes)


def test_the_cap_never_goes_below_two() -> None:
    found = watermarks.effective(80, 70, _kubelet("99%", "", 99), total_bytes=100 * GIB,
                                 shared=True)
    assert (found.high_percent, found.low_percent) == (2, 1)


def test_sharing_is_found_by_device(tmp_path: pathlib.Path) -> None:
    kubelet = tmp_path / "kubelet"
    (kubelet / "pods").mkdir(parents=True)
    cache = tmp_path / "cache"
    cache.mkdir()
    assert watermarks.shares_filesystem(cache, kubelet)
    if os.path.ismount("/proc") and os.stat("/proc").st_dev != os.stat(tmp_path).st_dev:
        assert not watermarks.shares_filesystem("/proc", kubelet)
    # kubelet's directory stands in until pods/ exists; nothing readable is "shared".
    bare = tmp_path / "bare-kubelet"
    bare.mkdir()
    assert watermarks.shares_filesystem(cache, bare)
    assert watermarks.shares_filesystem(tmp_path / "missing", tmp_path / "missing-too")
