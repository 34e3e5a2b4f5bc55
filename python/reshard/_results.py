"""Typed results of reshard's calls.

Each result holds the JSON object the CLI prints with ``--json`` for the same
call (docs/json.md), built by the same C++ code: ``to_dict()`` returns it, and
every field is also an attribute (``prediction.time_s``,
``inspection.memory_at_start``). Tables come as pandas DataFrames
(``links_frame()``, ``peaks_frame()``, ``points_frame()``); pandas is needed
only for those.
"""

import copy


def _pandas():
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - pandas is a Debian package here
        raise ImportError("DataFrames need pandas (apt install python3-pandas, or pip install pandas)") from e
    return pandas


class Record:
    """A result whose fields are those of the CLI's JSON for the same call."""

    def __init__(self, fields):
        self._fields = fields

    def to_dict(self):
        """The CLI's ``--json`` object for this result (a copy)."""
        return copy.deepcopy(self._fields)

    def __getattr__(self, name):
        fields = self.__dict__.get("_fields")
        if fields is not None and name in fields:
            return fields[name]
        raise AttributeError(f"{type(self).__name__} has no field '{name}' (fields: {', '.join(fields or {})})")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._fields))

    def __eq__(self, other):
        return type(self) is type(other) and self._fields == other._fields

    def __repr__(self):
        shown = {k: v for k, v in self._fields.items() if not isinstance(v, (list, dict))}
        inner = ", ".join(f"{k}={v!r}" for k, v in list(shown.items())[:8])
        return f"{type(self).__name__}({inner}, ...)"


def _peaks_frame(peak_bytes, capacity_bytes=None):
    pd = _pandas()
    frame = pd.DataFrame({"gpu": range(len(peak_bytes)), "peak_bytes": peak_bytes})
    if capacity_bytes is not None:
        frame["usable_bytes"] = capacity_bytes
        frame["share"] = frame["peak_bytes"] / capacity_bytes
    return frame.set_index("gpu")


class Inspection(Record):
    """``reshard inspect``: sizes, per-GPU bytes and the memory at refit start.

    ``fits`` False (with ``missing_bytes``, ``worst_gpu``, ``message``) is an
    answer, not an exception: the CLI exits 3 with the same JSON.
    """

    scenario: str
    fits: bool
    missing_bytes: int
    worst_gpu: int
    message: str
    parameters: int
    model_bytes: int
    source_bytes: list
    destination_bytes: list
    memory_at_start: list

    def memory_frame(self):
        """One row per GPU the refit uses (``memory_at_start``), indexed by GPU."""
        return _pandas().DataFrame(self._fields["memory_at_start"]).set_index("gpu")


class Prediction(Record):
    """``reshard simulate``: predicted time, per-GPU peaks, links and phases.

    ``fits`` and ``over_message`` say whether every peak stays within a GPU's
    capacity less the scenario's reserve (the CLI exits 3 when not); they are
    not part of ``to_dict()``, which is the CLI's JSON.
    """

    plan: str
    time_s: float
    peak_bytes: list
    bytes_moved: dict
    lower_bound_s: float
    plan_efficiency: float
    links: list
    phases: dict

    def __init__(self, fields, over_message="", usable_bytes=None):
        super().__init__(fields)
        self.over_message = over_message
        self.fits = not over_message
        self.usable_bytes = usable_bytes

    def links_frame(self):
        """Every port that carried bytes, one row each (``links``)."""
        return _pandas().DataFrame(self._fields["links"])

    def peaks_frame(self):
        """Predicted peak per GPU (and its share of what the GPU may use)."""
        return _peaks_frame(self._fields["peak_bytes"], self.usable_bytes)

    def phases_frame(self):
        """Where the time went: one row per op kind and per link class."""
        pd = _pandas()
        rows = [dict(r, by="kind") for r in self._fields["phases"]["by_kind"]]
        rows += [dict(r, by="class") for r in self._fields["phases"]["by_class"]]
        return pd.DataFrame(rows)


class SweepResult(Record):
    """``reshard sweep``: every point, the Pareto front and a recommendation."""

    scenario: str
    capacity_bytes: int
    margin: float
    points: list

    @property
    def recommended(self):
        """The recommended point (a dict with ``index`` and ``why``), or None."""
        return self._fields.get("recommended")

    def points_frame(self):
        """One row per point, in grid order, with ``recommended`` marked."""
        frame = _pandas().DataFrame(self._fields["points"])
        rec = self.recommended
        frame["recommended"] = False
        if rec is not None:
            frame.loc[rec["index"], "recommended"] = True
        return frame

    def pareto_frame(self):
        """The points on the (time, peak) Pareto front, fastest first."""
        frame = self.points_frame()
        return frame[frame["pareto"]].sort_values("time_s")


class RunResult(Record):
    """``reshard run``: the plan's prediction, the backend, ``verified`` and
    ``measured`` (what the chosen run measured)."""

    backend: str
    verified: bool
    measured: dict

    def links_frame(self):
        """Measured bytes and bandwidth per link class."""
        return _pandas().DataFrame(self._fields["measured"]["links"])
