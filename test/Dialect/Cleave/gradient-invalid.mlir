// Verifier errors of cleave.gradient, the marker --cleave-expand-gradients
// expands: one case per diagnostic.
// RUN: cleave-opt %s -split-input-file -verify-diagnostics

// The loss of a gradient marker is a scalar.
func.func @gradient_loss_rank(%x: tensor<3xf32>) {
  // expected-error @+1 {{needs a 0-d loss, got 'tensor<3xf32>'}}
  %0 = cleave.gradient %x wrt(%x) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

// A marker differentiates with respect to at least one value.
func.func @gradient_no_wrt(%l: tensor<f32>) {
  // expected-error @+1 {{needs at least one value to differentiate with respect to}}
  cleave.gradient %l wrt() : (tensor<f32>) -> ()
  return
}

// -----

// One result per wrt value.
func.func @gradient_results(%l: tensor<f32>, %x: tensor<3xf32>) {
  // expected-error @+1 {{has 2 results for 1 wrt values; it needs one per wrt value}}
  %0:2 = cleave.gradient %l wrt(%x) : (tensor<f32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

// Each result has its wrt value's type.
func.func @gradient_type(%l: tensor<f32>, %x: tensor<3xf32>) {
  // expected-error @+1 {{result #0 has type 'tensor<3xf64>', not the type 'tensor<3xf32>' of wrt value #0}}
  %0 = cleave.gradient %l wrt(%x) : (tensor<f32>, tensor<3xf32>) -> tensor<3xf64>
  return
}

// -----

// The loss is computed in the marker's block.
func.func @gradient_loss_block(%x: tensor<f32>) {
  %l = cleave.unary exp %x : tensor<f32>
  %0 = scf.execute_region -> tensor<f32> {
    // expected-error @+1 {{needs its loss in its own block}}
    %g = cleave.gradient %l wrt(%x) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    scf.yield %g : tensor<f32>
  }
  return
}

// -----

// So are the values it differentiates with respect to.
func.func @gradient_wrt_block(%x: tensor<f32>) {
  %0 = scf.execute_region -> tensor<f32> {
    %l = cleave.unary exp %x : tensor<f32>
    // expected-error @+1 {{needs wrt value #0 in its own block}}
    %g = cleave.gradient %l wrt(%x) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    scf.yield %g : tensor<f32>
  }
  return
}
