// Verifier errors of the cleave dialect: one case per diagnostic.
// RUN: cleave-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// ODS type constraints
//===----------------------------------------------------------------------===//

// Softmax takes float tensors only.
func.func @softmax_integer(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %0 = cleave.softmax %x dim = 0 : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

// Log-softmax takes float tensors only.
func.func @log_softmax_integer(%x: tensor<4xui8>) -> tensor<4xui8> {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %0 = cleave.log_softmax %x dim = 0 : tensor<4xui8>
  return %0 : tensor<4xui8>
}

// -----

// The select condition must be an i1 tensor.
func.func @select_non_i1_condition(%c: tensor<4xi8>, %a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = cleave.select %c, %a, %a : tensor<4xi8>, tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Select's value operands and result share one type (ODS AllTypesMatch).
func.func @select_value_types_differ(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{failed to verify that all of {on_true, on_false, result} have same type}}
  %0 = "cleave.select"(%c, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

// Compare's operands share one type (ODS AllTypesMatch).
func.func @compare_operand_types_differ(%a: tensor<4xf32>, %b: tensor<4xi32>) {
  // expected-error @+1 {{failed to verify that all of {lhs, rhs} have same type}}
  %0 = "cleave.compare"(%a, %b) <{kind = 2 : i32}> : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xi1>
  return
}

// -----

// Compare produces an i1 tensor.
func.func @compare_non_i1_result(%a: tensor<4xf32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 1-bit signless integer values}}
  %0 = cleave.compare lt %a, %a : tensor<4xf32> -> tensor<4xi8>
  return
}

// -----

// Binary operands and result share one type (SameOperandsAndResultType).
func.func @binary_types_differ(%a: tensor<4xf32>, %b: tensor<4xf64>) {
  // expected-error @+1 {{requires the same type for all operands and results}}
  %0 = "cleave.binary"(%a, %b) <{kind = 0 : i32}> : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf32>
  return
}

// -----

// Arg-reduce produces i64 indices.
func.func @arg_reduce_non_i64_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result #0 must be ranked tensor of 64-bit signless integer values}}
  %0 = cleave.arg_reduce max %x dim = 1 : tensor<4x8xf32> -> tensor<4xi32>
  return
}

// -----

// Gather indices are integers.
func.func @gather_float_indices(%x: tensor<4x8xf32>, %i: tensor<2xf32>) {
  // expected-error @+1 {{operand #1 must be ranked tensor of integer values}}
  %0 = cleave.gather %x, %i axis = 0 : (tensor<4x8xf32>, tensor<2xf32>) -> tensor<2x8xf32>
  return
}

// -----

// Conv takes float tensors only.
func.func @conv_integer(%x: tensor<1x1x4xi32>, %w: tensor<1x1x1xi32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point values}}
  %0 = cleave.conv %x, %w strides = [1] pad_low = [0] pad_high = [0] dilations = [1] groups = 1
      : (tensor<1x1x4xi32>, tensor<1x1x1xi32>) -> tensor<1x1x4xi32>
  return
}

// -----

// Cleave ops take ranked tensors.
func.func @unranked(%x: tensor<*xf32>) {
  // expected-error @+1 {{operand #0 must be ranked tensor of floating-point or integer values}}
  %0 = "cleave.reshape"(%x) : (tensor<*xf32>) -> tensor<4xf32>
  return
}

// -----

// A constant's value has the result type.
func.func @constant_type_mismatch() {
  // expected-error @+1 {{failed to verify that all of {value, result} have same type}}
  %0 = "cleave.constant"() <{value = dense<1.0> : tensor<2xf32>}> : () -> tensor<3xf32>
  return
}

//===----------------------------------------------------------------------===//
// Constants and elementwise
//===----------------------------------------------------------------------===//

// -----

// Iota needs a static shape.
func.func @iota_dynamic() {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xi64>'}}
  %0 = cleave.iota dim = 0 : tensor<?xi64>
  return
}

// -----

// Iota's dimension must be a dimension of the result.
func.func @iota_dimension_out_of_range() {
  // expected-error @+1 {{dimension 2 is out of range for rank 2}}
  %0 = cleave.iota dim = 2 : tensor<2x3xi64>
  return
}

// -----

// Float-only unary kinds reject integers.
func.func @unary_exp_integer(%x: tensor<4xi32>) {
  // expected-error @+1 {{'exp' needs a float element type, got 'i32'}}
  %0 = cleave.unary exp %x : tensor<4xi32>
  return
}

// -----

// `not` rejects floats.
func.func @unary_not_float(%x: tensor<4xf32>) {
  // expected-error @+1 {{'not' needs an integer element type, got 'f32'}}
  %0 = cleave.unary not %x : tensor<4xf32>
  return
}

// -----

// Unary ops need static shapes.
func.func @unary_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.unary neg %x : tensor<?xf32>
  return
}

// -----

// Bitwise binary kinds reject floats.
func.func @binary_and_float(%x: tensor<4xf32>) {
  // expected-error @+1 {{'and' needs an integer element type, got 'f32'}}
  %0 = cleave.binary and %x, %x : tensor<4xf32>
  return
}

// -----

// Shifts reject floats.
func.func @binary_shr_float(%x: tensor<4xbf16>) {
  // expected-error @+1 {{'shr' needs an integer element type, got 'bf16'}}
  %0 = cleave.binary shr %x, %x : tensor<4xbf16>
  return
}

// -----

// Binary ops need static shapes.
func.func @binary_dynamic(%x: tensor<2x?xi32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<2x?xi32>'}}
  %0 = cleave.binary add %x, %x : tensor<2x?xi32>
  return
}

// -----

// Compare needs static shapes.
func.func @compare_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.compare eq %x, %x : tensor<?xf32> -> tensor<?xi1>
  return
}

// -----

// Compare's result has the operands' shape.
func.func @compare_result_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{result shape [2, 2] does not match the expected shape [4]}}
  %0 = cleave.compare eq %x, %x : tensor<4xf32> -> tensor<2x2xi1>
  return
}

// -----

// Select's condition has the result's shape.
func.func @select_condition_shape(%c: tensor<1xi1>, %a: tensor<4xf32>) {
  // expected-error @+1 {{condition shape [1] differs from result shape [4]}}
  %0 = cleave.select %c, %a, %a : tensor<1xi1>, tensor<4xf32>
  return
}

// -----

// Select needs static shapes.
func.func @select_dynamic(%c: tensor<?xi1>, %a: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xi1>'}}
  %0 = cleave.select %c, %a, %a : tensor<?xi1>, tensor<?xf32>
  return
}

// -----

// Convert needs static shapes.
func.func @convert_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.convert %x : tensor<?xf32> -> tensor<?xi32>
  return
}

// -----

// Convert keeps the shape.
func.func @convert_shape_changes(%x: tensor<4xf32>) {
  // expected-error @+1 {{result shape [2, 2] does not match the expected shape [4]}}
  %0 = cleave.convert %x : tensor<4xf32> -> tensor<2x2xi32>
  return
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

// -----

// Broadcast needs static shapes.
func.func @broadcast_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.broadcast_in_dim %x dims = [0] : tensor<?xf32> -> tensor<4x4xf32>
  return
}

// -----

