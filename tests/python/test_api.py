"""The reshard module against the CLI: the same answers, the same names, the
same error classes, for the same scenario."""
import json

import pytest

import reshard
from conftest import TINY

# tiny-llama-tp2-to-tp1x2 (scenarios/) as a dict.
TINY_DICT = {
    "name": "tiny-from-dict",
    "model": "tiny-llama",
    "dtype": "bf16",
    "cluster": "h200-x2",
    "source": {"engine": "megatron", "tp": 2, "dp": 1, "gpus": "all"},
    "destination": {"engine": "vllm", "tp": 1, "dp": 2, "gpus": "all"},
    "memory": {"optimizer": {"bytes_per_param": 12, "offload": "auto"}, "kv_cache": "64MiB", "reserve": "16MiB"},
    "plan": {"segment_bytes": "1MiB"},
}


def test_version_is_the_clis(cli):
    r = cli("--version")
    assert r.returncode == 0
    assert r.stdout.strip() == f"reshard {reshard.__version__}"


def test_inspect_plan_simulate_to_dict_is_the_clis_json(cli):
    s = reshard.load_scenario(TINY)
    assert reshard.inspect(s).to_dict() == cli.json("inspect", TINY)
    p = reshard.plan(s)
    assert p.to_dict() == cli.json("plan", TINY)
    assert reshard.simulate(p).to_dict() == cli.json("simulate", TINY)
    assert reshard.simulate(p, cold=True, one_process=True).to_dict() == cli.json(
        "simulate", TINY, "--cold", "--one-process")
    b = reshard.plan(s, baseline="megatron")
    assert b.to_dict() == cli.json("plan", TINY, "--baseline", "megatron")
    assert reshard.simulate(b, issue="python").to_dict() == cli.json("simulate", TINY, "--baseline", "megatron")


def test_sweep_to_dict_is_the_clis_json_and_frames(cli, tmp_path):
    r = reshard.sweep(TINY, segment_bytes=["1MiB", 4 << 20], offload=[0, 1], threads=2)
    csv_path = tmp_path / "sweep.csv"
    assert r.to_dict() == cli.json("sweep", TINY, "--segment-bytes", "1MiB,4MiB", "--offload", "0,1", "--csv", csv_path)
    frame = r.points_frame()
    assert len(frame) == len(r.points) == 2 * 2 * 4  # segment sizes x offload fractions x memory policies
    assert frame["recommended"].sum() == 1
    # The CLI's --csv says the same points, flags and recommendation as its --json (and so the frame).
    import pandas as pd
    csv = pd.read_csv(csv_path)
    assert len(csv) == len(frame)
    def same(a, b):  # points the sweep pruned (simulated: false) have no peak or time in either
        return ((a == b) | (a.isna() & b.isna())).all()

    for column in ("segment_bytes", "offload_fraction", "memory_policy", "nvlink_domain_nodes", "peak_bytes"):
        assert same(csv[column], frame[column]), column
    missing = frame["missing_bytes"].fillna(0) if "missing_bytes" in frame else 0  # JSON: only where it does not fit
    assert (csv.missing_bytes.fillna(0) == missing).all()
    assert (((csv.time_s - frame.time_s).abs() <= 1e-8 * frame.time_s) | (csv.time_s.isna() & frame.time_s.isna())).all()
    simulated = csv.simulated == "yes"
    assert (simulated == frame["simulated"].astype(bool)).all()
    assert ((csv.fits == "yes") == frame["fits"].fillna(False).astype(bool))[simulated].all()
    assert csv.fits[~simulated].isna().all()  # not simulated: not known to fit
    for column in ("pareto", "recommended"):
        assert ((csv[column] == "yes") == frame[column]).all(), column
    assert frame.loc[r.recommended["index"], "time_s"] == r.recommended["time_s"]
    assert set(r.pareto_frame().index) == {i for i, p in enumerate(r.points) if p["pareto"]}


def test_typed_fields_and_frames():
    s = reshard.load_scenario(TINY)
    info = reshard.inspect(s)
    assert info.fits and info.missing_bytes == 0 and info.worst_gpu == -1
    assert list(info.memory_frame().index) == [0, 1]
    p = reshard.plan(s)
    assert p.fits and p.segment_bytes == 1 << 20 and p.name == TINY and p.replica_blocks == 1
    assert list(p.peaks_frame()["peak_bytes"]) == p.peak_bytes
    pred = reshard.simulate(p)
    assert pred.fits and pred.time_s > 0 and pred.time_s == p.time_s
    links = pred.links_frame()
    assert {"port", "class", "bytes", "utilisation"} <= set(links.columns)
    assert links["bytes"].sum() > 0
    assert (pred.peaks_frame()["share"] < 1).all()
    assert set(pred.phases_frame()["by"]) == {"kind", "class"}
    with pytest.raises(AttributeError, match="no field"):
        pred.no_such_field


def test_from_dict_equals_the_file():
    a = reshard.inspect(reshard.Scenario.from_dict(TINY_DICT)).to_dict()
    b = reshard.inspect(reshard.load_scenario(TINY)).to_dict()
    for key in ("scenario", "path"):
        a.pop(key), b.pop(key)
    assert a == b


def test_hf_config_and_scenario_file(cli, data_dir):
    path = data_dir / "scenarios" / "hf-llama3-8b.yaml"
    assert reshard.inspect(reshard.load_scenario(path)).to_dict() == cli.json("inspect", path)
    s = reshard.load_scenario(data_dir / "hf" / "llama3-8b" / "config.json", kind="hf", cluster="h200-x2",
                              source={"tp": 2}, destination={"tp": 1, "dp": 2})
    info = reshard.inspect(s)
    assert info.model == "llama3-8b" and info.parameters > 8e9 and info.fits


