// The VJP rules at their edges, printed at fixed inputs and checked against
// the values PyTorch's autograd gives there: kinks, ties, zeros and masks.
// RUN: cleave-gradcheck %s | FileCheck %s
// RUN: cleave-gradcheck %s --hostile | FileCheck %s --check-prefix=HOSTILE

// x^3 of negative bases: 3x^2, no NaN (torch.pow).
// CHECK: GRAD f_pow_cube #0: 12 0.75 0 6.75
func.func @f_pow_cube(%x: tensor<4xf64> {gradcheck.values = dense<[-2.0, -0.5, 0.0, 1.5]> : tensor<4xf64>}) -> tensor<4xf64> attributes {gradcheck.print} {
  %c = cleave.constant dense<3.0> : tensor<4xf64>
  %0 = cleave.binary pow %x, %c : tensor<4xf64>
  return %0 : tensor<4xf64>
}

// x^0 has gradient 0 everywhere, also at x = 0 (torch.pow); d/dy at x = 0
// and y >= 0 is 0, and y log(x) elsewhere.
// CHECK: GRAD f_pow_edges #0: 0 4 1 1
// CHECK: GRAD f_pow_edges #1: 0 2.77259 5.54518 -0.346574
func.func @f_pow_edges(%x: tensor<4xf64> {gradcheck.values = dense<[0.0, 2.0, 4.0, 0.5]> : tensor<4xf64>},
                       %y: tensor<4xf64> {gradcheck.values = dense<[0.0, 2.0, 1.0, 1.0]> : tensor<4xf64>}) -> tensor<4xf64> attributes {gradcheck.print} {
  %0 = cleave.binary pow %x, %y : tensor<4xf64>
  return %0 : tensor<4xf64>
}

// abs at 0: 0 (sign(0)).
// CHECK: GRAD f_abs_zero #0: -1 0 1
func.func @f_abs_zero(%x: tensor<3xf64> {gradcheck.values = dense<[-2.0, 0.0, 3.0]> : tensor<3xf64>}) -> tensor<3xf64> attributes {gradcheck.print} {
  %0 = cleave.unary abs %x : tensor<3xf64>
  return %0 : tensor<3xf64>
}

// sqrt at 0: +inf, as PyTorch (grad / (2 sqrt(x))).
// CHECK: GRAD f_sqrt_zero #0: inf 0.25
func.func @f_sqrt_zero(%x: tensor<2xf64> {gradcheck.values = dense<[0.0, 4.0]> : tensor<2xf64>}) -> tensor<2xf64> attributes {gradcheck.print} {
  %0 = cleave.unary sqrt %x : tensor<2xf64>
  return %0 : tensor<2xf64>
}

// max and min ties split the cotangent (torch.maximum, torch.minimum).
// CHECK: GRAD f_max_ties #0: 0.5 1 0
// CHECK: GRAD f_max_ties #1: 0.5 0 1
func.func @f_max_ties(%x: tensor<3xf64> {gradcheck.values = dense<[1.0, 2.0, 3.0]> : tensor<3xf64>},
                      %y: tensor<3xf64> {gradcheck.values = dense<[1.0, 0.0, 5.0]> : tensor<3xf64>}) -> tensor<3xf64> attributes {gradcheck.print} {
  %0 = cleave.binary max %x, %y : tensor<3xf64>
  return %0 : tensor<3xf64>
}
// CHECK: GRAD f_min_ties #0: 0.5 0 1
// CHECK: GRAD f_min_ties #1: 0.5 1 0
func.func @f_min_ties(%x: tensor<3xf64> {gradcheck.values = dense<[1.0, 2.0, 3.0]> : tensor<3xf64>},
                      %y: tensor<3xf64> {gradcheck.values = dense<[1.0, 0.0, 5.0]> : tensor<3xf64>}) -> tensor<3xf64> attributes {gradcheck.print} {
  %0 = cleave.binary min %x, %y : tensor<3xf64>
  return %0 : tensor<3xf64>
}

// ONNX Relu (x <= 0 ? 0 : x): 0 at x = 0, as torch.relu.
// CHECK: GRAD f_relu #0: 0 0 1
func.func @f_relu(%x: tensor<3xf64> {gradcheck.values = dense<[-1.0, 0.0, 2.0]> : tensor<3xf64>}) -> tensor<3xf64> attributes {gradcheck.print} {
  %z = cleave.constant dense<0.0> : tensor<3xf64>
  %c = cleave.compare le %x, %z : tensor<3xf64> -> tensor<3xi1>
  %0 = cleave.select %c, %z, %x : tensor<3xi1>, tensor<3xf64>
  return %0 : tensor<3xf64>
}