// Broadcast keeps the element type.
func.func @broadcast_element_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{operand element type 'f32' differs from result element type 'f16'}}
  %0 = cleave.broadcast_in_dim %x dims = [0] : tensor<4xf32> -> tensor<4x2xf16>
  return
}

// -----

// Broadcast names one result dimension per operand dimension.
func.func @broadcast_dims_count(%x: tensor<4xf32>) {
  // expected-error @+1 {{has 2 broadcast dimensions for an operand of rank 1}}
  %0 = cleave.broadcast_in_dim %x dims = [0, 1] : tensor<4xf32> -> tensor<4x4xf32>
  return
}

// -----

// Broadcast dimensions are result dimensions.
func.func @broadcast_dim_out_of_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{broadcast dimension 2 is out of range for result rank 2}}
  %0 = cleave.broadcast_in_dim %x dims = [2] : tensor<4xf32> -> tensor<4x4xf32>
  return
}

// -----

// Broadcast dimensions are strictly increasing (no transposition).
func.func @broadcast_dims_not_increasing(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{broadcast dimensions must be strictly increasing}}
  %0 = cleave.broadcast_in_dim %x dims = [1, 0] : tensor<4x3xf32> -> tensor<3x4xf32>
  return
}

// -----

// Only size-1 operand dimensions expand.
func.func @broadcast_size_mismatch(%x: tensor<3xf32>) {
  // expected-error @+1 {{operand dimension 0 of size 3 cannot broadcast to result dimension 1 of size 4}}
  %0 = cleave.broadcast_in_dim %x dims = [1] : tensor<3xf32> -> tensor<2x4xf32>
  return
}

// -----

// Reshape needs static shapes.
func.func @reshape_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.reshape %x : tensor<?xf32> -> tensor<4xf32>
  return
}

// -----

// Reshape keeps the element type.
func.func @reshape_element_type(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand element type 'i32' differs from result element type 'i64'}}
  %0 = cleave.reshape %x : tensor<4xi32> -> tensor<2x2xi64>
  return
}

// -----

// Reshape keeps the element count.
func.func @reshape_element_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{operand has 6 elements but the result has 8}}
  %0 = cleave.reshape %x : tensor<2x3xf32> -> tensor<8xf32>
  return
}

// -----

// Transpose needs static shapes.
func.func @transpose_dynamic(%x: tensor<?x2xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?x2xf32>'}}
  %0 = cleave.transpose %x perm = [1, 0] : tensor<?x2xf32> -> tensor<2x?xf32>
  return
}

// -----

// Transpose keeps the element type.
func.func @transpose_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{operand element type 'f32' differs from result element type 'f64'}}
  %0 = cleave.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf64>
  return
}

// -----

// The permutation has one entry per operand dimension.
func.func @transpose_perm_size(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation has 3 entries for an operand of rank 2}}
  %0 = cleave.transpose %x perm = [1, 0, 2] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

// Permutation entries are operand dimensions.
func.func @transpose_perm_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{permutation dimension 2 is out of range for rank 2}}
  %0 = cleave.transpose %x perm = [2, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  return
}

// -----

// Permutation entries are distinct.
func.func @transpose_perm_repeated(%x: tensor<2x2xf32>) {
  // expected-error @+1 {{permutation dimension 0 appears twice}}
  %0 = cleave.transpose %x perm = [0, 0] : tensor<2x2xf32> -> tensor<2x2xf32>
  return
}

// -----

// The result shape is the permuted operand shape.
func.func @transpose_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [2, 3] does not match the expected shape [3, 2]}}
  %0 = cleave.transpose %x perm = [1, 0] : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

// Slice needs static shapes.
func.func @slice_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.slice %x start = [0] limit = [1] strides = [1] : tensor<?xf32> -> tensor<1xf32>
  return
}

// -----

// Slice keeps the element type.
func.func @slice_element_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{operand element type 'f32' differs from result element type 'i32'}}
  %0 = cleave.slice %x start = [0] limit = [2] strides = [1] : tensor<4xf32> -> tensor<2xi32>
  return
}

// -----

// Start, limit and strides have one entry per dimension.
func.func @slice_entries(%x: tensor<4x4xf32>) {
  // expected-error @+1 {{start, limit and strides need 2 entries each}}
  %0 = cleave.slice %x start = [0, 0] limit = [2, 2] strides = [1] : tensor<4x4xf32> -> tensor<2x2xf32>
  return
}

// -----

// Slice strides are positive.
func.func @slice_zero_stride(%x: tensor<4xf32>) {
  // expected-error @+1 {{stride 0 in dimension 0 must be at least 1}}
  %0 = cleave.slice %x start = [0] limit = [2] strides = [0] : tensor<4xf32> -> tensor<2xf32>
  return
}

// -----

// The slice stays inside the operand.
func.func @slice_past_end(%x: tensor<4xf32>) {
  // expected-error @+1 {{slice [2, 5) of dimension 0 is outside [0, 4]}}
  %0 = cleave.slice %x start = [2] limit = [5] strides = [1] : tensor<4xf32> -> tensor<3xf32>
  return
}

// -----

// Start does not exceed limit.
func.func @slice_start_after_limit(%x: tensor<4xf32>) {
  // expected-error @+1 {{slice [3, 1) of dimension 0 is outside [0, 4]}}
  %0 = cleave.slice %x start = [3] limit = [1] strides = [1] : tensor<4xf32> -> tensor<0xf32>
  return
}

// -----

// The result size is ceil((limit - start) / stride).
func.func @slice_result_shape(%x: tensor<7xf32>) {
  // expected-error @+1 {{result shape [3] does not match the expected shape [2]}}
  %0 = cleave.slice %x start = [1] limit = [7] strides = [4] : tensor<7xf32> -> tensor<3xf32>
  return
}

// -----

// Reverse needs static shapes.
func.func @reverse_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.reverse %x dims = [0] : tensor<?xf32>
  return
}

// -----

// Reverse dimensions are operand dimensions.
func.func @reverse_out_of_range(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{reverse dimension -1 is out of range for rank 2}}
  %0 = cleave.reverse %x dims = [-1] : tensor<4x2xf32>
  return
}

// -----

// Reverse dimensions are distinct.
func.func @reverse_repeated(%x: tensor<4x2xf32>) {
  // expected-error @+1 {{reverse dimension 1 appears twice}}
  %0 = cleave.reverse %x dims = [1, 1] : tensor<4x2xf32>
  return
}

// -----

// Concat needs at least one input.
func.func @concat_no_inputs() {
  // expected-error @+1 {{needs at least one input}}
  %0 = cleave.concat dim = 0 : () -> tensor<0xf32>
  return
}

// -----

// Concat needs static shapes.
func.func @concat_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.concat %x, %x dim = 0 : (tensor<?xf32>, tensor<?xf32>) -> tensor<?xf32>
  return
}

// -----

// The concat dimension is a result dimension.
func.func @concat_dimension_out_of_range(%x: tensor<2xf32>) {
  // expected-error @+1 {{dimension 1 is out of range for rank 1}}
  %0 = cleave.concat %x, %x dim = 1 : (tensor<2xf32>, tensor<2xf32>) -> tensor<4xf32>
  return
}

// -----

// Concat inputs have the result's rank.
func.func @concat_input_rank(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{input 1 has rank 1, expected 2}}
  %0 = cleave.concat %a, %b dim = 0 : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<3x3xf32>
  return
}

// -----

