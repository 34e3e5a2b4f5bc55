"""reshard: plan, predict and run the weight refit of RL jobs, from Python.

The same C++ libraries as the ``reshard`` command, in-process::

    import reshard
    s = reshard.load_scenario("scenarios/llama3-8b-tp2-to-tp1x2.yaml")
    print(reshard.inspect(s).fits)
    p = reshard.plan(s)                 # raises reshard.DoesNotFit when no plan fits
    pred = reshard.simulate(p)
    pred.links_frame()                  # a pandas DataFrame
    reshard.sweep(s, offload=[0, 0.5, 1]).points_frame()

Results are typed objects whose ``to_dict()`` is the CLI's ``--json`` for the
same call (docs/json.md). Errors are exceptions with the CLI's exit class:
InputError (exit 2; file, field, problem) and DoesNotFit (exit 3; gpu,
missing_bytes). plan, simulate, sweep and run release the GIL. docs/python.md
has a capacity-planning walk-through.
"""

import json as _json
import os as _os

from . import _core
from ._errors import DoesNotFit, Error, HostMemoryTooSmall, InputError, InternalError, RunFailed
from ._results import Inspection, Prediction, Record, RunResult, SweepResult

__version__ = _core.__version__
#: True when this build has the NCCL backend (CUDA and NCCL were found).
HAVE_NCCL = _core.have_nccl

__all__ = [
    "__version__", "HAVE_NCCL", "Scenario", "Plan", "load_scenario", "import_megatron", "builtin_scenarios",
    "inspect", "plan", "simulate", "sweep", "run", "Inspection", "Prediction", "SweepResult", "RunResult",
    "Record", "Error", "InputError", "DoesNotFit", "HostMemoryTooSmall", "RunFailed", "InternalError",
]


def _bytes(value, field):
    """An int, or a size string such as "64MiB" / "1.5GB" (as scenario files take)."""
    if isinstance(value, bool):
        raise InputError(f"<python>: {field}: not a size", "<python>", field, "not a size")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        return _core.parse_bytes(value, field)
    raise InputError(f"<python>: {field}: {value!r} is not a size (an int or a string such as '64MiB')",
                     "<python>", field, f"{value!r} is not a size")


class Scenario:
    """A refit scenario: model, cluster, both layouts, memory state, options.

    Make one with ``reshard.load_scenario(path)``, ``Scenario.from_dict(d)``,
    ``Scenario.builtin(name)`` or an import (``load_scenario(recipe,
    kind="verl")``). Immutable; safe to share between threads.
    """

    def __init__(self, core, yaml=None, assumptions=(), ignored=()):
        self._core = core
        #: The scenario's YAML when it came from an import (else None).
        self.yaml = yaml
        #: What an import chose because the recipe did not say it.
        self.assumptions = list(assumptions)
        #: Megatron flags an import ignored.
        self.ignored = list(ignored)

    @classmethod
    def from_dict(cls, d, *, calibration=None, origin="<dict>"):
        """A scenario from a dict shaped like a scenario file (docs/scenario.md).

        Relative paths in it (``model.hf_config``, ``cluster.calibration``) are
        relative to the working directory, or to the directory of ``origin``
        when that is a file path. ``calibration`` applies a profile as the
        CLI's ``--calibration`` does.
        """
        if not isinstance(d, dict):
            raise InputError(f"{origin}: a scenario must be a dict, got {type(d).__name__}", origin, "", "not a dict")
        return cls(_core.parse_scenario(_json.dumps(d), origin, calibration or ""))

    @classmethod
    def builtin(cls, name):
        """A built-in scenario by name (``reshard.builtin_scenarios()``)."""
        return cls(_core.load_scenario("builtin:" + name, ""))

    name = property(lambda self: self._core.name, doc="the scenario's name")
    path = property(lambda self: self._core.path, doc="the file it was read from (<builtin:NAME>, <dict>)")
    gpus = property(lambda self: self._core.gpus, doc="GPUs in the cluster")
    reserve_bytes = property(lambda self: self._core.reserve_bytes, doc="memory.reserve per GPU")
    fingerprint = property(lambda self: self._core.fingerprint, doc="what plans of this scenario record")

    def __repr__(self):
        return f"Scenario({self.name!r}, path={self.path!r}, gpus={self.gpus})"


def builtin_scenarios():
    """Names of the built-in scenarios."""
    return list(_core.builtin_scenarios())


