#!/usr/bin/env python3
"""Generates a torchvision-style ResNet as an ONNX model (no PyTorch needed).

The inference graph is what `torch.onnx.export` writes for torchvision's
resnet18/resnet50 in eval mode (opset 17): each BatchNorm folded into its
convolution's weight and bias, Relu, a 3x3 MaxPool after the 7x7 stem,
residual Adds, GlobalAveragePool, Flatten and a Gemm classifier. With
--batchnorm the BatchNormalization nodes stay (the training form). Weights
are random (seeded, Kaiming-normal convolutions), so the model exercises
the same kernels at the same sizes as the real one.

    make_resnet.py --depth 18 --batch 1 --image 224 -o resnet18.onnx
    make_resnet.py --depth 50 -o resnet50.onnx
    make_resnet.py --depth 18 --width 8 --image 32 --classes 10 --batchnorm -o small.onnx
"""

import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BLOCKS = {18: ("basic", [2, 2, 2, 2]), 34: ("basic", [3, 4, 6, 3]),
          50: ("bottleneck", [3, 4, 6, 3])}


def build(depth, batch, image, classes, width, batchnorm, seed=0):
    rng = np.random.default_rng(seed)
    kind, layers = BLOCKS[depth]
    inits, nodes = [], []

    def param(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(op, inputs, name, **attrs):
        out = name + "_out"
        nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def conv_bn(x, cin, cout, k, stride, name, relu=True):
        std = np.sqrt(2.0 / (cin * k * k))
        w = rng.standard_normal((cout, cin, k, k)) * std
        pads = [k // 2] * 4
        if batchnorm:
            y = node("Conv", [x, param(name + ".weight", w)], name, kernel_shape=[k, k],
                     strides=[stride, stride], pads=pads)
            ones, zeros = np.ones(cout), np.zeros(cout)
            y = node("BatchNormalization",
                     [y, param(name + ".bn.weight", ones), param(name + ".bn.bias", zeros),
                      param(name + ".bn.running_mean", zeros),
                      param(name + ".bn.running_var", ones)],
                     name + ".bn", epsilon=1e-5, momentum=0.9)
        else:
            bias = rng.standard_normal(cout) * 0.01
            y = node("Conv", [x, param(name + ".weight", w), param(name + ".bias", bias)],
                     name, kernel_shape=[k, k], strides=[stride, stride], pads=pads)
        return node("Relu", [y], name + ".relu") if relu else y

    x = "pixel_values"
    y = conv_bn(x, 3, width, 7, 2, "conv1")
    y = node("MaxPool", [y], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    expansion = 4 if kind == "bottleneck" else 1
    for stage, count in enumerate(layers):
        planes = width * (2 ** stage)
        for b in range(count):
            stride = 2 if stage > 0 and b == 0 else 1
            name = "layer%d.%d" % (stage + 1, b)
            if kind == "basic":
                h = conv_bn(y, cin, planes, 3, stride, name + ".conv1")
                h = conv_bn(h, planes, planes, 3, 1, name + ".conv2", relu=False)
            else:
                h = conv_bn(y, cin, planes, 1, 1, name + ".conv1")
                h = conv_bn(h, planes, planes, 3, stride, name + ".conv2")
                h = conv_bn(h, planes, planes * expansion, 1, 1, name + ".conv3", relu=False)
            shortcut = y
            if stride != 1 or cin != planes * expansion:
                shortcut = conv_bn(y, cin, planes * expansion, 1, stride,
                                   name + ".downsample", relu=False)
            y = node("Add", [h, shortcut], name + ".add")
            y = node("Relu", [y], name + ".relu")
            cin = planes * expansion
    y = node("GlobalAveragePool", [y], "avgpool")
    y = node("Flatten", [y], "flatten", axis=1)
    fc = rng.standard_normal((classes, cin)) * np.sqrt(1.0 / cin)
    logits = node("Gemm", [y, param("fc.weight", fc), param("fc.bias", np.zeros(classes))],
                  "fc", transB=1)
    nodes[-1].output[0] = "logits"

    graph = helper.make_graph(
        nodes, "resnet%d" % depth,
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [batch, 3, image, image])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="make_resnet")
    model.ir_version = 8  # what opset 17 needs; readable by older runtimes
    onnx.checker.check_model(model)
    return model


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--depth", type=int, default=18, choices=sorted(BLOCKS))
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--image", type=int, default=224)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--width", type=int, default=64, help="channels of the stem and first stage")
    p.add_argument("--batchnorm", action="store_true",
                   help="keep BatchNormalization nodes (the training form) instead of folding them")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    model = build(a.depth, a.batch, a.image, a.classes, a.width, a.batchnorm, a.seed)
    onnx.save(model, a.output)


if __name__ == "__main__":
    main()
