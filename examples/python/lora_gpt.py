"""LoRA fine-tuning of gpt-small on a text file from Python: the base model is
frozen, rank-8 adapters on the attention and MLP layers train; afterwards the
model object holds the merged weights, and samples from it.
    PYTHONPATH=build/python /usr/bin/python3 examples/python/lora_gpt.py [TEXT_FILE] [STEPS]"""
import sys

import dtrain

text_file = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/common-licenses/GPL-3"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 200
model = dtrain.models.build("gpt-small", seed=1)   # or load a pretrained one:
# model.load_state_dict({k: v for k, v in dtrain.load("gpt-small.safetensors").items() if not k.startswith("optimizer.")})
print("before:", repr(dtrain.generate(model, "The ", max_new_tokens=60, seed=1)))
cfg = dtrain.Config(data={"name": "text", "text_file": text_file}, lora={"rank": 8},
                    optimizer={"lr": 0.003}, training={"batch_size": 16, "max_steps": steps},
                    logging={"progress": "off"})
result = dtrain.train(model, config=cfg, on_metrics=lambda r: "val_loss" in r and print(r))
print("val loss %.3f, %d trainable of %d parameters" % (result["val_loss"], result.get("trainable_parameters", 0),
                                                        model.parameter_count()))
print("after:", repr(dtrain.generate(model, "The ", max_new_tokens=60, seed=1)))
