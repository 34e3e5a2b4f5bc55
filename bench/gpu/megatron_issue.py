#!/usr/bin/env python3
"""Host cost of Megatron-Core's resharding issue path, per piece, with PyTorch on one GPU.

What it mimics (Megatron-LM megatron/core/resharding/execution.py execute_reshard_plan and
copy_services/nccl_copy_service.py NCCLCopyService, read at commit d98e8a64 of 2026-08-22):
  * send side, per TransferOp: `view = param[op.my_slice]` (a tuple of slices), `view.is_contiguous()`,
    `view.contiguous()` when it is not (a copy kernel through PyTorch), `submit_send` (a SendOp
    dataclass appended to a list);
  * recv side, per TransferOp: `dst_param.data[op.my_slice]`, `is_contiguous()`; contiguous: recv in
    place; else `torch.empty_like(view.contiguous())` as a staging buffer, later written back with
    `dst_param.data[slice].copy_(recv_buffer)`;
  * run(): one `dist.P2POp(dist.isend / dist.irecv, tensor, peer, group=...)` per op, one
    `dist.batch_isend_irecv(p2p_ops)`, `req.wait()` for each request; same-rank pairs are copied
    with `recv.copy_(send)` on a side stream instead, then `current_stream().wait_stream(...)`;
  * MXFP8 sources: per parameter a `torch.cuda.Event()` recorded on a side stream and
    `torch.cuda.current_stream().wait_event(ev)` before slicing.

Every cost is host time (time.perf_counter_ns) per call, the median over batches of `--batch`
calls, with the GPU synchronized before each batch (untimed), so the launch queue never fills.
NCCL on one GPU: a world of size 1, every P2POp to rank 0 itself. The script first tries one
batch_isend_irecv to self and records whether PyTorch accepts it (PyTorch 2.11 did; its blocking
send/recv refuse self with `_check_not_self_rank`, so if a version refuses the batch too, the
measurement bypasses that check and says so). The groups are measured in a child process with a
timeout, both through dist.batch_isend_irecv and split into the per-op calls inside
`_coalescing_manager` and its exit (ncclGroupEnd), so a hang cannot lose the other results.

  python3 bench/gpu/megatron_issue.py --out OUT.json [--calls 20000] [--quick]
  python3 bench/gpu/megatron_issue.py --combine RUN1.json RUN2.json --out HOST_PYTHON.json   # no GPU

Writes OUT.json: {"host_python": {profile fields, ns; "source"}, "environment", "local" (every
per-call series with its batches), "groups" (every batch_isend_irecv sample), "group_fit",
"cold", "self_send"}. --combine pools several runs' batches and group samples (medians over all).
"""
import argparse
import dataclasses
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

GROUP_PAIRS = [1, 2, 8, 32, 128, 512]


