// RUN: cleave-opt %s --split-input-file --cleave-recognize-composites=rotary=true | FileCheck %s
// RUN: cleave-opt %s --split-input-file --cleave-recognize-composites | FileCheck %s --check-prefix=OFF

// Rotary position embeddings as PyTorch's apply_rotary_pos_emb exports
// them (x * cos + rotate_half(x) * sin, rotate_half by Slice, Neg and
// Concat) become cleave.rotary when cos and sin repeat their first half,
// so that the op's R = D/2 angles give every element bitwise the same.

// -----

// Llama's and Qwen2's default exports: cos and sin folded into constants
// 1 x 1 x S x D; the op reads their first halves, 1 x S x D/2.
// CHECK-LABEL: func.func @rotary_constant
// CHECK-DAG: %[[C:.*]] = cleave.slice %{{.*}} start = [0, 0, 0, 0] limit = [1, 1, 3, 2] strides = [1, 1, 1, 1] : tensor<1x1x3x4xf32> -> tensor<1x1x3x2xf32>
// CHECK-DAG: %[[CR:.*]] = cleave.reshape %[[C]] : tensor<1x1x3x2xf32> -> tensor<1x3x2xf32>
// CHECK: %[[Y:.*]] = cleave.rotary %arg0, %[[CR]], %{{.*}} : (tensor<2x4x3x4xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> tensor<2x4x3x4xf32>
// CHECK-NOT: cleave.concat
// CHECK: return %[[Y]]
// OFF-LABEL: func.func @rotary_constant
// OFF-NOT: cleave.rotary
func.func @rotary_constant(%x: tensor<2x4x3x4xf32>) -> tensor<2x4x3x4xf32> {
  %cos = cleave.constant {cleave.initializer = "unsqueeze_14", cleave.initializer_kind = #cleave.initializer_kind<constant>} dense<[[[[1.0, 0.5, 1.0, 0.5], [0.25, -0.75, 0.25, -0.75], [-1.0, 0.125, -1.0, 0.125]]]]> : tensor<1x1x3x4xf32>
  %sin = cleave.constant dense<[[[[0.0, 0.875, 0.0, 0.875], [0.5, -0.25, 0.5, -0.25], [-0.5, 0.375, -0.5, 0.375]]]]> : tensor<1x1x3x4xf32>
  %cb = cleave.broadcast_in_dim %cos dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %sb = cleave.broadcast_in_dim %sin dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %xc = cleave.binary mul %x, %cb : tensor<2x4x3x4xf32>
  %lo = cleave.slice %x start = [0, 0, 0, 0] limit = [2, 4, 3, 2] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %hi = cleave.slice %x start = [0, 0, 0, 2] limit = [2, 4, 3, 4] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %n = cleave.unary neg %hi : tensor<2x4x3x2xf32>
  %r = cleave.concat %n, %lo dim = 3 : (tensor<2x4x3x2xf32>, tensor<2x4x3x2xf32>) -> tensor<2x4x3x4xf32>
  %rs = cleave.binary mul %r, %sb : tensor<2x4x3x4xf32>
  %y = cleave.binary add %xc, %rs : tensor<2x4x3x4xf32>
  return %y : tensor<2x4x3x4xf32>
}

// -----

// Near miss: rotate_half with its halves swapped (cat(-x1, x2)): left as it is.
// CHECK-LABEL: func.func @rotary_swapped_halves
// CHECK-NOT: cleave.rotary
// CHECK: cleave.concat
func.func @rotary_swapped_halves(%x: tensor<2x4x3x4xf32>) -> tensor<2x4x3x4xf32> {
  %cos = cleave.constant {cleave.initializer = "unsqueeze_14", cleave.initializer_kind = #cleave.initializer_kind<constant>} dense<[[[[1.0, 0.5, 1.0, 0.5], [0.25, -0.75, 0.25, -0.75], [-1.0, 0.125, -1.0, 0.125]]]]> : tensor<1x1x3x4xf32>
  %sin = cleave.constant dense<[[[[0.0, 0.875, 0.0, 0.875], [0.5, -0.25, 0.5, -0.25], [-0.5, 0.375, -0.5, 0.375]]]]> : tensor<1x1x3x4xf32>
  %cb = cleave.broadcast_in_dim %cos dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %sb = cleave.broadcast_in_dim %sin dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %xc = cleave.binary mul %x, %cb : tensor<2x4x3x4xf32>
  %lo = cleave.slice %x start = [0, 0, 0, 0] limit = [2, 4, 3, 2] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %hi = cleave.slice %x start = [0, 0, 0, 2] limit = [2, 4, 3, 4] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %n = cleave.unary neg %lo : tensor<2x4x3x2xf32>
  %r = cleave.concat %n, %hi dim = 3 : (tensor<2x4x3x2xf32>, tensor<2x4x3x2xf32>) -> tensor<2x4x3x4xf32>
  %rs = cleave.binary mul %r, %sb : tensor<2x4x3x4xf32>
  %y = cleave.binary add %xc, %rs : tensor<2x4x3x4xf32>
  return %y : tensor<2x4x3x4xf32>
}

// -----

// Near miss: the last sin of the second half differs from the first's: the
// op's D/2 angles cannot give it; left as it is.
// CHECK-LABEL: func.func @rotary_halves_differ
// CHECK-NOT: cleave.rotary
// CHECK: cleave.concat
func.func @rotary_halves_differ(%x: tensor<2x4x3x4xf32>) -> tensor<2x4x3x4xf32> {
  %cos = cleave.constant {cleave.initializer = "unsqueeze_14", cleave.initializer_kind = #cleave.initializer_kind<constant>} dense<[[[[1.0, 0.5, 1.0, 0.5], [0.25, -0.75, 0.25, -0.75], [-1.0, 0.125, -1.0, 0.125]]]]> : tensor<1x1x3x4xf32>
  %sin = cleave.constant dense<[[[[0.0, 0.875, 0.0, 0.875], [0.5, -0.25, 0.5, -0.25], [-0.5, 0.375, -0.5, 0.5]]]]> : tensor<1x1x3x4xf32>
  %cb = cleave.broadcast_in_dim %cos dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %sb = cleave.broadcast_in_dim %sin dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %xc = cleave.binary mul %x, %cb : tensor<2x4x3x4xf32>
  %lo = cleave.slice %x start = [0, 0, 0, 0] limit = [2, 4, 3, 2] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %hi = cleave.slice %x start = [0, 0, 0, 2] limit = [2, 4, 3, 4] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %n = cleave.unary neg %hi : tensor<2x4x3x2xf32>
  %r = cleave.concat %n, %lo dim = 3 : (tensor<2x4x3x2xf32>, tensor<2x4x3x2xf32>) -> tensor<2x4x3x4xf32>
  %rs = cleave.binary mul %r, %sb : tensor<2x4x3x4xf32>
  %y = cleave.binary add %xc, %rs : tensor<2x4x3x4xf32>
  return %y : tensor<2x4x3x4xf32>
}

// -----

// The unoptimized export: the angles computed from the positions,
// cos(cat(freqs, freqs)) times the attention scaling, and sin alike.
// CHECK-LABEL: func.func @rotary_computed
// CHECK: cleave.rotary %arg0, %{{.*}}, %{{.*}} : (tensor<2x4x3x4xf32>, tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> tensor<2x4x3x4xf32>
func.func @rotary_computed(%x: tensor<2x4x3x4xf32>, %f: tensor<1x1x3x2xf32>) -> tensor<2x4x3x4xf32> {
  %ff = cleave.concat %f, %f dim = 3 : (tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>) -> tensor<1x1x3x4xf32>
  %cos0 = cleave.unary cos %ff : tensor<1x1x3x4xf32>
  %one = cleave.constant dense<1.0> : tensor<f32>
  %oneb = cleave.broadcast_in_dim %one dims = [] : tensor<f32> -> tensor<1x1x3x4xf32>
  %cos = cleave.binary mul %cos0, %oneb : tensor<1x1x3x4xf32>
  %sin = cleave.unary sin %ff : tensor<1x1x3x4xf32>
  %cb = cleave.broadcast_in_dim %cos dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %sb = cleave.broadcast_in_dim %sin dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %xc = cleave.binary mul %x, %cb : tensor<2x4x3x4xf32>
  %lo = cleave.slice %x start = [0, 0, 0, 0] limit = [2, 4, 3, 2] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %hi = cleave.slice %x start = [0, 0, 0, 2] limit = [2, 4, 3, 4] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %n = cleave.unary neg %hi : tensor<2x4x3x2xf32>
  %r = cleave.concat %n, %lo dim = 3 : (tensor<2x4x3x2xf32>, tensor<2x4x3x2xf32>) -> tensor<2x4x3x4xf32>
  %rs = cleave.binary mul %r, %sb : tensor<2x4x3x4xf32>
  %y = cleave.binary add %xc, %rs : tensor<2x4x3x4xf32>
  return %y : tensor<2x4x3x4xf32>
}

// -----

// Near miss: cat(freqs, other): the halves may differ; left as it is.
// CHECK-LABEL: func.func @rotary_computed_differ
// CHECK-NOT: cleave.rotary
func.func @rotary_computed_differ(%x: tensor<2x4x3x4xf32>, %f: tensor<1x1x3x2xf32>, %g: tensor<1x1x3x2xf32>) -> tensor<2x4x3x4xf32> {
  %ff = cleave.concat %f, %g dim = 3 : (tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>) -> tensor<1x1x3x4xf32>
  %cos0 = cleave.unary cos %ff : tensor<1x1x3x4xf32>
  %one = cleave.constant dense<1.0> : tensor<f32>
  %oneb = cleave.broadcast_in_dim %one dims = [] : tensor<f32> -> tensor<1x1x3x4xf32>
  %cos = cleave.binary mul %cos0, %oneb : tensor<1x1x3x4xf32>
  %sin = cleave.unary sin %ff : tensor<1x1x3x4xf32>
  %cb = cleave.broadcast_in_dim %cos dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %sb = cleave.broadcast_in_dim %sin dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %xc = cleave.binary mul %x, %cb : tensor<2x4x3x4xf32>
  %lo = cleave.slice %x start = [0, 0, 0, 0] limit = [2, 4, 3, 2] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %hi = cleave.slice %x start = [0, 0, 0, 2] limit = [2, 4, 3, 4] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %n = cleave.unary neg %hi : tensor<2x4x3x2xf32>
  %r = cleave.concat %n, %lo dim = 3 : (tensor<2x4x3x2xf32>, tensor<2x4x3x2xf32>) -> tensor<2x4x3x4xf32>
  %rs = cleave.binary mul %r, %sb : tensor<2x4x3x4xf32>
  %y = cleave.binary add %xc, %rs : tensor<2x4x3x4xf32>
  return %y : tensor<2x4x3x4xf32>
}

// -----

// Near miss: the angles computed from a trained initializer (learned
// frequencies): the op would give them its half's gradient only; left as
// it is.
// CHECK-LABEL: func.func @rotary_trained_freqs
// CHECK-NOT: cleave.rotary
func.func @rotary_trained_freqs(%x: tensor<2x4x3x4xf32>) -> tensor<2x4x3x4xf32> {
  %f = cleave.constant {cleave.initializer = "freqs", cleave.initializer_kind = #cleave.initializer_kind<parameter>} dense<[[[[0.5, 0.25], [1.0, 0.5], [1.5, 0.75]]]]> : tensor<1x1x3x2xf32>
  %ff = cleave.concat %f, %f dim = 3 : (tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>) -> tensor<1x1x3x4xf32>
  %cos = cleave.unary cos %ff : tensor<1x1x3x4xf32>
  %sin = cleave.unary sin %ff : tensor<1x1x3x4xf32>
  %cb = cleave.broadcast_in_dim %cos dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %sb = cleave.broadcast_in_dim %sin dims = [0, 1, 2, 3] : tensor<1x1x3x4xf32> -> tensor<2x4x3x4xf32>
  %xc = cleave.binary mul %x, %cb : tensor<2x4x3x4xf32>
  %lo = cleave.slice %x start = [0, 0, 0, 0] limit = [2, 4, 3, 2] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %hi = cleave.slice %x start = [0, 0, 0, 2] limit = [2, 4, 3, 4] strides = [1, 1, 1, 1] : tensor<2x4x3x4xf32> -> tensor<2x4x3x2xf32>
  %n = cleave.unary neg %hi : tensor<2x4x3x2xf32>
  %r = cleave.concat %n, %lo dim = 3 : (tensor<2x4x3x2xf32>, tensor<2x4x3x2xf32>) -> tensor<2x4x3x4xf32>
  %rs = cleave.binary mul %r, %sb : tensor<2x4x3x4xf32>
  %y = cleave.binary add %xc, %rs : tensor<2x4x3x4xf32>
  return %y : tensor<2x4x3x4xf32>
}
