// The vector-Jacobian form of buildGradients (--vjp): the gradients come
// from a function's results with the weights R_i as their cotangents, the
// way a pipeline stage differentiates from the gradients it receives for
// the activations it sent, and finite differences of L = sum_i <f_i, R_i>
// check them. Results that depend on each other, that share inputs, that
// are an argument itself, or that do not depend on an argument.
// RUN: cleave-gradcheck %s --vjp | FileCheck %s
// RUN: cleave-gradcheck %s | FileCheck %s

// A two-layer block whose stage boundary is its hidden activation and its
// output: both are sent on, both get a cotangent.
// CHECK: PASS f_stage max rel err
func.func @f_stage(%x: tensor<4x3xf64>, %w1: tensor<3x5xf64>, %w2: tensor<5x2xf64>) -> (tensor<4x5xf64>, tensor<4x2xf64>) {
  %h = cleave.contract %x, %w1 batch = [] x [] contract = [1] x [0] : tensor<4x3xf64>, tensor<3x5xf64> -> tensor<4x5xf64>
  %a = cleave.unary tanh %h : tensor<4x5xf64>
  %y = cleave.contract %a, %w2 batch = [] x [] contract = [1] x [0] : tensor<4x5xf64>, tensor<5x2xf64> -> tensor<4x2xf64>
  return %a, %y : tensor<4x5xf64>, tensor<4x2xf64>
}

// An output that is an argument (a skip connection across a stage cut),
// and one that reads it.
// CHECK: PASS f_skip max rel err
func.func @f_skip(%x: tensor<6xf64>, %w: tensor<6xf64>) -> (tensor<6xf64>, tensor<6xf64>) {
  %0 = cleave.binary mul %x, %w : tensor<6xf64>
  %1 = cleave.unary exp %0 : tensor<6xf64>
  return %x, %1 : tensor<6xf64>, tensor<6xf64>
}

// An output that does not depend on the second argument (its gradient is
// zero), and an output defined before another.
// CHECK: PASS f_partial max rel err
func.func @f_partial(%x: tensor<2x3xf64>, %z: tensor<2x3xf64>) -> (tensor<2x3xf64>, tensor<2x3xf64>) {
  %0 = cleave.unary sin %x : tensor<2x3xf64>
  %1 = cleave.binary mul %0, %0 : tensor<2x3xf64>
  return %1, %0 : tensor<2x3xf64>, tensor<2x3xf64>
}
