"""The CLI tests' reading of `streamtune logits --out FILE` (safetensors, tensor logits_0, f32)."""
import json
import struct

import numpy as np


def load_logits(path):
    """[tokens, vocab] float64."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    a, b = head["logits_0"]["data_offsets"]
    return np.frombuffer(data[a:b], dtype="<f4").reshape(head["logits_0"]["shape"]).astype(np.float64)


def token_logps(logits, ids):
    """log p(ids[k] | ids[:k]) for k = 1 .. len(ids) - 1."""
    lse = np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1)) + logits.max(1)
    return [logits[k - 1, ids[k]] - lse[k - 1] for k in range(1, len(ids))]