// Concat inputs have the result's element type.
func.func @concat_element_type(%a: tensor<2xf32>, %b: tensor<2xf16>) {
  // expected-error @+1 {{input element type 'f16' differs from result element type 'f32'}}
  %0 = cleave.concat %a, %b dim = 0 : (tensor<2xf32>, tensor<2xf16>) -> tensor<4xf32>
  return
}

// -----

// Concat inputs match the result outside the concat dimension.
func.func @concat_size_mismatch(%a: tensor<2x3xf32>, %b: tensor<1x4xf32>) {
  // expected-error @+1 {{input 1 has size 4 in dimension 1, expected 3}}
  %0 = cleave.concat %a, %b dim = 0 : (tensor<2x3xf32>, tensor<1x4xf32>) -> tensor<3x3xf32>
  return
}

// -----

// The concat dimension's size is the sum of the inputs' sizes.
func.func @concat_result_shape(%a: tensor<2x3xf32>, %b: tensor<1x3xf32>) {
  // expected-error @+1 {{result shape [4, 3] does not match the expected shape [3, 3]}}
  %0 = cleave.concat %a, %b dim = 0 : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

// Pad needs static shapes.
func.func @pad_dynamic(%x: tensor<?xf32>, %z: tensor<f32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.pad %x, %z low = [1] high = [1] mode = constant
      : (tensor<?xf32>, tensor<f32>) -> tensor<?xf32>
  return
}

// -----

// Pad keeps the operand's element type.
func.func @pad_element_type(%x: tensor<2xf32>, %z: tensor<f32>) {
  // expected-error @+1 {{operand element type 'f32' differs from result element type 'f64'}}
  %0 = cleave.pad %x, %z low = [1] high = [1] mode = constant
      : (tensor<2xf32>, tensor<f32>) -> tensor<4xf64>
  return
}

// -----

// The padding value has the result's element type.
func.func @pad_value_element_type(%x: tensor<2xf32>, %z: tensor<i32>) {
  // expected-error @+1 {{padding value element type 'i32' differs from result element type 'f32'}}
  %0 = cleave.pad %x, %z low = [1] high = [1] mode = constant
      : (tensor<2xf32>, tensor<i32>) -> tensor<4xf32>
  return
}

// -----

// The padding value is a 0-d tensor.
func.func @pad_value_rank(%x: tensor<2xf32>, %z: tensor<1xf32>) {
  // expected-error @+1 {{padding value must be a 0-d tensor}}
  %0 = cleave.pad %x, %z low = [1] high = [1] mode = constant
      : (tensor<2xf32>, tensor<1xf32>) -> tensor<4xf32>
  return
}

// -----

// Low and high have one entry per dimension.
func.func @pad_entries(%x: tensor<2x2xf32>, %z: tensor<f32>) {
  // expected-error @+1 {{low and high need 2 entries each}}
  %0 = cleave.pad %x, %z low = [1, 1] high = [1] mode = constant
      : (tensor<2x2xf32>, tensor<f32>) -> tensor<4x4xf32>
  return
}

// -----

// Pads are non-negative (negative ONNX pads become slices).
func.func @pad_negative(%x: tensor<4xf32>, %z: tensor<f32>) {
  // expected-error @+1 {{padding of dimension 0 must be non-negative}}
  %0 = cleave.pad %x, %z low = [-1] high = [0] mode = constant
      : (tensor<4xf32>, tensor<f32>) -> tensor<3xf32>
  return
}

// -----

// Reflect pads are smaller than the dimension (the edge is not repeated).
func.func @pad_reflect_too_wide(%x: tensor<2x3xf32>, %z: tensor<f32>) {
  // expected-error @+1 {{reflect padding of dimension 1 must be smaller than its size 3}}
  %0 = cleave.pad %x, %z low = [0, 0] high = [0, 3] mode = reflect
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x6xf32>
  return
}

// -----

// Edge padding needs an element to repeat.
func.func @pad_edge_empty(%x: tensor<0x3xf32>, %z: tensor<f32>) {
  // expected-error @+1 {{edge padding of empty dimension 0}}
  %0 = cleave.pad %x, %z low = [1, 0] high = [0, 0] mode = edge
      : (tensor<0x3xf32>, tensor<f32>) -> tensor<1x3xf32>
  return
}

// -----

// The result size is the operand size plus both pads.
func.func @pad_result_shape(%x: tensor<2x3xf32>, %z: tensor<f32>) {
  // expected-error @+1 {{result shape [2, 6] does not match the expected shape [2, 5]}}
  %0 = cleave.pad %x, %z low = [0, 1] high = [0, 1] mode = constant
      : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x6xf32>
  return
}

// -----

// Gather needs static shapes.
func.func @gather_dynamic(%x: tensor<4x8xf32>, %i: tensor<?xi64>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xi64>'}}
  %0 = cleave.gather %x, %i axis = 0 : (tensor<4x8xf32>, tensor<?xi64>) -> tensor<?x8xf32>
  return
}

// -----

// Gather keeps the element type.
func.func @gather_element_type(%x: tensor<4x8xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{operand element type 'f32' differs from result element type 'bf16'}}
  %0 = cleave.gather %x, %i axis = 0 : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<2x8xbf16>
  return
}

// -----

// The gather axis is an operand dimension (negative axes are resolved on import).
func.func @gather_axis_out_of_range(%x: tensor<4x8xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %0 = cleave.gather %x, %i axis = -1 : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<4x2xf32>
  return
}

// -----

