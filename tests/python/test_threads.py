"""plan, simulate and sweep release the GIL and give the same answers from
several threads at once."""
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import reshard
from conftest import TINY


def test_plan_and_simulate_from_several_threads(data_dir):
    scenarios = [reshard.load_scenario(TINY), reshard.load_scenario(data_dir / "scenarios" / "tiny-llama-tp2-to-tp2.yaml")]
    expected = [(reshard.plan(s).to_dict(), reshard.simulate(reshard.plan(s)).to_dict()) for s in scenarios]

    def work(i):
        s = scenarios[i % 2]
        p = reshard.plan(s)
        return i % 2, (p.to_dict(), reshard.simulate(p).to_dict())

    with ThreadPoolExecutor(max_workers=4) as pool:
        for which, got in pool.map(work, range(16)):
            assert got == expected[which]


def _count_while_a_worker_sweeps(s):
    """How often the main thread ran its loop while a worker was inside one sweep call."""
    inside = threading.Event()
    returned = []

    def worker():
        inside.set()
        reshard._core.sweep(s._core, [], [], [], 0.05, 1)  # every default point: a few hundred plans
        returned.append(True)

    t = threading.Thread(target=worker)
    t.start()
    inside.wait()
    counted = 0
    while not returned:
        counted += 1
    t.join()
    return counted


def test_the_gil_is_released_during_a_call():
    # A thread inside a C++ call that keeps the GIL gives it up only when the
    # call returns (a switch request is honoured between bytecodes, and the
    # long switch interval keeps one from coming sooner), so the main thread
    # never counts. A call that releases it lets the main thread count, unless
    # the OS does not wake the main thread before the short call returns (seen
    # once on a loaded 2-core CI machine): a few attempts, one success is enough,
    # and a GIL-holding call fails every one of them.
    s = reshard.load_scenario(TINY)
    old = sys.getswitchinterval()
    sys.setswitchinterval(2.0)
    try:
        counts = []
        for _ in range(20):
            counts.append(_count_while_a_worker_sweeps(s))
            if counts[-1] > 0:
                break
    finally:
        sys.setswitchinterval(old)
    assert counts[-1] > 0, counts
