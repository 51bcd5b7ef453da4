"""A CNN defined in Python (a dtrain.nn.Module subclass), trained on Fashion-MNIST
by 2 allreduce workers (threads); every step runs in C++.
    PYTHONPATH=build/python /usr/bin/python3 examples/python/fashion_cnn.py [STEPS]"""
import sys

import dtrain
F = dtrain.nn.functional


class SmallCnn(dtrain.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = dtrain.nn.Conv2d(1, 16, 3, padding=1)   # 28x28 -> pool -> 14x14
        self.conv2 = dtrain.nn.Conv2d(16, 32, 3, padding=1)  # 14x14 -> pool -> 7x7
        self.fc = dtrain.nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(F.flatten(x))


steps = int(sys.argv[1]) if len(sys.argv) > 1 else 600
dtrain.manual_seed(0)
model = SmallCnn()
cfg = dtrain.Config(data={"name": "fashion-mnist"}, parallel={"workers": 2},
                    optimizer={"name": "adam", "lr": 0.002},
                    training={"batch_size": 32, "max_steps": steps, "epochs": 1}, logging={"progress": "off"})
result = dtrain.train(model, config=cfg, on_metrics=lambda r: "loss" in r and print("step", r["step"], "loss %.3f" % r["loss"]))
print("test accuracy %.4f, %.0f samples/s" % (result["test_accuracy"], result["samples_per_s"]))
dtrain.save("fashion_cnn.safetensors", model.state_dict())  # torch.nn's names: conv1.weight, ...