// The gather result splices the indices' shape in at the axis.
func.func @gather_result_shape(%x: tensor<4x8xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+1 {{result shape [2, 3, 4] does not match the expected shape [4, 2, 3]}}
  %0 = cleave.gather %x, %i axis = 1 : (tensor<4x8xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  return
}

// -----

// GatherElements needs static shapes.
func.func @gather_elements_dynamic(%x: tensor<?x5xf32>, %i: tensor<2x1xi64>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?x5xf32>'}}
  %0 = cleave.gather_elements %x, %i axis = 1 : (tensor<?x5xf32>, tensor<2x1xi64>) -> tensor<2x1xf32>
  return
}

// -----

// GatherElements keeps the element type.
func.func @gather_elements_element_type(%x: tensor<2x5xf32>, %i: tensor<2x1xi64>) {
  // expected-error @+1 {{operand element type 'f32' differs from result element type 'i64'}}
  %0 = cleave.gather_elements %x, %i axis = 1 : (tensor<2x5xf32>, tensor<2x1xi64>) -> tensor<2x1xi64>
  return
}

// -----

// GatherElements indices have the operand's rank.
func.func @gather_elements_rank(%x: tensor<2x5xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{indices rank 1 differs from operand rank 2}}
  %0 = cleave.gather_elements %x, %i axis = 1 : (tensor<2x5xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

// The GatherElements axis is an operand dimension.
func.func @gather_elements_axis(%x: tensor<2x5xf32>, %i: tensor<2x1xi64>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = cleave.gather_elements %x, %i axis = 2 : (tensor<2x5xf32>, tensor<2x1xi64>) -> tensor<2x1xf32>
  return
}

// -----

// The GatherElements result has the indices' shape.
func.func @gather_elements_result_shape(%x: tensor<2x5xf32>, %i: tensor<2x1xi64>) {
  // expected-error @+1 {{result shape [2, 5] does not match the expected shape [2, 1]}}
  %0 = cleave.gather_elements %x, %i axis = 1 : (tensor<2x5xf32>, tensor<2x1xi64>) -> tensor<2x5xf32>
  return
}

//===----------------------------------------------------------------------===//
// Contractions and reductions
//===----------------------------------------------------------------------===//

// -----

// Contract needs static shapes.
func.func @contract_dynamic(%a: tensor<?x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?x4xf32>'}}
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [0]
      : tensor<?x4xf32>, tensor<4x5xf32> -> tensor<?x5xf32>
  return
}

// -----

// Contract operands share an element type.
func.func @contract_operand_element_types(%a: tensor<3x4xf32>, %b: tensor<4x5xbf16>) {
  // expected-error @+1 {{lhs element type 'f32' differs from rhs element type 'bf16'}}
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [0]
      : tensor<3x4xf32>, tensor<4x5xbf16> -> tensor<3x5xf32>
  return
}

// -----

// Contract keeps the operands' element type; only bf16/f16 may widen to f32.
func.func @contract_result_element_type(%a: tensor<3x4xbf16>, %b: tensor<4x5xbf16>) {
  // expected-error @+1 {{result element type 'f16' must be the operand element type 'bf16' or f32}}
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [0]
      : tensor<3x4xbf16>, tensor<4x5xbf16> -> tensor<3x5xf16>
  return
}

// -----

func.func @contract_result_element_type_f32(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{result element type 'f64' must be the operand element type 'f32'}}
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [0]
      : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf64>
  return
}

// -----

// Batch dimensions come in pairs.
func.func @contract_batch_count(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) {
  // expected-error @+1 {{lhs has 1 batch dimensions, rhs 0}}
  %0 = cleave.contract %a, %b batch = [0] x [] contract = [2] x [1]
      : tensor<2x3x4xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xf32>
  return
}

// -----

// Contracting dimensions come in pairs.
func.func @contract_contracting_count(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{lhs has 1 contracting dimensions, rhs 2}}
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [0, 1]
      : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3xf32>
  return
}

// -----

// Lhs batch and contracting dimensions are lhs dimensions.
func.func @contract_lhs_out_of_range(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{lhs batch/contracting dimension 2 is out of range for rank 2}}
  %0 = cleave.contract %a, %b batch = [] x [] contract = [2] x [0]
      : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  return
}

// -----

// A lhs dimension is not both batch and contracting.
func.func @contract_lhs_repeated(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) {
  // expected-error @+1 {{lhs batch/contracting dimension 0 appears twice}}
  %0 = cleave.contract %a, %b batch = [0] x [0] contract = [0] x [1]
      : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return
}

// -----

// Rhs batch and contracting dimensions are rhs dimensions.
func.func @contract_rhs_out_of_range(%a: tensor<3x4xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{rhs batch/contracting dimension 3 is out of range for rank 2}}
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [3]
      : tensor<3x4xf32>, tensor<4x5xf32> -> tensor<3x5xf32>
  return
}

// -----

// Paired dimensions have equal sizes.
func.func @contract_size_mismatch(%a: tensor<3x4xf32>, %b: tensor<5x6xf32>) {
  // expected-error @+1 {{lhs dimension 1 (size 4) is paired with rhs dimension 0 (size 5)}}
  %0 = cleave.contract %a, %b batch = [] x [] contract = [1] x [0]
      : tensor<3x4xf32>, tensor<5x6xf32> -> tensor<3x6xf32>
  return
}

// -----

// The result is batch, then free lhs, then free rhs dimensions.
func.func @contract_result_shape(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) {
  // expected-error @+1 {{result shape [3, 2, 5] does not match the expected shape [2, 3, 5]}}
  %0 = cleave.contract %a, %b batch = [0] x [0] contract = [2] x [1]
      : tensor<2x3x4xf32>, tensor<2x4x5xf32> -> tensor<3x2x5xf32>
  return
}

// -----

// Reduce needs static shapes.
func.func @reduce_dynamic(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?x8xf32>'}}
  %0 = cleave.reduce sum %x dims = [1] : tensor<?x8xf32> -> tensor<?xf32>
  return
}

// -----

// Reduce keeps the element type.
func.func @reduce_element_type(%x: tensor<4x8xf16>) {
  // expected-error @+1 {{operand element type 'f16' differs from result element type 'f32'}}
  %0 = cleave.reduce sum %x dims = [1] : tensor<4x8xf16> -> tensor<4xf32>
  return
}

// -----

// Reduction dimensions are operand dimensions.
func.func @reduce_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{reduction dimension 2 is out of range for rank 2}}
  %0 = cleave.reduce sum %x dims = [2] : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

// Reduction dimensions are distinct.
func.func @reduce_repeated(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{reduction dimension 1 appears twice}}
  %0 = cleave.reduce max %x dims = [1, 1] : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// Reduced dimensions are dropped from the result.
func.func @reduce_result_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result shape [4, 1] does not match the expected shape [4]}}
  %0 = cleave.reduce sum %x dims = [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  return
}

// -----

// Arg-reduce is ArgMax or ArgMin only.
func.func @arg_reduce_sum(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{kind must be 'max' or 'min'}}
  %0 = cleave.arg_reduce sum %x dim = 1 : tensor<4x8xf32> -> tensor<4xi64>
  return
}

// -----

// Arg-reduce needs static shapes.
func.func @arg_reduce_dynamic(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?x8xf32>'}}
  %0 = cleave.arg_reduce max %x dim = 1 : tensor<?x8xf32> -> tensor<?xi64>
  return
}

// -----

// The arg-reduce dimension is an operand dimension.
func.func @arg_reduce_dimension(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dimension 2 is out of range for rank 2}}
  %0 = cleave.arg_reduce min %x dim = 2 last : tensor<4x8xf32> -> tensor<4x8xi64>
  return
}

// -----

// Arg-reduce drops its dimension from the result.
func.func @arg_reduce_result_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{result shape [8] does not match the expected shape [4]}}
  %0 = cleave.arg_reduce max %x dim = 1 : tensor<4x8xf32> -> tensor<8xi64>
  return
}

// -----

// Cumsum needs static shapes.
func.func @cumsum_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.cumsum %x dim = 0 : tensor<?xf32>
  return
}

// -----

// The cumsum dimension is an operand dimension.
func.func @cumsum_dimension(%x: tensor<5xi32>) {
  // expected-error @+1 {{dimension 1 is out of range for rank 1}}
  %0 = cleave.cumsum %x dim = 1 exclusive : tensor<5xi32>
  return
}

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

// -----

// Softmax needs static shapes.
func.func @softmax_dynamic(%x: tensor<?x8xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?x8xf32>'}}
  %0 = cleave.softmax %x dim = 1 : tensor<?x8xf32>
  return
}

// -----

// The softmax dimension is an operand dimension.
func.func @softmax_dimension(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dimension -1 is out of range for rank 2}}
  %0 = cleave.softmax %x dim = -1 : tensor<4x8xf32>
  return
}

// -----

// Log-softmax needs static shapes.
func.func @log_softmax_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.log_softmax %x dim = 0 : tensor<?xf32>
  return
}

// -----

// The log-softmax dimension is an operand dimension.
func.func @log_softmax_dimension(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{dimension 2 is out of range for rank 2}}
  %0 = cleave.log_softmax %x dim = 2 : tensor<4x8xf32>
  return
}

