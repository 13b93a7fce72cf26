import pytest

from crossalign.config import config_to_dict, load_config
from crossalign.errors import CrossalignError


def test_defaults_and_overrides(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("train:\n  steps: 5\nobjectives:\n  - {name: mlm, mask_prob: 0.2}\n")
    cfg = load_config(path, ["train.lr=0.01", "objectives.0.weight=2", "model.preset=tiny"])
    assert cfg.train.steps == 5 and cfg.train.lr == 0.01
    assert cfg.objectives[0].weight == 2.0
    assert cfg.objectives[0].options == {"mask_prob": 0.2}
    assert cfg.model.preset == "tiny"
    assert config_to_dict(cfg)["train"]["betas"] == [0.9, 0.98]
    assert load_config(None, ["train.lr=5e-5"]).train.lr == 5e-5  # YAML 1.1 gives a string


def test_unknown_key_suggests_nearest(tmp_path):
    with pytest.raises(CrossalignError, match=r"unknown config key 'train.stesp'.*'steps'"):
        load_config(None, ["train.stesp=3"])
    with pytest.raises(CrossalignError, match=r"'trian'.*did you mean 'train'"):
        load_config(None, ["trian.steps=3"])


def test_bad_values_are_named():
    with pytest.raises(CrossalignError, match="train.steps='abc' must be of type int"):
        load_config(None, ["train.steps=abc"])
    with pytest.raises(CrossalignError, match="train.precision"):
        load_config(None, ["train.precision=fp8"])
    with pytest.raises(CrossalignError, match="model.preset 'tinny'.*did you mean 'tiny'"):
        load_config(None, ["model.preset=tinny"])
    with pytest.raises(CrossalignError, match="key=value"):
        load_config(None, ["train.steps"])


def test_bad_yaml_names_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train: [unclosed\n")
    with pytest.raises(CrossalignError, match="bad.yaml: not valid YAML"):
        load_config(path)
    with pytest.raises(CrossalignError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize("native", [True, False])
def test_cpu_precision_auto_and_bf16_warning(monkeypatch, capsys, native):
    """auto is bf16 on a CPU with bf16 instructions; an explicit bf16 without them is warned."""
    import torch

    from crossalign.training import setup

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(setup, "cpu_has_bf16", lambda: native)
    assert setup.mixed_precision("bf16") == "bf16"
    assert setup.mixed_precision("no") == "no"
    assert setup.mixed_precision("auto") == ("bf16" if native else "no")
    warned = "train.precision=bf16 on a CPU without bf16 instructions" in capsys.readouterr().err
    assert warned is not native


def test_a_later_run_may_change_precision_in_the_same_process():
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import DistributedType

    from crossalign.training.setup import reset_precision_state

    AcceleratorState._reset_state()
    try:
        Accelerator(cpu=True, mixed_precision="bf16")
        with pytest.raises(ValueError, match="cannot be changed"):
            Accelerator(cpu=True, mixed_precision="no")  # accelerate alone refuses
        reset_precision_state("no")
        assert Accelerator(cpu=True, mixed_precision="no").mixed_precision == "no"
        reset_precision_state("no")  # the same precision: nothing to reset
        state = AcceleratorState._shared_state
        kind, state["distributed_type"] = state["distributed_type"], DistributedType.FSDP
        try:
            with pytest.raises(CrossalignError, match="already trained under FSDP with no"):
                reset_precision_state("bf16")
        finally:
            state["distributed_type"] = kind
    finally:
        AcceleratorState._reset_state()
