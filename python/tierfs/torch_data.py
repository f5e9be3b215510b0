"""PyTorch over a TierFS volume without a mount: datasets of a directory's files, and
checkpoints saved to and loaded from the volume.

    import torch, tierfs
    from tierfs.torch_data import FileDataset, save, load
    fs = tierfs.Client("redis://meta-host/1", cache_dir="/nvme/tierfs")
    ds = FileDataset(fs, "/train", transform=decode)         # item i: decode(bytes of file i)
    loader = torch.utils.data.DataLoader(ds, batch_size=64, num_workers=8)
    save(model.state_dict(), fs, "/ckpt/step-1000.pt")
    state = load(fs, "tierfs:///ckpt/step-1000.pt")

A Client goes to DataLoader workers as it is: forked workers reopen it on first use, and
spawn or forkserver workers unpickle it into a client of their own.
"""

import torch.utils.data


def _strip(path):
    return path[len("tierfs://"):] if path.startswith("tierfs://") else path


def list_files(client, root, suffixes=None, recursive=True):
    """The regular files under root, sorted by path; only names ending in one of
    `suffixes` when given."""
    out = []
    if recursive:
        for top, _, files in client.walk(_strip(root)):
            out.extend(top.rstrip("/") + "/" + f for f in files)
    else:
        root = _strip(root)
        out = [root.rstrip("/") + "/" + e.name for e in client.scandir(root) if e.is_file()]
    if suffixes:
        out = [p for p in out if p.endswith(tuple(suffixes))]
    return sorted(out)


class FileDataset(torch.utils.data.Dataset):
    """Map-style: item i is transform(bytes of the i-th file under root), or the bytes."""

    def __init__(self, client, root, transform=None, suffixes=None, recursive=True):
        self.client = client
        self.transform = transform
        self.files = list_files(client, root, suffixes, recursive)

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        with self.client.open(self.files[i], "rb", buffering=0) as f:
            data = f.read()
        return self.transform(data) if self.transform else data


class FileIterableDataset(torch.utils.data.IterableDataset):
    """Iterable: the files under root in order, each worker taking every n-th one."""

    def __init__(self, client, root, transform=None, suffixes=None, recursive=True):
        super().__init__()
        self.client = client
        self.transform = transform
        self.files = list_files(client, root, suffixes, recursive)

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        start, step = (info.id, info.num_workers) if info else (0, 1)
        for path in self.files[start::step]:
            with self.client.open(path, "rb", buffering=0) as f:
                data = f.read()
            yield self.transform(data) if self.transform else data


def save(obj, client, path, **kwargs):
    """torch.save to a file of the volume ("/x.pt" or "tierfs:///x.pt")."""
    import torch
    with client.open(_strip(path), "wb") as f:
        torch.save(obj, f, **kwargs)


def load(client, path, **kwargs):
    """torch.load from a file of the volume."""
    import torch
    with client.open(_strip(path), "rb") as f:
        return torch.load(f, **kwargs)
