"""Python side of the decode-step profile (step-profile.ts runs it): the same
decode step as step-costs.ts through onnxruntime's Python binding, the same
onnxruntime version and session options. Prints one JSON line.

Variants:
  all        session.run(None, feeds): every output comes back as numpy
  logits     session.run(["logits"], feeds)
  ortvalues  IOBinding with the past bound as OrtValues and the outputs left
             in onnxruntime's memory: the engine with no conversion at all
  shared     IOBinding with each past and its present bound to one OrtValue
             of capacity past+1 (onnxruntime-genai's way): the engine's floor
             for the runtime's shared buffer
  feeds      creating the step's numpy inputs
  argmax     numpy argmax over one row of logits
"""

import json
import sys
import time

import numpy as np
import onnxruntime as ort


def median(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2]


def timed(steps, call):
    call()
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return median(times)


def main():
    config = json.loads(sys.argv[1])
    options = ort.SessionOptions()
    # The runtime's session options (runtime/engine/session.ts).
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = config["threads"]
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.enable_cpu_mem_arena = True
    options.enable_mem_pattern = True
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(config["model"], options, providers=["CPUExecutionProvider"])
    past_inputs = [i for i in session.get_inputs() if i.name.startswith("past_key_values.")]
    heads, head_dim = config["kvHeads"], config["headDim"]
    batch, steps = config["batch"], config["steps"]

    results = []
    for past in config["pasts"]:
        feeds = {
            "input_ids": np.full((batch, 1), 100, np.int64),
            "attention_mask": np.ones((batch, past + 1), np.int64),
        }
        for p in past_inputs:
            feeds[p.name] = np.zeros((batch, heads, past, head_dim), np.float32)
        ms = {}
        ms["all"] = timed(steps, lambda: session.run(None, feeds))
        ms["logits"] = timed(steps, lambda: session.run(["logits"], feeds))

        binding = session.io_binding()
        for name, value in feeds.items():
            binding.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(value))
        for o in session.get_outputs():
            binding.bind_output(o.name, "cpu")
        ms["ortvalues"] = timed(steps, lambda: session.run_with_iobinding(binding))

        shared = session.io_binding()
        for name in ("input_ids", "attention_mask"):
            shared.bind_ortvalue_input(name, ort.OrtValue.ortvalue_from_numpy(feeds[name]))
        for p in past_inputs:
            buffer = ort.OrtValue.ortvalue_from_numpy(
                np.zeros((batch, heads, past + 1, head_dim), np.float32)
            )
            shared.bind_ortvalue_input(p.name, buffer)
            shared.bind_ortvalue_output(p.name.replace("past_key_values.", "present."), buffer)
        shared.bind_output("logits", "cpu")
        ms["shared"] = timed(steps, lambda: session.run_with_iobinding(shared))

        ms["feeds"] = timed(
            steps * 5,
            lambda: (np.array([[100]], np.int64), np.ones((1, past + 1), np.int64)),
        )
        logits = session.run(["logits"], feeds)[0].reshape(batch, -1)
        ms["argmax"] = timed(steps * 5, lambda: int(np.argmax(logits[0])))
        results.append({"past": past, "batch": batch, "ms": ms})
    print(json.dumps(results))


if __name__ == "__main__":
    main()
