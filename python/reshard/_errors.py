"""reshard's exceptions: the CLI's exit classes as Python exception classes.

Every exception carries ``exit_code``, the code the ``reshard`` command exits
with for the same failure: 2 bad input (InputError, with the file, field and
problem the CLI prints), 3 does not fit in GPU memory (DoesNotFit, with the GPU
and the bytes missing; HostMemoryTooSmall, a plan larger than this machine's
memory on the host backend), 1 a run that failed part-way or a broken invariant.
"""


class Error(Exception):
    """Base class of reshard's exceptions; ``exit_code`` is the CLI's."""

    exit_code = 1


class InputError(Error, ValueError):
    """Bad input: a scenario, HF config, recipe, plan file or argument.

    ``file`` is the input's path (``<python>`` for an argument of a call),
    ``field`` the dotted path of the offending field (``source.tp``; empty when
    the whole input is bad), ``problem`` what is wrong. ``str(e)`` is the
    CLI's message.
    """

    exit_code = 2

    def __init__(self, message, file="", field="", problem=""):
        super().__init__(message)
        self.file = file
        self.field = field
        self.problem = problem or message


class DoesNotFit(Error):
    """The job does not fit in GPU memory: no plan exists (``reshard plan``
    exits 3), or a plan's peak exceeds a GPU's capacity less the reserve.

    ``gpu`` is the GPU short of the most memory, ``missing_bytes`` how much it
    lacks (0 when unknown), ``result`` the CLI's JSON for the case (a dict) and
    ``plan`` the plan when one exists (a baseline without a memory bound).
    """

    exit_code = 3

    def __init__(self, message, gpu=-1, missing_bytes=0, result=None, plan=None):
        super().__init__(message)
        self.message = message
        self.gpu = gpu
        self.missing_bytes = missing_bytes
        self.result = result or {}
        self.plan = plan


class HostMemoryTooSmall(DoesNotFit):
    """The host backend refused a plan whose buffers exceed this machine's
    memory, before allocating anything (``reshard run --backend host`` exits
    3 with the same JSON).

    ``needed_bytes`` is what the host backend would hold, ``available_bytes``
    what the machine (or its cgroup) still grants and ``source`` where that
    was read (``/proc/meminfo MemAvailable``, the cgroup's limit, or
    ``RESHARD_HOST_MEMORY_BYTES``); ``missing_bytes`` the difference; ``gpu``
    -1; ``result`` the CLI's JSON. Run such a plan with ``backend="nccl"`` on
    GPUs, or predict it with ``reshard.simulate``.
    """

    def __init__(self, message, result):
        super().__init__(message, -1, result.get("missing_bytes", 0), result)
        host = result.get("host_memory", {})
        self.needed_bytes = host.get("needed_bytes", 0)
        self.available_bytes = host.get("available_bytes", 0)
        self.source = host.get("source", "")


class RunFailed(Error):
    """A run failed part-way (a fault, a timeout, a GPU error): ``op`` and
    ``gpu`` say where (-1 when unknown). Nothing of it counts as verified."""

    exit_code = 1

    def __init__(self, message, op=-1, gpu=-1):
        super().__init__(message)
        self.op = op
        self.gpu = gpu


class InternalError(Error):
    """A broken invariant inside reshard (file and line in the message)."""

    exit_code = 1