// -----

// Layer norm needs static shapes.
func.func @layer_norm_dynamic(%x: tensor<?x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?x8xf32>'}}
  %0 = cleave.layer_norm %x, %g, %g axis = 1 epsilon = 1.0e-05
      : (tensor<?x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<?x8xf32>
  return
}

// -----

// Layer norm keeps the operand type.
func.func @layer_norm_result_type(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{result type 'tensor<4x8xf16>' differs from operand type 'tensor<4x8xf32>'}}
  %0 = cleave.layer_norm %x, %g, %g axis = 1 epsilon = 1.0e-05
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf16>
  return
}

// -----

// The layer norm axis is an operand dimension.
func.func @layer_norm_axis(%x: tensor<4x8xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = cleave.layer_norm %x, %g, %g axis = 2 epsilon = 1.0e-05
      : (tensor<4x8xf32>, tensor<f32>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// -----

// Scale has the result's element type.
func.func @layer_norm_scale_element_type(%x: tensor<4x8xf32>, %g: tensor<8xbf16>, %b: tensor<8xf32>) {
  // expected-error @+1 {{scale element type 'bf16' differs from result element type 'f32'}}
  %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05
      : (tensor<4x8xf32>, tensor<8xbf16>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Scale has the normalized shape.
func.func @layer_norm_scale_shape(%x: tensor<2x4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{scale shape [8] differs from the normalized shape [4, 8]}}
  %0 = cleave.layer_norm %x, %g, %g axis = 1 epsilon = 1.0e-05
      : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// Bias has the result's element type.
func.func @layer_norm_bias_element_type(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf64>) {
  // expected-error @+1 {{bias element type 'f64' differs from result element type 'f32'}}
  %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf64>) -> tensor<4x8xf32>
  return
}

// -----

// Bias has the normalized shape.
func.func @layer_norm_bias_shape(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{bias shape [4, 8] differs from the normalized shape [8]}}
  %0 = cleave.layer_norm %x, %g, %b axis = 1 epsilon = 1.0e-05
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// Epsilon is non-negative.
func.func @layer_norm_negative_epsilon(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be non-negative}}
  %0 = cleave.layer_norm %x, %g, %g axis = 1 epsilon = -1.0e-05
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

//===----------------------------------------------------------------------===//
// Convolution and windowed reduction
//===----------------------------------------------------------------------===//

// -----

// Conv needs static shapes.
func.func @conv_dynamic(%x: tensor<?x3x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?x3x8xf32>'}}
  %0 = cleave.conv %x, %w strides = [1] pad_low = [0] pad_high = [0] dilations = [1] groups = 1
      : (tensor<?x3x8xf32>, tensor<4x3x3xf32>) -> tensor<?x4x6xf32>
  return
}

// -----

// Input and filter share an element type.
func.func @conv_filter_element_type(%x: tensor<1x3x8xf32>, %w: tensor<4x3x3xf16>) {
  // expected-error @+1 {{input element type 'f32' differs from filter element type 'f16'}}
  %0 = cleave.conv %x, %w strides = [1] pad_low = [0] pad_high = [0] dilations = [1] groups = 1
      : (tensor<1x3x8xf32>, tensor<4x3x3xf16>) -> tensor<1x4x6xf32>
  return
}

// -----

// Conv keeps the input's element type.
func.func @conv_result_element_type(%x: tensor<1x3x8xf16>, %w: tensor<4x3x3xf16>) {
  // expected-error @+1 {{input element type 'f16' differs from result element type 'f32'}}
  %0 = cleave.conv %x, %w strides = [1] pad_low = [0] pad_high = [0] dilations = [1] groups = 1
      : (tensor<1x3x8xf16>, tensor<4x3x3xf16>) -> tensor<1x4x6xf32>
  return
}

// -----

// Conv input has batch, channel and at least one spatial dimension.
func.func @conv_input_rank(%x: tensor<3x8xf32>, %w: tensor<4x3xf32>) {
  // expected-error @+1 {{input must have rank >= 3 (N x C x spatial...)}}
  %0 = cleave.conv %x, %w strides = [] pad_low = [] pad_high = [] dilations = [] groups = 1
      : (tensor<3x8xf32>, tensor<4x3xf32>) -> tensor<3x4xf32>
  return
}

// -----

// Filter and input have the same rank.
func.func @conv_filter_rank(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+1 {{filter rank 3 differs from input rank 4}}
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] groups = 1
      : (tensor<1x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// Strides have one entry per spatial dimension.
func.func @conv_strides_entries(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{strides needs 2 entries, got 1}}
  %0 = cleave.conv %x, %w strides = [1] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] groups = 1
      : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// Low pads have one entry per spatial dimension.
func.func @conv_pad_low_entries(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{pad_low needs 2 entries, got 3}}
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [0, 0, 0] pad_high = [0, 0] dilations = [1, 1] groups = 1
      : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// High pads have one entry per spatial dimension.
func.func @conv_pad_high_entries(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{pad_high needs 2 entries, got 0}}
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [0, 0] pad_high = [] dilations = [1, 1] groups = 1
      : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// Dilations have one entry per spatial dimension.
func.func @conv_dilations_entries(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{dilations needs 2 entries, got 1}}
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [0, 0] pad_high = [0, 0] dilations = [1] groups = 1
      : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// Groups is positive.
func.func @conv_zero_groups(%x: tensor<1x4x8xf32>, %w: tensor<4x4x3xf32>) {
  // expected-error @+1 {{groups 0 must divide the input channels 4 and the output channels 4}}
  %0 = cleave.conv %x, %w strides = [1] pad_low = [0] pad_high = [0] dilations = [1] groups = 0
      : (tensor<1x4x8xf32>, tensor<4x4x3xf32>) -> tensor<1x4x6xf32>
  return
}

// -----

// Groups divides the output channels.
func.func @conv_groups_output_channels(%x: tensor<1x4x8xf32>, %w: tensor<3x2x3xf32>) {
  // expected-error @+1 {{groups 2 must divide the input channels 4 and the output channels 3}}
  %0 = cleave.conv %x, %w strides = [1] pad_low = [0] pad_high = [0] dilations = [1] groups = 2
      : (tensor<1x4x8xf32>, tensor<3x2x3xf32>) -> tensor<1x3x6xf32>
  return
}

// -----

// The filter has input-channels / groups channels.
func.func @conv_filter_channels(%x: tensor<1x4x8xf32>, %w: tensor<6x4x3xf32>) {
  // expected-error @+1 {{filter has 4 input channels per group, expected 2}}
  %0 = cleave.conv %x, %w strides = [1] pad_low = [0] pad_high = [0] dilations = [1] groups = 2
      : (tensor<1x4x8xf32>, tensor<6x4x3xf32>) -> tensor<1x6x6xf32>
  return
}

// -----

// Conv strides are positive.
func.func @conv_zero_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{strides and dilations must be >= 1 and pads >= 0 in spatial dimension 1}}
  %0 = cleave.conv %x, %w strides = [1, 0] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] groups = 1
      : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

// Conv pads are non-negative.
func.func @conv_negative_pad(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{strides and dilations must be >= 1 and pads >= 0 in spatial dimension 0}}
  %0 = cleave.conv %x, %w strides = [1, 1] pad_low = [-1, 0] pad_high = [0, 0] dilations = [1, 1] groups = 1
      : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x5x6xf32>
  return
}

