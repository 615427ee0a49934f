#!/usr/bin/env python3
"""Check Cleave against PyTorch on the real-model suite (see make_models.py).

For every model of manifest.json this compiles and runs the ONNX export with
Cleave and compares with the PyTorch reference numbers stored beside it:

  logits      inference plan, max |cleave - torch| / max |torch|     <= 1e-5
  params      the default trainable set equals PyTorch's parameters
  grad        step-1 gradient of every parameter (--return-gradients),
              ||cleave - torch|| / max(||torch||, 1e-4 ||all||)      <= 1e-4
              (a gradient below 1e-4 of the global norm, such as an
              attention key bias's, which is 0 but for rounding, is
              compared against that floor)
  <run>       the 20 losses of each optimizer run, |a - b| / |b|     <= 1e-4
  <run>-norm  the 20 gradient norms of the run (before clipping),
              within 1e-4 or 25x the run's own float32-vs-float64
              difference (make_models.py measures it), if larger: on an
              AVX2 machine (oneDNN's AVX2 kernels sum in another order)
              ResNet-18's clipped AdamW run differs by 4.4e-4 at one step
              of 20 (21x its 2.1e-5), its losses within 1e-5
  adamw-bf16  the adamw run with --precision=bf16 against the fp32
              reference (the mixed-precision tolerance)              <= 2e-2
  running     BatchNorm running statistics after the adamw run
              (--export-safetensors), per tensor                     <= 1e-4
  default ... the model's default export (<name>_default.onnx, the
              exporter's optimizer on) as DEFAULT_EXPORTS says: refused
              with the advice and the constants in doubt, or trained:
              logits, params, grad as above, sgd and adamw losses   <= 1e-5,
              and export-onnx: Cleave's logits of the --export-onnx
              file of the adamw run against onnxruntime's           <= 1e-5

  run_models.py --bin build/bin --work /tmp/models [--only NAME ...] [-j 2]

Prints one line per check and a table of the worst relative loss difference
per model and optimizer run; exits 1 if any check fails.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

TOL_LOGITS = 1e-5
TOL_GRAD = 1e-4
TOL_LOSS = 1e-4
TOL_BF16 = 2e-2
# The default exports (torch.onnx.export's optimizer on) that train must
# train like PyTorch this closely.
TOL_DEFAULT_LOSS = 1e-5

# What Cleave does with each default export (make_models.py writes them):
# "trained", or the constants the refusal names as holding folded parameters.
DEFAULT_EXPORTS = {
    "gpt2_tied": ["'embedding_1' [1,8,32]"],    # wpe's rows at the exported positions
    "gpt2_untied": ["'embedding_1' [1,8,32]"],
    "llama": "trained",                         # Linear weights as transposed copies
    "qwen2": "trained",                         # and the tied LM head's copy
    "bert_mlm": ["'embedding_1' [2,16,32]",     # token-type rows
                 "'embedding_2' [1,16,32]"],    # position rows
}


class Failure(Exception):
    pass


def run(cmd: list[str]) -> str:
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True)
    if proc.returncode != 0:
        raise Failure("command failed (%d): %s\n%s" %
                      (proc.returncode, " ".join(cmd), proc.stdout[-4000:]))
    return proc.stdout


def rel(a: np.ndarray, b: np.ndarray) -> float:
    """||a - b|| / ||b|| (0 when both are 0; inf or nan propagate)."""
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    den = np.linalg.norm(b)
    num = np.linalg.norm(a - b)
    if den == 0:
        return float(num)
    return float(num / den)


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The F32 tensors of a safetensors file."""
    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__" or entry["dtype"] != "F32":
            continue
        begin, end = entry["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + begin:8 + n + end],
                                  np.float32).reshape(entry["shape"])
    return out


def read_log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


