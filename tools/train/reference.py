"""Writes the PyTorch reference log-probabilities for the llama.cpp parity check.

  python3 reference.py DATA_DIR RUN_DIR OUT.json

Loads RUN_DIR/model.pt, rounds the matrices to F16 (as exported), and computes top-5
log-probabilities in float64 at every position of a few fixed token sequences from the training
data. Also reports how far float32 PyTorch maths is from that.
"""
import json
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import torch

from model import Llama


def main():
    data_dir, run_dir, out_path = sys.argv[1:4]
    torch.set_num_threads(1)
    summary = json.load(open(os.path.join(run_dir, "config.json")))
    model = Llama(summary["config"])
    model.load_state_dict(torch.load(os.path.join(run_dir, "model.pt")))
    model.eval()
    model.round_weights_to_f16()
    model.double()
    tokens = np.fromfile(os.path.join(data_dir, "tokens.bin"), dtype="<u2").astype(np.int64)
    starts = np.fromfile(os.path.join(data_dir, "docs.bin"), dtype="<u4").astype(np.int64)
    tok = json.load(open(os.path.join(data_dir, "tokenizer.json")))
    plain = int(tok["plainDocuments"])
    picks = [(int(starts[0]), 48), (int(starts[plain]), 96), (int(starts[plain // 2]), 200)]
    sequences = []
    worst_plain_f32 = 0.0
    with torch.no_grad():
        for start, length in picks:
            ids = torch.from_numpy(tokens[start:start + length].copy())[None]
            logprobs = torch.log_softmax(model(ids), dim=-1)[0]
            plain_f32 = torch.log_softmax(model.float()(ids).double(), dim=-1)[0]
            model.double()
            top = torch.topk(logprobs, 5, dim=-1)
            worst_plain_f32 = max(worst_plain_f32, float((plain_f32.gather(1, top.indices) - top.values).abs().max()))
            sequences.append({
                "tokens": ids[0].tolist(),
                "top5": [[[int(i), round(float(v), 7)] for i, v in zip(ti, tv)] for ti, tv in zip(top.indices, top.values)],
            })
    json.dump({
        "description": "PyTorch top-5 log-probabilities (F16-rounded weights as exported, float64 maths) "
                       "at every position of each token sequence; position i predicts token i+1.",
        "maxDiffOfFloat32Maths": worst_plain_f32,
        "sequences": sequences,
    }, open(out_path, "w"))
    print(f"wrote {out_path}; float32 maths differs from float64 by up to {worst_plain_f32:.2e}")


if __name__ == "__main__":
    main()