// -----

// The conv result size follows the padded, dilated, strided window.
func.func @conv_result_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{result shape [1, 4, 8, 8] does not match the expected shape [1, 4, 3, 3]}}
  %0 = cleave.conv %x, %w strides = [2, 2] pad_low = [0, 0] pad_high = [0, 0] dilations = [1, 1] groups = 1
      : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// Reduce-window needs static shapes.
func.func @reduce_window_dynamic(%x: tensor<?xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?xf32>'}}
  %0 = cleave.reduce_window max %x window = [2] strides = [2] pad_low = [0] pad_high = [0]
      dilations = [1] : tensor<?xf32> -> tensor<?xf32>
  return
}

// -----

// Reduce-window keeps the element type.
func.func @reduce_window_element_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{operand element type 'f32' differs from result element type 'f64'}}
  %0 = cleave.reduce_window max %x window = [2] strides = [2] pad_low = [0] pad_high = [0]
      dilations = [1] : tensor<8xf32> -> tensor<4xf64>
  return
}

// -----

// The window has one entry per dimension.
func.func @reduce_window_window_entries(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{window needs 2 entries, got 1}}
  %0 = cleave.reduce_window max %x window = [2] strides = [1, 2] pad_low = [0, 0] pad_high = [0, 0]
      dilations = [1, 1] : tensor<2x8xf32> -> tensor<2x4xf32>
  return
}

// -----

// Reduce-window strides have one entry per dimension.
func.func @reduce_window_strides_entries(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{strides needs 2 entries, got 1}}
  %0 = cleave.reduce_window max %x window = [1, 2] strides = [2] pad_low = [0, 0] pad_high = [0, 0]
      dilations = [1, 1] : tensor<2x8xf32> -> tensor<2x4xf32>
  return
}

// -----

// Reduce-window low pads have one entry per dimension.
func.func @reduce_window_pad_low_entries(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{pad_low needs 2 entries, got 1}}
  %0 = cleave.reduce_window max %x window = [1, 2] strides = [1, 2] pad_low = [0] pad_high = [0, 0]
      dilations = [1, 1] : tensor<2x8xf32> -> tensor<2x4xf32>
  return
}

// -----

// Reduce-window high pads have one entry per dimension.
func.func @reduce_window_pad_high_entries(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{pad_high needs 2 entries, got 3}}
  %0 = cleave.reduce_window max %x window = [1, 2] strides = [1, 2] pad_low = [0, 0] pad_high = [0, 0, 0]
      dilations = [1, 1] : tensor<2x8xf32> -> tensor<2x4xf32>
  return
}

// -----

// Reduce-window dilations have one entry per dimension.
func.func @reduce_window_dilations_entries(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{dilations needs 2 entries, got 1}}
  %0 = cleave.reduce_window max %x window = [1, 2] strides = [1, 2] pad_low = [0, 0] pad_high = [0, 0]
      dilations = [1] : tensor<2x8xf32> -> tensor<2x4xf32>
  return
}

// -----

// Windows are non-empty.
func.func @reduce_window_zero_window(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{window, strides and dilations must be >= 1 and pads >= 0 in dimension 1}}
  %0 = cleave.reduce_window sum %x window = [1, 0] strides = [1, 2] pad_low = [0, 0] pad_high = [0, 0]
      dilations = [1, 1] : tensor<2x8xf32> -> tensor<2x4xf32>
  return
}

// -----

// Reduce-window dilations are positive.
func.func @reduce_window_zero_dilation(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{window, strides and dilations must be >= 1 and pads >= 0 in dimension 0}}
  %0 = cleave.reduce_window sum %x window = [1, 2] strides = [1, 2] pad_low = [0, 0] pad_high = [0, 0]
      dilations = [0, 1] : tensor<2x8xf32> -> tensor<2x4xf32>
  return
}

// -----

// Reduce-window pads are non-negative.
func.func @reduce_window_negative_pad(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{window, strides and dilations must be >= 1 and pads >= 0 in dimension 1}}
  %0 = cleave.reduce_window sum %x window = [1, 2] strides = [1, 2] pad_low = [0, 0] pad_high = [0, -2]
      dilations = [1, 1] : tensor<2x8xf32> -> tensor<2x3xf32>
  return
}

// -----

// The reduce-window result size follows the padded, dilated, strided window.
func.func @reduce_window_result_shape(%x: tensor<1x3x8x8xf32>) {
  // expected-error @+1 {{result shape [1, 3, 8, 8] does not match the expected shape [1, 3, 4, 4]}}
  %0 = cleave.reduce_window max %x window = [1, 1, 2, 2] strides = [1, 1, 2, 2]
      pad_low = [0, 0, 0, 0] pad_high = [0, 0, 0, 0] dilations = [1, 1, 1, 1]
      : tensor<1x3x8x8xf32> -> tensor<1x3x8x8xf32>
  return
}
// -----

// Conv filters have at least one element in every spatial dimension.
func.func @conv_empty_kernel(%x: tensor<1x1x4xf32>, %w: tensor<1x1x0xf32>) {
  // expected-error @+1 {{filter has size 0 in spatial dimension 0, expected at least 1}}
  %0 = cleave.conv %x, %w strides = [1] pad_low = [0] pad_high = [0] dilations = [1] groups = 1
      : (tensor<1x1x4xf32>, tensor<1x1x0xf32>) -> tensor<1x1x5xf32>
  return
}

// -----

// A NaN epsilon is rejected like a negative one.
func.func @layer_norm_nan_epsilon(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{epsilon must be non-negative}}
  %0 = cleave.layer_norm %x, %g, %g axis = 1 epsilon = 0x7FF8000000000000
      : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return
}

// -----

// GatherElements indices stay inside the operand outside the gather axis.
func.func @gather_elements_index_shape(%x: tensor<2x5xf32>, %i: tensor<3x1xi64>) {
  // expected-error @+1 {{indices size 3 in dimension 0 exceeds the operand size 2}}
  %0 = cleave.gather_elements %x, %i axis = 1 : (tensor<2x5xf32>, tensor<3x1xi64>) -> tensor<3x1xf32>
  return
}

// -----

// Scatter updates have the operand's element type.
func.func @scatter_element_type(%x: tensor<2x5xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf16>) {
  // expected-error @+1 {{operand element type 'f32' differs from updates element type 'f16'}}
  %0 = cleave.scatter none %x, %i, %u axis = 1 : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf16>) -> tensor<2x5xf32>
  return
}

// -----

// Scatter returns the operand's type.
func.func @scatter_result_type(%x: tensor<2x5xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf32>) {
  // expected-error @+1 {{all of {operand, result} have same type}}
  %0 = cleave.scatter none %x, %i, %u axis = 1 : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x4xf32>
  return
}

// -----

// Scatter needs static shapes.
func.func @scatter_dynamic(%x: tensor<2x5xf32>, %i: tensor<?x3xi64>, %u: tensor<?x3xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?x3xi64>'}}
  %0 = cleave.scatter none %x, %i, %u axis = 1 : (tensor<2x5xf32>, tensor<?x3xi64>, tensor<?x3xf32>) -> tensor<2x5xf32>
  return
}

// -----