def load_scenario(path, *, kind="scenario", calibration=None, hf_config=None, model=None, cluster=None, name=None,
                  reserve_gib=None, overrides=(), **scenario):
    """Reads a scenario.

    kind="scenario" (default): a scenario file (YAML or JSON) or a built-in
    name, as the CLI's SCENARIO argument. kind="nemo-rl" / "verl": a recipe,
    imported as ``reshard import`` does (``hf_config``, ``model``, ``cluster``,
    ``name``, ``reserve_gib``, ``overrides`` as its flags; the result carries
    ``yaml`` and ``assumptions``). kind="hf": a Hugging Face config.json as
    the model of a scenario whose other sections are given as keywords
    (``cluster=``, ``source=``, ``destination=``, ``memory=``, ...).
    ``calibration`` applies a measured profile (CLI ``--calibration``).
    """
    path = _os.fspath(path)
    if kind == "scenario":
        return Scenario(_core.load_scenario(path, calibration or ""))
    if kind == "hf":
        d = dict(scenario)
        d.setdefault("name", _os.path.basename(_os.path.dirname(_os.path.abspath(path))) or "hf-model")
        d["model"] = {"hf_config": _os.path.abspath(path)}
        if cluster is not None:
            d["cluster"] = cluster
        return Scenario.from_dict(d, calibration=calibration)
    if kind in ("nemo-rl", "verl"):
        if scenario:
            raise InputError(f"<python>: {', '.join(scenario)}: not an import option", "<python>",
                             next(iter(scenario)), "not an import option")
        s = _import(kind, path, [], hf_config, model, cluster, name, reserve_gib, overrides, 0)
        if calibration:
            s = Scenario(_core.parse_scenario(s.yaml, s.path, calibration), s.yaml, s.assumptions, s.ignored)
        return s
    raise InputError(f"<python>: kind: '{kind}' is not one of scenario, hf, nemo-rl, verl", "<python>", "kind",
                     f"'{kind}' is not one of scenario, hf, nemo-rl, verl")


def _import(kind, path, args, hf_config, model, cluster, name, reserve_gib, overrides, generation_gpus):
    core, yaml, assumptions, ignored = _core.import_recipe(
        kind, path, list(args), _os.fspath(hf_config) if hf_config else "", model or "",
        cluster if isinstance(cluster, str) else "", name or "", -1.0 if reserve_gib is None else float(reserve_gib),
        list(overrides), int(generation_gpus))
    return Scenario(core, yaml, assumptions, ignored)


def import_megatron(args, *, generation_gpus=0, hf_config=None, model=None, cluster=None, name=None, reserve_gib=None):
    """A scenario from Megatron-LM / vLLM / torchrun flags (``reshard import megatron``)."""
    return _import("megatron", "<cli>", args, hf_config, model, cluster, name, reserve_gib, (), generation_gpus)


def _scenario(s):
    if isinstance(s, Scenario):
        return s
    if isinstance(s, (str, _os.PathLike)):
        return load_scenario(s)
    if isinstance(s, dict):
        return Scenario.from_dict(s)
    raise TypeError(f"expected a reshard.Scenario, a path or a dict, got {type(s).__name__}")


def inspect(scenario):
    """Model size, per-GPU bytes and the memory at refit start (``reshard inspect``)."""
    s = _scenario(scenario)
    return Inspection(_json.loads(_core.inspect(s._core)))


class Plan(Record):
    """A plan: the contract the simulator and the executor both consume.

    Its fields are ``reshard plan --json``'s (a loaded plan: the plan's own
    summary). ``save(path)`` writes plan.json; ``Plan.load(path)`` reads one
    back (checked by Verify, and against ``scenario`` when given);
    ``reshard.simulate(plan)`` and ``reshard.run(plan)`` take it.
    """

    def __init__(self, core, fields, reserve_bytes=0, usable_bytes=None):
        super().__init__(fields)
        self._core = core
        #: memory.reserve of the scenario it was planned for (a loaded plan: its scenario's, else 0).
        self.reserve_bytes = reserve_bytes
        #: What the plan may use on one GPU: capacity less the reserve.
        self.usable_bytes = usable_bytes

    @property
    def name(self):
        return self._core.name

    @property
    def ops(self):
        """Number of ops in the plan."""
        return self._core.ops

    @property
    def scenario_fingerprint(self):
        return self._core.scenario_fingerprint

    def save(self, path):
        """Writes the plan as plan.json (docs/plan-format.md)."""
        self._core.save(_os.fspath(path))

    def to_json(self):
        """plan.json's text."""
        return self._core.to_json()

    @classmethod
    def load(cls, path, scenario=None):
        """Reads a plan.json; with ``scenario``, refuses a plan made for another one."""
        s = _scenario(scenario) if scenario is not None else None
        core = _core.load_plan(_os.fspath(path), s._core if s else None)
        reserve = s.reserve_bytes if s else 0
        return cls(core, _json.loads(core.summary_json()), reserve, core.gpu_memory_bytes - reserve)

    def peaks_frame(self):
        """The plan's predicted peak per GPU."""
        from ._results import _peaks_frame
        return _peaks_frame(self._fields["peak_bytes"], self.usable_bytes)

    def __repr__(self):
        return f"Plan({self.name!r}, ops={self.ops}, time_s={self._fields.get('time_s')})"


