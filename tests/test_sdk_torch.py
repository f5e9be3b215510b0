"""The Python SDK under PyTorch: DataLoader workers started by fork, spawn and forkserver
all read a volume through one tierfs.Client made in the parent, and checkpoints go to and
come from the volume (tierfs.torch_data). Debian's Python and python3-torch."""

import hashlib
import os
import subprocess

import harness
import sdk_support

tierfs = sdk_support.import_sdk()
import torch  # noqa: E402
import torch.utils.data  # noqa: E402

from tierfs import torch_data  # noqa: E402

FILES = 240


class DataLoaderTest(harness.TierFSTestCase):
    """On SQLite and a local bucket."""
    AUTO_MOUNT = False

    @classmethod
    def make_volume(cls):
        cls.v, _ = sdk_support.class_volume(cls, "torchvol", mount=False)
        return cls.v.meta_url

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.fs = tierfs.Client(cls.make_volume(), cache_dir="memory")
        cls.addClassCleanup(cls.fs.close)
        cls.fs.makedirs("/train/a")
        cls.fs.makedirs("/train/b")
        cls.want = {}
        for i in range(FILES):
            data = os.urandom(1000 + 97 * i)
            path = "/train/%s/%04d.bin" % ("ab"[i % 2], i)
            with cls.fs.open(path, "wb") as f:
                f.write(data)
            cls.want[path] = hashlib.sha256(data).hexdigest()
        # The parent has used the client (its threads run) before any worker starts: what a
        # training script does, and what makes fork() dangerous.
        assert len(cls.fs.listdir("/train/a")) == FILES // 2

    def check_loader(self, method, dataset):
        loader = torch.utils.data.DataLoader(dataset, batch_size=16, num_workers=8,
                                             multiprocessing_context=method, collate_fn=list)
        got = []
        for epoch in range(2):
            items = [x for batch in loader for x in batch]
            got.append(sorted(hashlib.sha256(x).hexdigest() for x in items))
        self.assertEqual(got[0], sorted(self.want.values()), "%s: the workers read other data" % method)
        self.assertEqual(got[1], got[0])
        # The parent's client still works after its workers came and went.
        self.assertEqual(len(self.fs.listdir("/train/b")), FILES // 2)

    def test_map_style_with_forked_workers(self):
        self.check_loader("fork", torch_data.FileDataset(self.fs, "/train"))

    def test_map_style_with_spawned_workers(self):
        self.check_loader("spawn", torch_data.FileDataset(self.fs, "/train"))

    def test_iterable_with_forkserver_workers(self):
        self.check_loader("forkserver", torch_data.FileIterableDataset(self.fs, "/train"))

    def test_iterable_with_forked_workers(self):
        self.check_loader("fork", torch_data.FileIterableDataset(self.fs, "tierfs:///train", suffixes=[".bin"]))

    def test_checkpoints_saved_and_loaded(self):
        state = {"w": torch.arange(1_000_000, dtype=torch.float32), "step": 7}
        torch_data.save(state, self.fs, "tierfs:///ckpt.pt")
        back = torch_data.load(self.fs, "/ckpt.pt")
        self.assertEqual(back["step"], 7)
        self.assertTrue(torch.equal(back["w"], state["w"]))
        self.assertGreater(self.fs.stat("/ckpt.pt").st_size, 4_000_000)


class DataLoaderOnRedisRadosgwTest(DataLoaderTest):
    """The same on the shared servers: each worker opens its own Redis connections and S3
    handles (and draws its own random names)."""

    @classmethod
    def make_volume(cls):
        srv = harness.servers()
        url = srv["redis_url"].rstrip("/") + "/10"
        subprocess.run(["redis-cli", "-u", url, "flushdb"], capture_output=True)
        tierfs.format(url, "torchredis", storage="s3", bucket=srv["s3_endpoint"] + "/" + harness.unique("torch"),
                      access_key=srv["s3_access_key"], secret_key=srv["s3_secret_key"], force=True)
        return url

    # Two of the matrix here: the others exercise nothing the engine or store changes.
    test_iterable_with_forkserver_workers = None
    test_iterable_with_forked_workers = None
    test_checkpoints_saved_and_loaded = None


if __name__ == "__main__":
    harness.main()