class Model:
    def __init__(self, name: str, spec: dict, bin_dir: Path, work: Path):
        self.name, self.spec = name, spec
        self.compile = str(bin_dir / "cleave-compile")
        self.run = str(bin_dir / "cleave-run")
        self.work = work / name
        self.work.mkdir(parents=True, exist_ok=True)
        self.onnx = str(HERE / spec["onnx"])
        self.ref = dict(np.load(HERE / spec["reference"]))
        self.data: list[str] = []
        for inp in spec["inputs"]:
            path = self.work / (inp["name"] + ".npy")
            np.save(path, self.ref["input." + inp["name"]])
            self.data += ["--data", "%s=%s" % (inp["name"], path)]
        labels = self.work / "labels.npy"
        np.save(labels, self.ref["labels"])
        self.data += ["--data", "labels=%s" % labels]

    def train_flags(self, r: dict) -> list[str]:
        return ["--train", "--loss=" + self.spec["loss"],
                "--optimizer=" + r["optimizer"], "--lr=%r" % r["lr"],
                "--momentum=%r" % r["momentum"], "--beta1=%r" % r["beta1"],
                "--beta2=%r" % r["beta2"], "--adam-eps=%r" % r["eps"],
                "--weight-decay=%r" % r["weight_decay"],
                "--clip-grad-norm=%r" % r["clip_grad_norm"]]

    # Each check returns (label, worst relative difference, tolerance).

    def check_logits(self):
        plan = self.work / "infer.cleave"
        run([self.compile, self.onnx, "-o", str(plan)])
        args = []
        for inp in self.spec["inputs"]:
            args += ["--input", "%s=%s" % (inp["name"],
                                          self.work / (inp["name"] + ".npy"))]
        out = self.work / "infer-out"
        run([self.run, str(plan), *args, "--output-dir", str(out)])
        got = np.load(out / (self.spec["logits"] + ".npy"))
        want = self.ref["logits"]
        err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
        return [("logits", err, TOL_LOGITS)]

    def check_gradients(self):
        plan = self.work / "grad.cleave"
        sgd = dict(optimizer="sgd", lr=0.0, momentum=0.0, beta1=0.9,
                   beta2=0.999, eps=1e-8, weight_decay=0.0, clip_grad_norm=0.0)
        run([self.compile, self.onnx, *self.train_flags(sgd),
             "--return-gradients", "-o", str(plan)])
        out = self.work / "grad-out"
        run([self.run, str(plan), "--steps", "1", *self.data,
             "--output-dir", str(out)])
        got = {p.name[len("grad."):-len(".npy")]: p
               for p in out.glob("grad.*.npy")}
        want = set(self.spec["parameters"])
        checks = []
        if set(got) != want:
            raise Failure("trainable set differs from PyTorch's parameters: "
                          "extra %s, missing %s" % (sorted(set(got) - want),
                                                    sorted(want - set(got))))
        checks.append(("params", 0.0, 0.0))
        worst, where = 0.0, ""
        total = np.sqrt(sum(np.sum(np.square(self.ref["grad." + n], dtype=np.float64))
                            for n in want))
        for name in sorted(want):
            a = np.load(got[name]).astype(np.float64)
            b = self.ref["grad." + name].astype(np.float64)
            e = float(np.linalg.norm(a - b) /
                      max(np.linalg.norm(b), 1e-4 * total))
            if not e <= worst:
                worst, where = e, name
        checks.append(("grad" + (" (%s)" % where if where else ""), worst,
                       TOL_GRAD))
        return checks

    def check_run(self, run_name: str, precision: str = "fp32"):
        r = self.spec["runs"][run_name]
        label = run_name if precision == "fp32" else run_name + "-" + precision
        plan = self.work / (label + ".cleave")
        run([self.compile, self.onnx, *self.train_flags(r),
             "--precision=" + precision, "-o", str(plan)])
        log = self.work / (label + ".jsonl")
        run([self.run, str(plan), "--steps", str(r["steps"]), *self.data,
             "--log-json", str(log), "--export-safetensors",
             str(self.work / (label + ".safetensors"))])
        entries = read_log(log)
        losses = np.array([e["loss"] for e in entries])
        want = self.ref["losses." + run_name]
        if len(losses) != len(want):
            raise Failure("%s: %d losses logged, %d expected" %
                          (label, len(losses), len(want)))
        worst = float(np.max(np.abs(losses - want) / np.abs(want)))
        tol = TOL_LOSS if precision == "fp32" else TOL_BF16
        checks = [(label, worst, tol)]
        if precision == "fp32" and "grad_norm." + run_name in self.ref:
            norms = np.array([e["grad_norm"] for e in entries])
            want_norms = self.ref["grad_norm." + run_name]
            tol = max(TOL_LOSS, 25 * r.get("grad_norm_f32_vs_f64", 0.0))
            checks.append((label + "-norm", float(np.max(
                np.abs(norms - want_norms) / np.abs(want_norms))), tol))
        if precision == "fp32" and run_name == "adamw" and self.spec["buffers"]:
            state = read_safetensors(self.work / (label + ".safetensors"))
            worst, where = 0.0, ""
            for buf in self.spec["buffers"]:
                name = buf["name"]
                if name not in state:
                    raise Failure("buffer '%s' is not in the exported state" % name)
                e = rel(state[name], self.ref["running." + name])
                if not e <= worst:
                    worst, where = e, name
            checks.append(("running (%s)" % where, worst, TOL_LOSS))
        return checks