def test_import_recipes_as_the_cli(cli, data_dir):
    recipe = data_dir / "import" / "grpo_llama8b_megatron.yaml"
    s = reshard.load_scenario(recipe, kind="nemo-rl")
    j = cli.json("import", "nemo-rl", recipe)
    assert s.yaml == j["scenario_yaml"] and s.assumptions == j["assumptions"] and s.name == j["name"]
    assert reshard.inspect(s).fits
    v = reshard.load_scenario(data_dir / "import" / "ppo_megatron_minimal.yaml", kind="verl", cluster="dgx-h200")
    assert any("verl's default 2" in a for a in v.assumptions)


def test_input_error_carries_file_field_problem(cli, tmp_path):
    bad = dict(TINY_DICT, source={"engine": "megatron", "tp": 3, "gpus": "all"})
    with pytest.raises(reshard.InputError) as e:
        reshard.Scenario.from_dict(bad)
    assert e.value.exit_code == 2 and e.value.file == "<dict>" and e.value.field.startswith("source")
    assert e.value.problem and e.value.problem in str(e.value)
    # The CLI says the same for the same scenario in a file (exit 2).
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    r = cli("inspect", path)
    assert r.returncode == 2 and e.value.problem in r.stderr
    with pytest.raises(reshard.InputError) as e:
        reshard.load_scenario(path)
    assert e.value.file == str(path)
    with pytest.raises(reshard.InputError, match="did you mean"):
        reshard.load_scenario("tiny-llama-tp2-to-tp1x3")
    with pytest.raises(reshard.InputError) as e:
        reshard.plan(TINY, segment_bytes="64M")  # ambiguous: MB or MiB
    assert e.value.field == "segment_bytes"
    assert isinstance(e.value, ValueError)
    # One source replica: no identical blocks (planner/replica_blocks.h); as `plan --replica-blocks 2`.
    with pytest.raises(reshard.InputError, match="does not split into 2 identical blocks") as e:
        reshard.plan(TINY, replica_blocks=2)
    assert e.value.field == "replica_blocks"
    with pytest.raises(reshard.InputError):
        reshard.plan(TINY, replica_blocks=-1)


def test_does_not_fit_mirrors_exit_3(cli, data_dir):
    path = data_dir / "scenarios" / "does-not-fit.yaml"
    s = reshard.load_scenario(path)
    info = reshard.inspect(s)
    assert not info.fits and info.missing_bytes > 0  # an answer, not an exception
    assert info.to_dict() == cli.json("inspect", path, expect_rc=3)
    with pytest.raises(reshard.DoesNotFit) as e:
        reshard.plan(s)
    assert e.value.exit_code == 3 and e.value.missing_bytes > 0 and e.value.gpu >= 0
    assert e.value.result == cli.json("plan", path, expect_rc=3)
    with pytest.raises(reshard.DoesNotFit):
        reshard.simulate(s)


def test_host_memory_refusal_mirrors_exit_3(cli, monkeypatch):
    # RESHARD_HOST_MEMORY_BYTES stands in for this machine's free memory, for the module and the CLI alike.
    monkeypatch.setenv("RESHARD_HOST_MEMORY_BYTES", "1000000")
    p = reshard.plan(TINY)
    with pytest.raises(reshard.HostMemoryTooSmall) as e:
        reshard.run(p, backend="host")
    assert isinstance(e.value, reshard.DoesNotFit) and e.value.exit_code == 3 and e.value.gpu == -1
    assert e.value.available_bytes == 1000000 and e.value.source == "RESHARD_HOST_MEMORY_BYTES"
    assert e.value.missing_bytes == e.value.needed_bytes - 1000000 > 0
    assert "976.6 KiB is available" in str(e.value)
    assert e.value.result == cli.json("run", TINY, "--backend", "host", expect_rc=3)
    assert e.value.result["fits"] is False and e.value.result["verified"] is False


def test_plan_save_load_simulate_run(cli, tmp_path):
    s = reshard.load_scenario(TINY)
    p = reshard.plan(s)
    path = tmp_path / "plan.json"
    p.save(path)
    q = reshard.Plan.load(path, scenario=s)
    assert q.to_json() == p.to_json()
    # The reserve comes from the scenario the plan is loaded with, as `--scenario` gives it to the CLI.
    assert reshard.simulate(q).to_dict() == reshard.simulate(p).to_dict() == cli.json("simulate", path, "--scenario", TINY)
    # A plan refused for another scenario, as `--scenario` does.
    with pytest.raises(reshard.InputError) as e:
        reshard.Plan.load(path, scenario="llama3-8b-tp2-to-tp1x2")
    assert e.value.file == str(path) and e.value.field in ("scenario_fingerprint", "tensors", "cluster_fingerprint")
    run = reshard.run(q, backend="host")
    assert run.verified and run.backend == "host" and run.measured["mismatch_count"] == 0
    expected = cli.json("run", path, "--backend", "host")
    assert set(run.to_dict()) == set(expected)
    assert {k: v for k, v in run.to_dict().items() if k != "measured"} == {
        k: v for k, v in expected.items() if k != "measured"}
    assert len(run.links_frame()) > 0
    if not reshard.HAVE_NCCL:
        with pytest.raises(reshard.InputError, match="without the NCCL backend"):
            reshard.run(q, backend="nccl")
