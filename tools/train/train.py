"""Trains the built-in default model (austen-1m) on one CPU thread.

  python3 train.py DATA_DIR OUT_DIR --minutes 15

DATA_DIR comes from tools/train/buildDataset.ts (tokens.bin, docs.bin, tokenizer.json). Writes
OUT_DIR/config.json, OUT_DIR/weights/<name>.bin (float32 LE, row-major [out, in]) and
OUT_DIR/reference.json (top-5 log-probabilities of the F16-rounded weights, computed the way
llama.cpp's CPU backend computes them) for the parity check.
"""
import argparse
import json
import math
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
import torch
import torch.nn.functional as F

from model import Llama

CONFIG = {
    "vocab": 2048,
    "embd": 128,
    "heads": 4,
    "layers": 4,
    "ff": 384,
    "context": 256,
    "eps": 1e-5,
    "rope_base": 10000.0,
}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    tokens = np.fromfile(os.path.join(args.data_dir, "tokens.bin"), dtype="<u2").astype(np.int64)
    starts = np.fromfile(os.path.join(args.data_dir, "docs.bin"), dtype="<u4").astype(np.int64)
    tok = json.load(open(os.path.join(args.data_dir, "tokenizer.json")))
    cfg = dict(CONFIG, vocab=len(tok["tokens"]))
    window = cfg["context"] + 1
    starts = starts[starts + window <= len(tokens)]
    model = Llama(cfg)
    params = sum(p.numel() for p in model.parameters())
    print(f"{params} parameters, {len(tokens)} tokens, {len(starts)} document starts", flush=True)

    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95))
    budget = args.minutes * 60
    t0 = time.time()
    step, seen, smooth = 0, 0, None
    while True:
        elapsed = time.time() - t0
        if elapsed >= budget:
            break
        frac = elapsed / budget
        lr = args.lr * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for group in opt.param_groups:
            group["lr"] = lr
        picks = rng.choice(starts, size=args.batch)
        batch = torch.from_numpy(np.stack([tokens[s:s + window] for s in picks]))
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, cfg["vocab"]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        seen += args.batch * cfg["context"]
        smooth = loss.item() if smooth is None else 0.98 * smooth + 0.02 * loss.item()
        if step % 25 == 0:
            rate = seen / (time.time() - t0)
            print(f"step {step} loss {smooth:.3f} lr {lr:.2e} {rate:.0f} tok/s {elapsed/60:.1f} min", flush=True)

    os.makedirs(os.path.join(args.out_dir, "weights"), exist_ok=True)
    summary = {"config": cfg, "parameters": params, "steps": step, "tokens_seen": seen,
               "final_loss": smooth, "minutes": (time.time() - t0) / 60, "batch": args.batch}
    json.dump(summary, open(os.path.join(args.out_dir, "config.json"), "w"), indent=2)
    for name, p in model.state_dict().items():
        p.detach().float().numpy().astype("<f4").tofile(os.path.join(args.out_dir, "weights", name + ".bin"))
    torch.save(model.state_dict(), os.path.join(args.out_dir, "model.pt"))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
