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


def test_the_gil_is_released_during_a_call():
    # A thread inside a C++ call that keeps the GIL gives it up only when the
    # call returns (a switch request is honoured between bytecodes, and the
    # long switch interval keeps one from coming sooner). The main thread
    # counting while the worker is inside the call shows the call released it.
    s = reshard.load_scenario(TINY)
    inside = threading.Event()
    returned = []

    def worker():
        inside.set()
        reshard._core.sweep(s._core, [], [], [], 0.05, 1)  # every default point: a few hundred plans
        returned.append(True)

    old = sys.getswitchinterval()
    sys.setswitchinterval(2.0)
    try:
        t = threading.Thread(target=worker)
        t.start()
        inside.wait()
        counted = 0
        while not returned:
            counted += 1
        t.join()
    finally:
        sys.setswitchinterval(old)
    assert counted > 0