// ONNX Clip (x < lo ? lo : x, then > hi): the bounds pass the gradient, as
// torch.clamp.
// CHECK: GRAD f_clip #0: 0 1 1 1 0
func.func @f_clip(%x: tensor<5xf64> {gradcheck.values = dense<[-2.0, -1.0, 0.0, 1.0, 2.0]> : tensor<5xf64>}) -> tensor<5xf64> attributes {gradcheck.print} {
  %lo = cleave.constant dense<-1.0> : tensor<5xf64>
  %hi = cleave.constant dense<1.0> : tensor<5xf64>
  %c0 = cleave.compare lt %x, %lo : tensor<5xf64> -> tensor<5xi1>
  %t = cleave.select %c0, %lo, %x : tensor<5xi1>, tensor<5xf64>
  %c1 = cleave.compare gt %t, %hi : tensor<5xf64> -> tensor<5xi1>
  %0 = cleave.select %c1, %hi, %t : tensor<5xi1>, tensor<5xf64>
  return %0 : tensor<5xf64>
}

// reduce max splits among ties (torch.amax).
// CHECK: GRAD f_reduce_max_ties #0: 0 0.5 0.5 0
func.func @f_reduce_max_ties(%x: tensor<4xf64> {gradcheck.values = dense<[1.0, 3.0, 3.0, 2.0]> : tensor<4xf64>}) -> tensor<f64> attributes {gradcheck.print} {
  %0 = cleave.reduce max %x dims = [0] : tensor<4xf64> -> tensor<f64>
  return %0 : tensor<f64>
}

// Max pooling routes to the first maximum of each window (max_pool2d).
// CHECK: GRAD f_pool_ties #0: 1 0 0 1 1 0
func.func @f_pool_ties(%x: tensor<1x6xf64> {gradcheck.values = dense<[[3.0, 3.0, 1.0, 2.0, 0.0, 0.0]]> : tensor<1x6xf64>}) -> tensor<1x3xf64> attributes {gradcheck.print} {
  %0 = cleave.reduce_window max %x window = [1, 2] strides = [1, 2] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] : tensor<1x6xf64> -> tensor<1x3xf64>
  return %0 : tensor<1x3xf64>
}

// prod with zeros: the product of the others (torch.prod).
// CHECK: GRAD f_prod_zeros #0: 0 6 0 0 0 0
func.func @f_prod_zeros(%x: tensor<2x3xf64> {gradcheck.values = dense<[[2.0, 0.0, 3.0], [0.0, 0.0, 1.0]]> : tensor<2x3xf64>}) -> tensor<2xf64> attributes {gradcheck.print} {
  %0 = cleave.reduce prod %x dims = [1] : tensor<2x3xf64> -> tensor<2xf64>
  return %0 : tensor<2xf64>
}

// Softmax under an additive -inf mask, and a row masked entirely with
// -FLT_MAX (uniform): finite gradients, 0 at masked positions.
// CHECK: GRAD f_masked_softmax #0: -0.393224 -0 0.393224 -0.333333 0 0.333333
func.func @f_masked_softmax(%x: tensor<2x3xf64> {gradcheck.values = dense<[[0.0, 5.0, 1.0], [1.0, 2.0, 3.0]]> : tensor<2x3xf64>}) -> tensor<2x3xf64> attributes {gradcheck.print} {
  %m = cleave.constant dense<[[0.0, 0xFFF0000000000000, 0.0], [-3.4028234663852886e38, -3.4028234663852886e38, -3.4028234663852886e38]]> : tensor<2x3xf64>
  %w = cleave.constant dense<[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]> : tensor<2x3xf64>
  %a = cleave.binary add %x, %m : tensor<2x3xf64>
  %s = cleave.softmax %a dim = 1 : tensor<2x3xf64>
  %0 = cleave.binary mul %s, %w : tensor<2x3xf64>
  return %0 : tensor<2x3xf64>
}

// Hostile draws on a one-point range ([1.5, 1.5]) and on [0, 0]: every
// value is the point (no endless redraw), and the gradients print.
// HOSTILE: GRAD f_point_ranges #0: 0 0 0
// HOSTILE: GRAD f_point_ranges #1: 1.5 1.5 1.5
// HOSTILE: PRINTED f_point_ranges{{$}}
func.func @f_point_ranges(%x: tensor<3xf64> {gradcheck.hostile = [1.5, 1.5]}, %y: tensor<3xf64> {gradcheck.hostile = [0.0, 0.0]}) -> tensor<3xf64> attributes {gradcheck.print} {
  %0 = cleave.binary mul %x, %y : tensor<3xf64>
  return %0 : tensor<3xf64>
}

// log, reciprocal and div at 0: inf, as PyTorch's g / x and -g / x^2.
// CHECK: GRAD f_zero_poles #0: inf 0.5
// CHECK: GRAD f_zero_poles #1: -inf -0.25
// CHECK: PRINTED f_zero_poles{{$}}
func.func @f_zero_poles(%x: tensor<2xf64> {gradcheck.values = dense<[0.0, 2.0]> : tensor<2xf64>},
                        %y: tensor<2xf64> {gradcheck.values = dense<[0.0, 2.0]> : tensor<2xf64>}) -> (tensor<2xf64>, tensor<2xf64>) attributes {gradcheck.print} {
  %0 = cleave.unary log %x : tensor<2xf64>
  %1 = cleave.unary reciprocal %y : tensor<2xf64>
  return %0, %1 : tensor<2xf64>, tensor<2xf64>
}
