from __future__ import annotations

from nodeplugin.cache import refs

HEX_A = "a" * 64
HEX_B = "b" * 64
_OBJ = "/var/lib/gpustack/models/objects/sha256"
_PODS = "/var/lib/kubelet/pods"
MOUNTINFO = f"""\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:25 / /data rw,relatime shared:5 - ext4 /dev/vdb rw
41 22 254:0 {_OBJ}/{HEX_A} {_PODS}/p1/mount ro - ext4 /dev/vda rw
42 22 254:0 {_OBJ}/{HEX_A} {_PODS}/p2/my\\040vol ro - ext4 /dev/vda rw
43 22 254:0 {_OBJ}/{HEX_B}/sub {_PODS}/p3/mount ro - ext4 /dev/vda rw
44 22 0:25 /objects/sha256/{HEX_B} {_PODS}/p4/mount ro - ext4 /dev/vdb rw
45 22 254:0 /elsewhere {_PODS}/p5/mount ro - ext4 /dev/vda rw
"""


def test_unescape_octal_fields() -> None:
    assert refs.unescape(r"a\040b\011c\134d") == "a b\tc\\d"


def test_scan_finds_bind_mounts_of_published_trees() -> None:
    mounts = refs.parse_mountinfo(MOUNTINFO)
    found = refs.scan(mounts, "/var/lib/gpustack/models/objects/sha256")
    assert found == {
        "/var/lib/kubelet/pods/p1/mount": HEX_A,
        "/var/lib/kubelet/pods/p2/my vol": HEX_A,
        "/var/lib/kubelet/pods/p3/mount": HEX_B,
    }


def test_scan_follows_the_cache_to_its_own_filesystem() -> None:
    # The cache reached as /data/objects on a device mounted at /data: binds show /objects/...
    mounts = refs.parse_mountinfo(MOUNTINFO)
    found = refs.scan(mounts, "/data/objects/sha256")
    assert found == {"/var/lib/kubelet/pods/p4/mount": HEX_B}


def test_references_count_per_digest() -> None:
    table = refs.References({"/t1": "d1", "/t2": "d1"})
    table.add("/t3", "d2")
    assert table.count("d1") == 2 and table.digests() == {"d1", "d2"}
    assert table.remove("/t1") == "d1"
    assert table.remove("/t1") is None
    table.add("/t2", "d2")  # re-pointing a target moves its count
    assert table.count("d1") == 0 and table.count("d2") == 2
    assert len(table) == 2