// Scatter indices have the operand's rank.
func.func @scatter_rank(%x: tensor<2x5xf32>, %i: tensor<3xi64>, %u: tensor<3xf32>) {
  // expected-error @+1 {{indices rank 1 differs from operand rank 2}}
  %0 = cleave.scatter add %x, %i, %u axis = 1 : (tensor<2x5xf32>, tensor<3xi64>, tensor<3xf32>) -> tensor<2x5xf32>
  return
}

// -----

// Scatter updates have the indices' shape.
func.func @scatter_updates_shape(%x: tensor<2x5xf32>, %i: tensor<2x3xi64>, %u: tensor<2x2xf32>) {
  // expected-error @+1 {{updates shape [2, 2] differs from indices shape [2, 3]}}
  %0 = cleave.scatter add %x, %i, %u axis = 1 : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x2xf32>) -> tensor<2x5xf32>
  return
}

// -----

// The scatter axis is a dimension of the operand.
func.func @scatter_axis(%x: tensor<2x5xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2}}
  %0 = cleave.scatter add %x, %i, %u axis = 2 : (tensor<2x5xf32>, tensor<2x3xi64>, tensor<2x3xf32>) -> tensor<2x5xf32>
  return
}

// -----

// Scatter indices stay inside the operand outside the scatter axis.
func.func @scatter_index_shape(%x: tensor<2x5xf32>, %i: tensor<3x3xi64>, %u: tensor<3x3xf32>) {
  // expected-error @+1 {{indices size 3 in dimension 0 exceeds the operand size 2}}
  %0 = cleave.scatter add %x, %i, %u axis = 1 : (tensor<2x5xf32>, tensor<3x3xi64>, tensor<3x3xf32>) -> tensor<2x5xf32>
  return
}

// -----

// TopK values keep the operand's element type.
func.func @top_k_element_type(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{operand element type 'f32' differs from values element type 'f16'}}
  %v, %i = cleave.top_k %x k = 3 dim = 1 largest = true sorted = true : tensor<4x10xf32> -> tensor<4x3xf16>, tensor<4x3xi64>
  return
}

// -----

// TopK needs static shapes.
func.func @top_k_dynamic(%x: tensor<?x10xf32>) {
  // expected-error @+1 {{requires static shapes, got 'tensor<?x10xf32>'}}
  %v, %i = cleave.top_k %x k = 3 dim = 1 largest = true sorted = true : tensor<?x10xf32> -> tensor<4x3xf32>, tensor<4x3xi64>
  return
}

// -----

// The TopK dimension is a dimension of the operand.
func.func @top_k_dimension(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{dimension 2 is out of range for rank 2}}
  %v, %i = cleave.top_k %x k = 3 dim = 2 largest = true sorted = true : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x3xi64>
  return
}

// -----

// k cannot exceed the size of the dimension.
func.func @top_k_k(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{k = 11 is out of range [0, 10] for dimension 1}}
  %v, %i = cleave.top_k %x k = 11 dim = 1 largest = true sorted = true : tensor<4x10xf32> -> tensor<4x11xf32>, tensor<4x11xi64>
  return
}

// -----

// Both TopK results have the operand's shape with k along the dimension.
func.func @top_k_result_shape(%x: tensor<4x10xf32>) {
  // expected-error @+1 {{result shape [4, 2] does not match the expected shape [4, 3]}}
  %v, %i = cleave.top_k %x k = 3 dim = 1 largest = true sorted = true : tensor<4x10xf32> -> tensor<4x3xf32>, tensor<4x2xi64>
  return
}

// -----

// im2col's result is G x C/G x K... x N x S'...
func.func @im2col_shape(%x: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{result shape}}
  %0 = cleave.im2col %x kernel = [3, 3] strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 1
      : (tensor<2x4x8x8xf32>) -> tensor<1x4x3x3x2x6x6xf32>
  return
}

// -----

func.func @im2col_groups(%x: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{groups 3 must divide the input channels 4}}
  %0 = cleave.im2col %x kernel = [3, 3] strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 3
      : (tensor<2x4x8x8xf32>) -> tensor<3x1x3x3x2x8x8xf32>
  return
}

// -----

func.func @im2col_kernel(%x: tensor<2x4x8x8xf32>) {
  // expected-error @+1 {{kernel needs 2 entries, got 1}}
  %0 = cleave.im2col %x kernel = [3] strides = [1, 1] pad_low = [1, 1] pad_high = [1, 1] dilations = [1, 1] groups = 1
      : (tensor<2x4x8x8xf32>) -> tensor<1x4x3x3x2x8x8xf32>
  return
}

// -----

// Query heads come in whole groups per key/value head.
func.func @attention_heads(%q: tensor<1x3x4x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{query heads (3) are not a multiple of key/value heads (2)}}
  %0 = cleave.attention %q, %k, %k scale = 0.5
      : (tensor<1x3x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x3x4x8xf32>
  return
}

// -----

func.func @attention_head_size(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x6xf32>) {
  // expected-error @+1 {{k's head size 6 differs from q's 8}}
  %0 = cleave.attention %q, %k, %k scale = 0.5
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x6xf32>, tensor<1x2x4x6xf32>) -> tensor<1x2x4x6xf32>
  return
}

// -----

func.func @attention_result(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{result shape [1, 2, 8, 4] should be [1, 2, 4, 8]}}
  %0 = cleave.attention %q, %q, %q scale = 0.5
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x4xf32>
  return
}

// -----

// A bias broadcasts over batch, heads and queries, never over keys.
func.func @attention_bias(%q: tensor<1x2x4x8xf32>, %m: tensor<1x1x4x1xf32>) {
  // expected-error @+1 {{bias [1, 1, 4, 1] does not broadcast to the scores [1, 2, 4, 4]}}
  %0 = cleave.attention %q, %q, %q bias %m scale = 0.5
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x1xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_scale(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{scale must be positive, got -1}}
  %0 = cleave.attention %q, %q, %q scale = -1.0
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_offset(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{causal_offset needs causal}}
  %0 = cleave.attention %q, %q, %q scale = 0.5 {causal_offset = 2 : i64}
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<2x4x8xf32>) {
  // expected-error @+1 {{q must have rank 4, got 'tensor<2x4x8xf32>'}}
  %0 = cleave.attention %q, %q, %q scale = 0.5
      : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// RMS norm keeps the operand type.
func.func @rms_norm_result_type(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{result type 'tensor<4x8xf16>' differs from operand type 'tensor<4x8xf32>'}}
  %0 = cleave.rms_norm %x, %g axis = 1 epsilon = 1.0e-05
      : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf16>
  return
}

// -----

// The RMS norm axis is an operand dimension.
func.func @rms_norm_axis(%x: tensor<4x8xf32>, %g: tensor<f32>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %0 = cleave.rms_norm %x, %g axis = -1 epsilon = 1.0e-05
      : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  return
}

// -----

// RMS norm scale has the normalized shape.
func.func @rms_norm_scale_shape(%x: tensor<2x4x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{scale shape [4] differs from the normalized shape [8]}}
  %0 = cleave.rms_norm %x, %g axis = 2 epsilon = 1.0e-05
      : (tensor<2x4x8xf32>, tensor<4xf32>) -> tensor<2x4x8xf32>
  return
}

// -----

