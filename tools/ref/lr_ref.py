#!/usr/bin/env python3
"""Reference learning rates from transformers' own schedulers (optimization.get_scheduler): for
each case, the LR the optimizer holds at every optimizer step, as a LambdaLR gives it to torch's
AdamW. Writes tests/fixtures/lr/hf_lr.json (read by tests/train/lr_schedule_test.cc). Needs torch
and transformers (run on the device machine: tools/gpu has no part in it; any box with both works).
Usage: lr_ref.py OUT.json"""
import json
import sys

import torch
from transformers import get_scheduler

CASES = [
    # (name, warmup, total, kwargs)
    ("linear", 3, 20, {}),
    ("cosine", 0, 17, {}),
    ("cosine", 4, 25, {"num_cycles": 1.5}),
    ("cosine_with_restarts", 2, 30, {}),
    ("cosine_with_restarts", 5, 40, {"num_cycles": 3}),
    ("polynomial", 3, 20, {}),
    ("polynomial", 0, 15, {"lr_end": 1e-5, "power": 2.0}),
    ("polynomial", 4, 12, {"lr_end": 2e-4, "power": 0.5}),
    ("inverse_sqrt", 5, 30, {}),
    ("inverse_sqrt", 0, 20, {}),
    ("inverse_sqrt", 3, 25, {"timescale": 7}),
    ("cosine_with_min_lr", 2, 20, {"min_lr_rate": 0.1}),
    ("cosine_with_min_lr", 0, 16, {"min_lr": 2e-4}),
    ("constant_with_warmup", 4, 10, {}),
]
LR = 1e-3


def main():
    out = []
    for name, warmup, total, kw in CASES:
        p = torch.nn.Parameter(torch.zeros(1))
        opt = torch.optim.AdamW([p], lr=LR)
        sch = get_scheduler(name, opt, num_warmup_steps=warmup, num_training_steps=total, scheduler_specific_kwargs=kw)
        lrs = []
        for _ in range(total + 2):  # two past the end: what a resumed / longer run would read
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sch.step()
        out.append({"name": name, "warmup": warmup, "total": total, "kwargs": kw, "lr": LR, "lrs": lrs})
    with open(sys.argv[1], "w") as f:
        json.dump({"generator": "tools/ref/lr_ref.py", "transformers": __import__("transformers").__version__,
                   "cases": out}, f, indent=1)


if __name__ == "__main__":
    main()
