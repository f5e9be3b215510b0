"""What the Python SDK's suites share (test_sdk*.py): the package imported from the build
tree, and a volume made with tierfs.format for one test class."""

import os
import sys

import harness


def import_sdk():
    """The SDK's package (python/), imported from the build tree: TIERFS_SDK_PATH (ctest sets
    it), else BUILD/python beside the tierfs binary's build tree."""
    path = os.environ.get("TIERFS_SDK_PATH") or os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(harness.tierfs_bin())))), "python")
    if path not in sys.path:
        sys.path.insert(0, path)
    import tierfs
    return tierfs


def class_volume(cls, name, mount=True):
    """A volume for test class cls (removed with the class), formatted through the SDK on
    SQLite and a local bucket without trash, and mounted with FUSE beside it unless told
    not to. Returns the harness.Volume and the format record."""
    vol = harness.Volume(name)
    cls.addClassCleanup(vol.cleanup)
    record = import_sdk().format(vol.meta_url, name, storage="file", bucket=vol.bucket, trash_days=0)
    if mount:
        vol.mount()
    return vol, record
