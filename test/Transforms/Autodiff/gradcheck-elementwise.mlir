// Checks the VJP rules of the elementwise ops against finite differences:
// every unary and binary kind, select, and fan-out of a value.
// RUN: cleave-gradcheck %s | FileCheck %s
// RUN: cleave-gradcheck %s --hostile --rtol 1e-4 | FileCheck %s

// CHECK: PASS f_neg max rel err
func.func @f_neg(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary neg %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_abs max rel err
func.func @f_abs(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary abs %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_exp max rel err
func.func @f_exp(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.hostile = [-50.0, 50.0]} {
  %0 = cleave.unary exp %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_log max rel err
func.func @f_log(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [0.5, 2.0], gradcheck.hostile = [1.0e-3, 1.0e4]} {
  %0 = cleave.unary log %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_sqrt max rel err
func.func @f_sqrt(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [0.5, 2.0], gradcheck.hostile = [0.0, 1.0e4]} {
  %0 = cleave.unary sqrt %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_rsqrt max rel err
func.func @f_rsqrt(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [0.5, 2.0], gradcheck.hostile = [1.0e-3, 1.0e4]} {
  %0 = cleave.unary rsqrt %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_tanh max rel err
func.func @f_tanh(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary tanh %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_sigmoid max rel err
func.func @f_sigmoid(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary sigmoid %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_silu max rel err
func.func @f_silu(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.hostile = [-50.0, 50.0]} {
  %0 = cleave.unary silu %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_erf max rel err
func.func @f_erf(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary erf %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_sin max rel err
func.func @f_sin(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary sin %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_cos max rel err
func.func @f_cos(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary cos %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_tan max rel err
func.func @f_tan(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary tan %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_asin max rel err
func.func @f_asin(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [-0.8, 0.8], gradcheck.hostile = [-1.0, 1.0]} {
  %0 = cleave.unary asin %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_acos max rel err
func.func @f_acos(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [-0.8, 0.8], gradcheck.hostile = [-1.0, 1.0]} {
  %0 = cleave.unary acos %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_atan max rel err
func.func @f_atan(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary atan %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_sinh max rel err
func.func @f_sinh(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.hostile = [-50.0, 50.0]} {
  %0 = cleave.unary sinh %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_cosh max rel err
func.func @f_cosh(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.hostile = [-50.0, 50.0]} {
  %0 = cleave.unary cosh %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_asinh max rel err
func.func @f_asinh(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary asinh %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_acosh max rel err
func.func @f_acosh(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [1.5, 3.0], gradcheck.hostile = [1.0, 1.0e4]} {
  %0 = cleave.unary acosh %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_atanh max rel err
func.func @f_atanh(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [-0.8, 0.8], gradcheck.hostile = [-0.999, 0.999]} {
  %0 = cleave.unary atanh %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_reciprocal max rel err
func.func @f_reciprocal(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [0.5, 2.0], gradcheck.nonzero} {
  %0 = cleave.unary reciprocal %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_floor max rel err
func.func @f_floor(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [-3.0, 3.0]} {
  %0 = cleave.unary floor %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_ceil max rel err
func.func @f_ceil(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [-3.0, 3.0]} {
  %0 = cleave.unary ceil %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_round max rel err
func.func @f_round(%x: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.range = [-3.0, 3.0]} {
  %0 = cleave.unary round %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_sign max rel err
func.func @f_sign(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.unary sign %x : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_add max rel err
func.func @f_add(%a: tensor<3x4xf64>, %b: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.binary add %a, %b : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_sub max rel err
func.func @f_sub(%a: tensor<3x4xf64>, %b: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.binary sub %a, %b : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_mul max rel err
func.func @f_mul(%a: tensor<3x4xf64>, %b: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.binary mul %a, %b : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_div max rel err
func.func @f_div(%a: tensor<3x4xf64>, %b: tensor<3x4xf64> {gradcheck.range = [0.5, 2.0], gradcheck.nonzero}) -> tensor<3x4xf64> {
  %0 = cleave.binary div %a, %b : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_pow max rel err
func.func @f_pow(%a: tensor<3x4xf64> {gradcheck.range = [0.5, 2.0], gradcheck.hostile = [1.0e-3, 100.0]}, %b: tensor<3x4xf64> {gradcheck.hostile = [-3.0, 3.0]}) -> tensor<3x4xf64> {
  %0 = cleave.binary pow %a, %b : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// Integer-valued exponents of bases of both signs (GELU's x^3, RMSNorm's
// x^2, a reciprocal square): finite gradients everywhere.
// CHECK: PASS f_pow_integer_exponents max rel err
func.func @f_pow_integer_exponents(%x: tensor<3x4xf64> {gradcheck.hostile = [-100.0, 100.0], gradcheck.nonzero}) -> (tensor<3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>) {
  %c3 = cleave.constant dense<3.0> : tensor<3x4xf64>
  %c2 = cleave.constant dense<2.0> : tensor<3x4xf64>
  %cm2 = cleave.constant dense<-2.0> : tensor<3x4xf64>
  %0 = cleave.binary pow %x, %c3 : tensor<3x4xf64>
  %1 = cleave.binary pow %x, %c2 : tensor<3x4xf64>
  %2 = cleave.binary pow %x, %cm2 : tensor<3x4xf64>
  return %0, %1, %2 : tensor<3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>
}

// CHECK: PASS f_max max rel err
func.func @f_max(%a: tensor<3x4xf64>, %b: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.binary max %a, %b : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_min max rel err
func.func @f_min(%a: tensor<3x4xf64>, %b: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %0 = cleave.binary min %a, %b : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_rem max rel err
func.func @f_rem(%a: tensor<3x4xf64> {gradcheck.range = [-3.0, 3.0]}, %b: tensor<3x4xf64> {gradcheck.range = [0.5, 2.0], gradcheck.hostile = [0.5, 100.0]}) -> tensor<3x4xf64> {
  %0 = cleave.binary rem %a, %b : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// CHECK: PASS f_mod max rel err
func.func @f_mod(%a: tensor<3x4xf64> {gradcheck.range = [-3.0, 3.0]}, %b: tensor<3x4xf64> {gradcheck.range = [-2.0, -0.5], gradcheck.hostile = [-100.0, -0.5]}) -> tensor<3x4xf64> {
  %0 = cleave.binary mod %a, %b : tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// Both branches of a select; the condition compares the two arguments.
// CHECK: PASS f_select
func.func @f_select(%a: tensor<3x4xf64>, %b: tensor<3x4xf64>) -> tensor<3x4xf64> attributes {gradcheck.hostile = [-30.0, 30.0]} {
  %c = cleave.compare lt %a, %b : tensor<3x4xf64> -> tensor<3x4xi1>
  %e = cleave.unary exp %a : tensor<3x4xf64>
  %0 = cleave.select %c, %e, %b : tensor<3x4xi1>, tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}

// A value used three times (cotangents summed) and two results.
// CHECK: PASS f_fanout_two_results
func.func @f_fanout_two_results(%x: tensor<3x4xf64>) -> (tensor<3x4xf64>, tensor<3x4xf64>) {
  %0 = cleave.binary mul %x, %x : tensor<3x4xf64>
  %1 = cleave.unary sin %x : tensor<3x4xf64>
  %2 = cleave.binary add %0, %1 : tensor<3x4xf64>
  return %2, %0 : tensor<3x4xf64>, tensor<3x4xf64>
}

// An argument the result does not depend on gets a zero gradient.
// CHECK: PASS f_unused_argument
func.func @f_unused_argument(%x: tensor<3xf64>, %y: tensor<3xf64>) -> tensor<3xf64> {
  %0 = cleave.unary cos %x : tensor<3xf64>
  return %0 : tensor<3xf64>
}

// A two-layer perceptron: contract, broadcast bias, tanh, softmax.
// CHECK: PASS f_mlp
func.func @f_mlp(%x: tensor<4x3xf64>, %w1: tensor<3x5xf64>, %b1: tensor<5xf64>, %w2: tensor<5x2xf64>) -> tensor<4x2xf64> {
  %0 = cleave.contract %x, %w1 batch = [] x [] contract = [1] x [0] : tensor<4x3xf64>, tensor<3x5xf64> -> tensor<4x5xf64>
  %1 = cleave.broadcast_in_dim %b1 dims = [1] : tensor<5xf64> -> tensor<4x5xf64>
  %2 = cleave.binary add %0, %1 : tensor<4x5xf64>
  %3 = cleave.unary tanh %2 : tensor<4x5xf64>
  %4 = cleave.contract %3, %w2 batch = [] x [] contract = [1] x [0] : tensor<4x5xf64>, tensor<5x2xf64> -> tensor<4x2xf64>
  %5 = cleave.softmax %4 dim = 1 : tensor<4x2xf64>
  return %5 : tensor<4x2xf64>
}