def plan(scenario, *, segment_bytes=None, baseline=None, simulate=True, replica_blocks=0):
    """Plans the refit (``reshard plan``). Releases the GIL.

    ``segment_bytes``: an int or "64MiB" (default: the scenario's, else
    searched). ``baseline="megatron"``: plan as Megatron-Core does.
    ``replica_blocks`` (``--replica-blocks``): 0, a large refit of identical
    data-parallel blocks of whole nodes is planned for one block and
    replicated; 1, planned whole; N, in N blocks (InputError where it does not
    split so). Raises DoesNotFit (exit 3) when no plan fits in GPU memory; a
    baseline (no memory bound) that peaks above it is returned with ``fits``
    False.
    """
    s = _scenario(scenario)
    seg = 0 if segment_bytes in (None, "auto") else _bytes(segment_bytes, "segment_bytes")
    if isinstance(replica_blocks, bool) or not isinstance(replica_blocks, int) or replica_blocks < 0:
        raise InputError(f"<python>: replica_blocks: expected a count >= 0, got {replica_blocks!r}", "<python>",
                         "replica_blocks", f"expected a count >= 0, got {replica_blocks!r}")
    core, text = _core.plan(s._core, seg, baseline or "", bool(simulate), replica_blocks)
    fields = _json.loads(text)
    if core is None:
        raise DoesNotFit(fields["message"], fields["gpu"], fields["missing_bytes"], fields)
    return Plan(core, fields, s.reserve_bytes, s._core.usable_bytes)


def simulate(target, *, issue=None, one_process=False, cold=False, trace=None, segment_bytes=None, baseline=None):
    """Predicts a plan's refit (``reshard simulate``). Releases the GIL.

    ``target``: a Plan, or a scenario (planned first, with ``segment_bytes`` /
    ``baseline``). ``issue``: who issues the ops ("executor", "python" — the
    default with baseline="megatron" —, "none"). ``trace``: write a Perfetto
    trace there. A peak above a GPU's usable memory is reported in ``fits`` /
    ``over_message``, not raised.
    """
    if isinstance(target, Plan):
        p = target
    else:
        p = plan(target, segment_bytes=segment_bytes, baseline=baseline)
    if issue is None:
        issue = "python" if baseline == "megatron" else "executor"
    text, over = _core.simulate(p._core, issue, bool(one_process), bool(cold), _os.fspath(trace) if trace else "",
                                p.reserve_bytes)
    return Prediction(_json.loads(text), over, p.usable_bytes)


def sweep(scenario, *, segment_bytes=None, offload=None, domains=None, margin=0.05, threads=0, exhaustive=False):
    """Capacity planning (``reshard sweep``): plan and simulate over segment
    sizes, offload fractions, memory policies and NVLink domain sizes.

    Lists default as the CLI's (4 MiB .. 4 GiB, x2, those `plan` accepts; 0, 0.25, 0.5, 1; the cluster's
    domain). Sizes may be ints or strings ("64MiB"). ``threads`` 0: every
    core. Releases the GIL. Points that do not fit are results (``fits``
    False), not exceptions. Points estimated slower are not simulated
    (``simulated`` False) unless ``exhaustive``.
    """
    s = _scenario(scenario)
    segs = [_bytes(b, "segment_bytes") for b in (segment_bytes or [])]
    offs = [float(f) for f in (offload or [])]
    doms = [int(d) for d in (domains or [])]
    return SweepResult(_json.loads(_core.sweep(s._core, segs, offs, doms, float(margin), int(threads),
                                               bool(exhaustive))))


def run(target, *, backend="host", repeat=1, timeout_s=None, max_mismatches=20, warmup=True):
    """Executes a plan and checks every destination byte (``reshard run``).

    ``backend``: "host" (threads, runs anywhere) or "nccl" (CUDA + NCCL on
    this host's GPUs; ``reshard.HAVE_NCCL`` says whether this build has it).
    ``target``: a Plan, or a scenario (planned first). Raises RunFailed when a
    run fails part-way, HostMemoryTooSmall (a DoesNotFit) when the host
    backend would need more than this machine's memory; ``verified`` False
    when some byte is wrong. Releases the GIL.
    """
    p = target if isinstance(target, Plan) else plan(target)
    text = _core.run(p._core, backend, int(repeat), float(timeout_s or 0), int(max_mismatches), bool(warmup))
    return RunResult(_json.loads(text))
