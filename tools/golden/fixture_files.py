"""File helpers the fixture scripts share (imported from tools/golden/, the scripts' own folder)."""
import hashlib


def sha256(path):
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()
