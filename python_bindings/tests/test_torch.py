"""compile_torch and PyTorch tensors through DLPack. These need PyTorch,
which the project's set-up does not install (it is not in what CI may
install); they run wherever torch is importable."""

import numpy as np
import pytest

import cleave

torch = pytest.importorskip("torch")


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


def test_compile_torch_matches_pytorch():
    torch.manual_seed(0)
    net = SmallNet().eval()
    x = torch.randn(4, 8)
    plan = cleave.compile_torch(net, (x,), input_names=["x"], output_names=["y"])
    (y,) = plan.run({"x": x})  # A torch tensor, read through DLPack.
    with torch.no_grad():
        expected = net(x).numpy()
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def test_torch_tensors_as_training_batches(gpt_plan):
    ids = torch.randint(0, 96, (2, 8))
    with cleave.Trainer(gpt_plan, log_every=0) as t:
        from_torch = t.step({"input_ids": ids, "labels": ids.roll(-1, 1)})
    with cleave.Trainer(gpt_plan, log_every=0) as t:
        from_numpy = t.step({"input_ids": ids.numpy(),
                             "labels": ids.roll(-1, 1).numpy()})
    assert from_torch["loss"] == from_numpy["loss"]