// RMS norm scale has the result's element type.
func.func @rms_norm_scale_element_type(%x: tensor<4x8xbf16>, %g: tensor<8xf32>) {
  // expected-error @+1 {{scale element type 'f32' differs from result element type 'bf16'}}
  %0 = cleave.rms_norm %x, %g axis = 1 epsilon = 1.0e-05
      : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xbf16>
  return
}

// -----

// The gradient shares the forward's checks, naming its `out`.
func.func @attention_grad_out(%q: tensor<1x2x4x8xf32>, %o: tensor<1x2x8x4xf32>) {
  // expected-error @+1 {{out shape [1, 2, 8, 4] should be [1, 2, 4, 8]}}
  %0:3 = cleave.attention_grad %q, %q, %q, %o, %o scale = 0.5
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32>, tensor<1x2x8x4xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

func.func @attention_grad_dout(%q: tensor<1x2x4x8xf32>, %d: tensor<1x2x4x4xf32>) {
  // expected-error @+1 {{dout 'tensor<1x2x4x4xf32>' does not have out's shape [1, 2, 4, 8]}}
  %0:3 = cleave.attention_grad %q, %q, %q, %q, %d scale = 0.5
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

func.func @attention_grad_type(%q: tensor<1x2x4x8xbf16>) {
  // expected-error @+1 {{gradients must be 'bf16' (q's element type) or f32, got 'f16'}}
  %0:3 = cleave.attention_grad %q, %q, %q, %q, %q scale = 0.5
      : (tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) -> (tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>)
  return
}

// -----

func.func @attention_grad_shape(%q: tensor<1x2x4x8xf32>, %k: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{dk 'tensor<1x2x4x8xf32>' does not have the shape of k [1, 1, 4, 8]}}
  %0:3 = cleave.attention_grad %q, %k, %k, %q, %q scale = 0.5
      : (tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x1x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x4x8xf32>)
  return
}

// -----

func.func @attention_grad_mixed(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf64>) {
  // expected-error @+1 {{dk has element type 'f64', dq has 'f32'}}
  %0:3 = cleave.attention_grad %q, %q, %q, %q, %q scale = 0.5
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf64>, tensor<1x2x4x8xf32>)
  return
}

// -----

func.func @rotary_features(%x: tensor<1x2x4x6xf32>, %c: tensor<1x4x4xf32>) {
  // expected-error @+1 {{rotates 8 features, more than x's 6}}
  %0 = cleave.rotary %x, %c, %c : (tensor<1x2x4x6xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<1x2x4x6xf32>
  return
}

// -----

func.func @rotary_positions(%x: tensor<1x2x4x8xf32>, %c: tensor<1x5x4xf32>) {
  // expected-error @+1 {{cos [1, 5, 4] does not match x's batch and positions [1, 2, 4, 8] (its batch may be 1)}}
  %0 = cleave.rotary %x, %c, %c : (tensor<1x2x4x8xf32>, tensor<1x5x4xf32>, tensor<1x5x4xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @rotary_sin(%x: tensor<1x2x4x8xf32>, %c: tensor<1x4x4xf32>, %s: tensor<1x4x2xf32>) {
  // expected-error @+1 {{sin 'tensor<1x4x2xf32>' does not have cos's shape [1, 4, 4]}}
  %0 = cleave.rotary %x, %c, %s : (tensor<1x2x4x8xf32>, tensor<1x4x4xf32>, tensor<1x4x2xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @rotary_rank(%x: tensor<2x4x8xf32>, %c: tensor<1x4x4xf32>) {
  // expected-error @+1 {{x must have rank 4 (B x H x S x D), got 'tensor<2x4x8xf32>'}}
  %0 = cleave.rotary %x, %c, %c : (tensor<2x4x8xf32>, tensor<1x4x4xf32>, tensor<1x4x4xf32>) -> tensor<2x4x8xf32>
  return
}


// -----

func.func @bitcast_width(%x: tensor<4xf32>) {
  // expected-error @+1 {{reinterprets 'f32' (32 bits) as 'f16' (16 bits): the widths must be equal}}
  %0 = cleave.bitcast %x : tensor<4xf32> -> tensor<4xf16>
  return
}

// -----

func.func @bitcast_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{result shape}}
  %0 = cleave.bitcast %x : tensor<4xf32> -> tensor<2x2xi32>
  return
}

// -----

func.func @attention_block_positions(%q: tensor<1x2x4x8xf32>, %p: tensor<3xi64>) {
  // expected-error @+1 {{q_positions 'tensor<3xi64>' should have one position per row (4)}}
  %o, %l = cleave.attention_block %q, %q, %q positions %p, %p scale = 0.5
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<3xi64>, tensor<3xi64>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_block_lse(%q: tensor<1x2x4x8xf32>, %p: tensor<4xi64>) {
  // expected-error @+1 {{lse 'tensor<1x2x8xf32>' should be [1, 2, 4] (one per query row)}}
  %o, %l = cleave.attention_block %q, %q, %q positions %p, %p scale = 0.5
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4xi64>, tensor<4xi64>) -> (tensor<1x2x4x8xf32>, tensor<1x2x8xf32>)
  return
}

// -----

func.func @attention_block_grad_shape(%q: tensor<1x2x4x8xf32>, %p: tensor<4xi64>, %l: tensor<1x2x4xf32>) {
  // expected-error @+1 {{dk 'tensor<1x2x4x4xf32>' does not have the shape of k [1, 2, 4, 8]}}
  %g:3 = cleave.attention_block_grad %q, %q, %q positions %p, %p lse %l out %q dout %q scale = 0.5
      : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<4xi64>, tensor<4xi64>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

func.func @grouped_matmul_k(%x: tensor<8x16xf32>, %w: tensor<4x16x32xf32>, %ids: tensor<8xi64>) {
  // expected-error @+1 {{w 'tensor<4x16x32xf32>' has K = 32 (transpose_w: yes), x has K = 16}}
  %y = cleave.grouped_matmul %x, %w, %ids transpose_w
      : (tensor<8x16xf32>, tensor<4x16x32xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  return
}

// -----

func.func @grouped_matmul_ids(%x: tensor<8x16xf32>, %w: tensor<4x16x32xf32>, %ids: tensor<4x2xi64>) {
  // expected-error @+1 {{group_ids 'tensor<4x2xi64>' must be one id per row of x 'tensor<8x16xf32>'}}
  %y = cleave.grouped_matmul %x, %w, %ids
      : (tensor<8x16xf32>, tensor<4x16x32xf32>, tensor<4x2xi64>) -> tensor<8x32xf32>
  return
}

// -----

func.func @grouped_matmul_result(%x: tensor<8x16xf32>, %w: tensor<4x16x32xf32>, %ids: tensor<8xi64>) {
  // expected-error @+1 {{result shape [8, 16] differs from rows x N = [8, 32]}}
  %y = cleave.grouped_matmul %x, %w, %ids
      : (tensor<8x16xf32>, tensor<4x16x32xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  return
}

// -----

func.func @grouped_matmul_weight_grad_type(%x: tensor<8x16xf32>, %dy: tensor<8x32xbf16>, %ids: tensor<8xi64>) {
  // expected-error @+1 {{dy element type 'bf16' differs from x element type 'f32'}}
  %dw = cleave.grouped_matmul_weight_grad %x, %dy, %ids
      : (tensor<8x16xf32>, tensor<8x32xbf16>, tensor<8xi64>) -> tensor<4x16x32xf32>
  return
}