def median_batches(fn, calls, batch, before=None, after=None, sync=True):
    """Per-call ns of fn(i) over batches of `batch` calls: the median of the batch means."""
    import torch
    per_call = []
    batches = max(1, calls // batch)
    for b in range(-1, batches):
        if sync:
            torch.cuda.synchronize()
        if before is not None:
            before()
        t0 = time.perf_counter_ns()
        for i in range(batch):
            fn(i)
        t1 = time.perf_counter_ns()
        if after is not None:
            after()
        if b >= 0:
            per_call.append((t1 - t0) / batch)
    return {"median_ns": statistics.median(per_call), "batch": batch, "batch_ns": [round(x, 1) for x in per_call]}


def line_fit(xs, ys):
    """Least squares y = a + b x, rows weighted by 1 / y (relative error), as calib/host_fit.h."""
    w = [1.0 / max(y, 1e-9) for y in ys]
    sw = sum(wi * wi for wi in w)
    sx = sum(wi * wi * x for wi, x in zip(w, xs))
    sy = sum(wi * wi * y for wi, y in zip(w, ys))
    sxx = sum(wi * wi * x * x for wi, x in zip(w, xs))
    sxy = sum(wi * wi * x * y for wi, x, y in zip(w, xs, ys))
    det = sw * sxx - sx * sx
    b = (sw * sxy - sx * sy) / det
    a = (sy - b * sx) / sw
    return a, b


@dataclasses.dataclass
class SendOp:  # as megatron/core/resharding/copy_services/base.py
    task_id: int
    tensor: object
    dest_rank: int


@dataclasses.dataclass
class RecvOp:
    task_id: int
    tensor: object
    src_rank: int


def init_world():
    import torch
    import torch.distributed as dist
    path = f"/tmp/megatron_issue_pg_{os.getpid()}"
    if os.path.exists(path):
        os.remove(path)
    dist.init_process_group("nccl", init_method=f"file://{path}", rank=0, world_size=1,
                            device_id=torch.device("cuda", 0))
    return dist


def measure_local(args, out):
    """Everything on one GPU that needs no NCCL transfer."""
    import torch
    dev = torch.device("cuda", 0)
    calls, batch = args.calls, args.batch
    m = {}
    # A weight as Megatron slices it: [rows, cols] bf16, a piece = a column block (strided) or a row block.
    weight = torch.randn(4096, 4096, dtype=torch.bfloat16, device=dev)
    col_slice = (slice(0, 64), slice(0, 64))          # 64 x 64 elements, rows 8 KiB apart: strided
    row_slice = (slice(0, 2), slice(0, 4096))         # 2 rows: contiguous, 16 KiB
    events = [torch.cuda.Event() for _ in range(batch)]
    side = torch.cuda.Stream()
    cur = torch.cuda.current_stream()

    m["slice"] = median_batches(lambda i: weight[col_slice], calls, batch)
    m["is_contiguous"] = median_batches(lambda i: weight[col_slice].is_contiguous(), calls, batch)
    keep = [None] * batch
    def contiguous(i):
        keep[i] = weight[col_slice].contiguous()
    m["slice_contiguous"] = median_batches(contiguous, calls, batch)
    view = weight[col_slice]
    def contiguous_only(i):
        keep[i] = view.contiguous()
    m["contiguous"] = median_batches(contiguous_only, calls, batch)
    dst = torch.empty(64, 64, dtype=torch.bfloat16, device=dev)
    m["copy_"] = median_batches(lambda i: dst.copy_(view), calls, batch)
    pinned = torch.empty(4096, dtype=torch.uint8, pin_memory=True)
    small = torch.empty(4096, dtype=torch.uint8, device=dev)
    m["memcpy_h2d"] = median_batches(lambda i: small.copy_(pinned, non_blocking=True), calls, batch)
    m["memcpy_d2h"] = median_batches(lambda i: pinned.copy_(small, non_blocking=True), calls, batch)
    def alloc(i):
        keep[i] = torch.empty(4096, dtype=torch.bfloat16, device=dev)
    def clear():
        for i in range(batch):
            keep[i] = None
    m["alloc"] = median_batches(alloc, calls, batch, after=clear)
    def fill():
        for i in range(batch):
            keep[i] = torch.empty(4096, dtype=torch.bfloat16, device=dev)
    def free(i):
        keep[i] = None
    m["free"] = median_batches(free, calls, batch, before=fill)
    m["empty_like_contiguous"] = median_batches(
        lambda i: keep.__setitem__(i, torch.empty_like(weight[col_slice].contiguous())), calls, batch, after=clear)
    m["event_create"] = median_batches(lambda i: keep.__setitem__(i, torch.cuda.Event()), calls, batch, after=clear)
    m["event_record"] = median_batches(lambda i: events[i].record(), calls, batch)
    def side_record(i):
        with torch.cuda.stream(side):
            events[i].record()
    m["event_record_side_stream"] = median_batches(side_record, calls, batch)
    for e in events:
        e.record(side)
    torch.cuda.synchronize()
    m["stream_wait"] = median_batches(lambda i: torch.cuda.current_stream().wait_event(events[i]), calls, batch)
    m["wait_stream"] = median_batches(lambda i: cur.wait_stream(side), calls, batch)

    # Megatron's per-piece sequences (execution.py), pieces alternating strided / contiguous slices.
    sends = []
    def send_piece(i):
        v = weight[col_slice if i % 2 == 0 else row_slice]
        if not v.is_contiguous():
            v = v.contiguous()
        sends.append(SendOp(task_id=i, tensor=v, dest_rank=0))
    m["piece_send"] = median_batches(send_piece, calls, batch, after=sends.clear)
    recvs, writebacks = [], []
    def recv_piece(i):
        v = weight[col_slice if i % 2 == 0 else row_slice]
        if v.is_contiguous():
            recvs.append(RecvOp(task_id=i, tensor=v, src_rank=0))
            writebacks.append(("direct", None))
            return
        buf = torch.empty_like(v.contiguous())
        recvs.append(RecvOp(task_id=i, tensor=buf, src_rank=0))
        writebacks.append(("copy", buf))
    def recv_clear():
        recvs.clear()
        writebacks.clear()
    m["piece_recv"] = median_batches(recv_piece, calls, batch, after=recv_clear)
    staging = torch.empty(64, 64, dtype=torch.bfloat16, device=dev)
    m["writeback_copy"] = median_batches(lambda i: weight.data[col_slice].copy_(staging), calls, batch)
    # Same-rank pairs: recv.copy_(send) on the copy stream (NCCLCopyService.run).
    def local_pair(i):
        with torch.no_grad(), torch.cuda.stream(side):
            dst.copy_(view)
    m["local_pair_copy"] = median_batches(local_pair, calls, batch)
    out["local"] = m

    # Cold: pinning (torch.empty(pin_memory=True): the caching host allocator's cudaHostAlloc) and
    # fresh device memory (torch.empty on an emptied caching allocator: cudaMalloc).
    cold = []
    for gib in args.cold_gib:
        n = gib << 30
        t0 = time.perf_counter_ns()
        t = torch.empty(n, dtype=torch.uint8, pin_memory=True)
        t1 = time.perf_counter_ns()
        cold.append({"what": "pin_memory_empty", "bytes": n, "seconds": (t1 - t0) * 1e-9})
        del t
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        t0 = time.perf_counter_ns()
        t = torch.empty(n, dtype=torch.uint8, device=dev)
        torch.cuda.synchronize()
        t1 = time.perf_counter_ns()
        cold.append({"what": "device_empty_fresh", "bytes": n, "seconds": (t1 - t0) * 1e-9})
        del t
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    out["cold"] = cold


def measure_groups(args, out, measure, bypass=False):
    """batch_isend_irecv on a world of size 1 (sends to self); measure=False: only whether it is accepted."""
    import torch
    dist = init_world()
    from torch.distributed import distributed_c10d as c10d
    dev = torch.device("cuda", 0)
    try:
        t = torch.zeros(256, dtype=torch.bfloat16, device=dev)
        r = torch.zeros(256, dtype=torch.bfloat16, device=dev)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, 0), dist.P2POp(dist.irecv, r, 0)])
        for q in reqs:
            q.wait()
        torch.cuda.synchronize()
        out["self_send"] = "accepted"
    except Exception as e:  # noqa: BLE001 - the refusal is the measurement
        out["self_send"] = f"refused: {type(e).__name__}: {e}"
    if not measure:
        # P2POp objects alone (all that is left to measure if the send to self is refused).
        send = torch.zeros(512, dtype=torch.bfloat16, device=dev)
        out["p2pop_build"] = median_batches(lambda i: dist.P2POp(dist.isend, send, 0), args.calls, args.batch)
        dist.destroy_process_group()
        return
    if bypass:
        c10d._check_not_self_rank = lambda *a, **k: None  # the only change: the self-rank check is skipped
    msg = 512  # bf16 elements, 1 KiB
    sends = [torch.ones(msg, dtype=torch.bfloat16, device=dev) for _ in range(max(GROUP_PAIRS))]
    recvs = [torch.zeros(msg, dtype=torch.bfloat16, device=dev) for _ in range(max(GROUP_PAIRS))]
    samples = []
    for k in GROUP_PAIRS:
        reps = max(8, (200 if k < 128 else 40) // (4 if args.quick else 1))
        for rep in range(-3, reps):
            torch.cuda.synchronize()
            t0 = time.perf_counter_ns()
            ops = []
            for p in range(k):
                ops.append(dist.P2POp(dist.isend, sends[p], 0))
                ops.append(dist.P2POp(dist.irecv, recvs[p], 0))
            t1 = time.perf_counter_ns()
            reqs = dist.batch_isend_irecv(ops)
            t2 = time.perf_counter_ns()
            for q in reqs:
                q.wait()
            t3 = time.perf_counter_ns()
            # The same list split at ncclGroupEnd: the calls inside PyTorch's coalescing manager, then its exit.
            torch.cuda.synchronize()
            group = c10d._get_default_group()
            t4 = time.perf_counter_ns()
            with c10d._coalescing_manager(group, dev, async_ops=True) as cm:
                for op in ops:
                    op.op(op.tensor, op.peer, op.group, op.tag)
                t5 = time.perf_counter_ns()
            t6 = time.perf_counter_ns()
            for w in cm.works:
                w.wait()
            if rep >= 0:
                samples.append({"ops": 2 * k, "build_ns": t1 - t0, "batch_ns": t2 - t1, "wait_ns": t3 - t2,
                                "requests": len(reqs), "split_enqueue_ns": t5 - t4, "split_end_ns": t6 - t5})
    torch.cuda.synchronize()
    ok = all(torch.equal(sends[p], recvs[p]) for p in range(max(GROUP_PAIRS)))
    out["groups_bypassed_check"] = bypass
    out["groups_data"] = "data arrived" if ok else "DATA MISMATCH"
    out["groups"] = samples
    dist.destroy_process_group()


def fit_groups(samples):
    def med(key):
        by = {}
        for s in samples:
            by.setdefault(s["ops"], []).append(s[key])
        xs = sorted(by)
        return xs, [statistics.median(by[x]) for x in xs]
    xs, build = med("build_ns")
    _, batch = med("batch_ns")
    _, wait = med("wait_ns")
    _, enq = med("split_enqueue_ns")
    _, end = med("split_end_ns")
    total = [b + c + w for b, c, w in zip(build, batch, wait)]
    fits = {name: dict(zip(("intercept_ns", "slope_ns_per_op"), line_fit(xs, ys)))
            for name, ys in (("build", build), ("batch", batch), ("wait", wait), ("total", total),
                             ("split_enqueue", enq), ("split_end", end))}
    medians = {"ops": xs, "build_ns": build, "batch_ns": batch, "wait_ns": wait, "split_enqueue_ns": enq,
               "split_end_ns": end}
    return fits, medians


def source(env, date, runs):
    pooled = f", batches of {runs} processes pooled" if runs > 1 else ""
    return (f"bench/gpu/megatron_issue.py on one {env['gpu']}, {date}: PyTorch {env['torch']}, host time per call "
            f"(median of batches of {env['batch']}{pooled}, GPU synchronized between batches), Megatron-Core "
            "resharding issue path (execution.py, NCCLCopyService)")


def derive_host_python(outs):
    """The profile's host_python fields from one or more runs' raw data (batches and group samples pooled)."""
    def pooled_median(key):
        return statistics.median([x for o in outs for x in o["local"][key]["batch_ns"]])
    ns = lambda key: int(round(pooled_median(key)))
    host = {
        "event_record_ns": ns("event_record"),                # torch.cuda.Event.record()
        "stream_wait_ns": ns("stream_wait"),                  # current_stream().wait_event(ev)
        "kernel_launch_ns": ns("slice_contiguous"),           # param[my_slice].contiguous() of a strided slice
        "memcpy_ns": int(round(statistics.median(
            [x for o in outs for k in ("memcpy_h2d", "memcpy_d2h") for x in o["local"][k]["batch_ns"]]))),
        "alloc_ns": ns("alloc"),                              # torch.empty from the caching allocator
        "free_ns": ns("free"),                                # dropping the last reference
    }
    samples = [s for o in outs for s in (o.get("groups") or [])]
    fits = medians = None
    if samples:
        fits, medians = fit_groups(samples)
        # Per op before ncclGroupEnd: its P2POp and its isend / irecv inside the coalescing manager.
        host["nccl_op_ns"] = int(round(fits["build"]["slope_ns_per_op"] + fits["split_enqueue"]["slope_ns_per_op"]))
        # Fixed: the list, entering and leaving the manager, the request waits.
        host["nccl_group_ns"] = int(round(sum(max(0.0, fits[k]["intercept_ns"])
                                              for k in ("build", "split_enqueue", "split_end", "wait"))))
        host["nccl_group_op_ns"] = int(round(max(0.0, fits["split_end"]["slope_ns_per_op"]) +
                                             max(0.0, fits["wait"]["slope_ns_per_op"])))
    else:  # P2POp alone: the rest was refused
        host["nccl_op_ns"] = int(round(statistics.median([x for o in outs for x in o["p2pop_build"]["batch_ns"]])))
    return host, fits, medians


def combine(files, out_path):
    outs = [json.load(open(f)) for f in files]
    host, fits, medians = derive_host_python(outs)
    env = outs[0]["environment"]
    host["source"] = source(env, env["date_utc"][:10], len(outs))
    with open(out_path, "w") as f:
        json.dump({"host_python": host, "group_fit": fits, "group_medians": medians, "combined_from": files}, f,
                  indent=1)
    print(json.dumps(host, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cold-gib", type=int, nargs="*", default=[1, 4])
    ap.add_argument("--timeout", type=float, default=120, help="seconds for the NCCL group part (a child process)")
    ap.add_argument("--child", choices=["groups"], help=argparse.SUPPRESS)
    ap.add_argument("--bypass", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--combine", nargs="+", metavar="RUN.json",
                    help="no GPU: host_python from these runs' raw data pooled, written to --out")
    args = ap.parse_args()
    if args.combine:
        combine(args.combine, args.out)
        return
    if args.quick:
        args.calls = max(args.batch * 4, args.calls // 4)
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    if args.child == "groups":
        out = {}
        measure_groups(args, out, measure=True, bypass=args.bypass)
        with open(args.out, "w") as f:
            json.dump(out, f)
        return
    import torch
    out = {"environment": {"date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "host": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
                           "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
                           "gpu": torch.cuda.get_device_name(0), "calls": args.calls, "batch": args.batch,
                           "megatron_lm_commit": "d98e8a64ddf34856e74b24714e3bedb2f5a39553"}}
    measure_local(args, out)
    refusal = {}
    measure_groups(args, refusal, measure=False)
    out["self_send"] = refusal.get("self_send")
    out["p2pop_build"] = refusal.get("p2pop_build")
    child_out = f"/tmp/megatron_issue_groups_{os.getpid()}.json"
    cmd = [sys.executable, __file__, "--out", child_out, "--calls", str(args.calls), "--batch", str(args.batch),
           "--child", "groups"] + (["--quick"] if args.quick else [])
    if not refusal["self_send"].startswith("accepted"):
        cmd.append("--bypass")
    try:
        proc = subprocess.run(cmd, timeout=args.timeout, capture_output=True, text=True)
        out["groups_rc"] = proc.returncode
        out["groups_stderr_tail"] = proc.stderr[-2000:]
        if proc.returncode == 0:
            with open(child_out) as f:
                child = json.load(f)
            for key in ("groups_bypassed_check", "groups_data", "groups"):
                out[key] = child.get(key)
    except subprocess.TimeoutExpired:
        out["groups_rc"] = "timeout"

    host, fits, medians = derive_host_python([out])
    out["group_fit"], out["group_medians"] = fits, medians
    loc = out["local"]
    date = out["environment"]["date_utc"][:10]
    host["source"] = source(out["environment"], date, 1)
    out["host_python"] = host
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps({"host_python": host, "self_send": out["self_send"],
                      "groups_bypassed_check": out.get("groups_bypassed_check"), "groups_data": out.get("groups_data"),
                      "groups_rc": out.get("groups_rc"), "group_medians": out.get("group_medians"),
                      "group_fit": out.get("group_fit"), "cold": out["cold"],
                      "local": {k: round(v["median_ns"]) for k, v in loc.items()}}, indent=1))


if __name__ == "__main__":
    main()