class DefaultExport(Model):
    """The model's default export (make_models.py's <name>_default.onnx): the
    same weights, so the same PyTorch reference numbers."""

    def __init__(self, name: str, spec: dict, bin_dir: Path, work: Path):
        super().__init__(name + "/default", spec, bin_dir, work)
        self.onnx = str(HERE / spec["default_export"]["onnx"])

    def check_run(self, run_name: str, precision: str = "fp32"):
        return [("default " + label, err,
                 TOL_DEFAULT_LOSS if label == run_name else tol)
                for label, err, tol in super().check_run(run_name, precision)]

    def check_logits(self):
        return [("default " + c[0],) + c[1:] for c in super().check_logits()]

    def check_gradients(self):
        return [("default " + c[0],) + c[1:] for c in super().check_gradients()]

    def check_refused(self, named: list[str]):
        r = self.spec["runs"]["adamw"]
        proc = subprocess.run([self.compile, self.onnx, *self.train_flags(r),
                               "-o", str(self.work / "refused.cleave")],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
        advice = ["optimize=False", "cleave.compile_torch", "--trainable"]
        missing = [m for m in named + advice if m not in proc.stdout]
        if proc.returncode == 0 or missing or (self.work / "refused.cleave").exists():
            raise Failure("expected a refusal naming %s (exit %d):\n%s" %
                          (missing or named, proc.returncode, proc.stdout[-2000:]))
        return [("refused", 0.0, 0.0)]

    def check_export(self):
        """--export-onnx of the adamw run: Cleave's logits of the trained file
        against onnxruntime's."""
        import onnxruntime
        r = self.spec["runs"]["adamw"]
        plan = self.work / "export.cleave"
        trained = self.work / "trained.onnx"
        run([self.compile, self.onnx, *self.train_flags(r), "-o", str(plan)])
        run([self.run, str(plan), "--steps", str(r["steps"]), *self.data,
             "--export-onnx", str(trained)])
        infer = self.work / "trained.cleave"
        run([self.compile, str(trained), "-o", str(infer)])
        inputs, args = {}, []
        for inp in self.spec["inputs"]:
            path = self.work / (inp["name"] + ".npy")
            inputs[inp["name"]] = np.load(path)
            args += ["--input", "%s=%s" % (inp["name"], path)]
        out = self.work / "trained-out"
        run([self.run, str(infer), *args, "--output-dir", str(out)])
        got = np.load(out / (self.spec["logits"] + ".npy"))
        session = onnxruntime.InferenceSession(str(trained))
        want = session.run([self.spec["logits"]], inputs)[0]
        untrained = self.ref["logits"]
        if np.array_equal(want, untrained):
            raise Failure("the exported model still holds the initial weights")
        return [("default export-onnx", float(np.max(np.abs(got - want)) /
                                      np.max(np.abs(want))), TOL_LOGITS)]


# The models that check every optimizer run of the manifest (SGD, Adam,
# AdamW, clipped AdamW): one of each architecture family (decoder with tied
# embeddings, grouped-query decoder with RMSNorm and rotary, encoder,
# convolutional with BatchNorm). The optimizers' arithmetic is the same for
# every model; the others train with AdamW (and bf16), which their layers
# are what is checked by. --all-runs runs every run of every model.
EVERY_OPTIMIZER = {"gpt2_tied", "llama", "bert_mlm", "resnet18"}


def check_model(name: str, spec: dict, args) -> list[tuple]:
    results = []

    def guarded(label, fn, *a):
        try:
            for check in fn(*a):
                results.append((name,) + check)
        except Failure as e:
            results.append((name, label, float("inf"), 0.0, str(e)))

    m = Model(name, spec, args.bin, args.work)
    guarded("logits", m.check_logits)
    guarded("grad", m.check_gradients)
    for run_name in spec["runs"]:
        if args.all_runs or run_name == "adamw" or name in EVERY_OPTIMIZER:
            guarded(run_name, m.check_run, run_name)
    if "adamw" in spec["runs"]:
        guarded("adamw-bf16", m.check_run, "adamw", "bf16")
    if "default_export" in spec:
        d = DefaultExport(name, spec, args.bin, args.work)
        expect = DEFAULT_EXPORTS.get(name)
        if expect is None:
            results.append((name, "default", float("inf"), 0.0,
                            "run_models.py does not say what its default export does"))
        elif expect == "trained":
            guarded("default logits", d.check_logits)
            guarded("default grad", d.check_gradients)
            for run_name in ("sgd", "adamw"):
                guarded("default " + run_name, d.check_run, run_name)
            guarded("default export-onnx", d.check_export)
        else:
            guarded("default refused", d.check_refused, expect)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--only", nargs="*")
    parser.add_argument("-j", type=int, default=2)
    parser.add_argument("--all-runs", action="store_true",
                        help="every optimizer run of every model (by default "
                             "the models of EVERY_OPTIMIZER run them all, the "
                             "others AdamW alone)")
    args = parser.parse_args()
    manifest = json.loads((HERE / "manifest.json").read_text())
    models = {k: v for k, v in manifest["models"].items()
              if not args.only or k in args.only}
    if args.only and set(args.only) - set(models):
        print("unknown models: %s" % sorted(set(args.only) - set(models)))
        return 2

    results = []
    with concurrent.futures.ThreadPoolExecutor(args.j) as pool:
        futures = {pool.submit(check_model, k, v, args): k
                   for k, v in models.items()}
        for f in concurrent.futures.as_completed(futures):
            results += f.result()

    passed = failed = 0
    results.sort(key=lambda r: (list(models).index(r[0]), r[1]))
    for r in results:
        name, label, err, tol = r[:4]
        ok = err <= tol
        passed += ok
        failed += not ok
        print("%s %-12s %-28s %.2e (tolerance %.0e)%s" %
              ("PASS" if ok else "FAIL", name, label, err, tol,
               "" if len(r) < 5 else "\n    " + r[4].replace("\n", "\n    ")))

    runs = sorted({r[1] for r in results
                   if not r[1].removeprefix("default ").startswith(
                       ("logits", "grad", "params", "running", "refused", "export-onnx"))
                   and not r[1].endswith("-norm")},
                  key=lambda s: (s.endswith("bf16"), s))
    print("\nworst relative loss difference over %d steps" % manifest["steps"])
    print("| model | " + " | ".join(runs) + " |")
    print("|---" * (len(runs) + 1) + "|")
    for name in models:
        cells = []
        for run_name in runs:
            hit = [r for r in results if r[0] == name and r[1] == run_name]
            cells.append("%.1e" % hit[0][2] if hit else "-")
        print("| %s | %s |" % (name, " | ".join(cells)))
    print("\n%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
