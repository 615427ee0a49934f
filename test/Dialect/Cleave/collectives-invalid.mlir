// Verifier errors of meshes and collectives: one case per diagnostic.
// RUN: cleave-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{axis 'dp' appears twice}}
cleave.mesh @m axes = ["dp", "dp"] shape = [2, 2]

// -----

// expected-error @+1 {{has 1 axis names for 2 sizes}}
cleave.mesh @m axes = ["dp"] shape = [2, 2]

// -----

// expected-error @+1 {{axis 'tp' has size 0; sizes must be at least 1}}
cleave.mesh @m axes = ["dp", "tp"] shape = [2, 0]

// -----

// expected-error @+1 {{axis name 'd-p' must be letters, digits and '_'}}
cleave.mesh @m axes = ["d-p"] shape = [2]

// -----

// expected-error @+1 {{needs at least one axis}}
cleave.mesh @m axes = [] shape = []

// -----

func.func @f() {
  // expected-error @+1 {{'cleave.mesh' op expects parent op 'builtin.module'}}
  "cleave.mesh"() {sym_name = "m", axis_names = ["dp"], shape = array<i64: 2>} : () -> ()
  return
}

// -----

func.func @no_mesh(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{names mesh @nowhere, which is not a cleave.mesh}}
  %0 = cleave.all_reduce sum %x over @nowhere ["dp"] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @unknown_axis(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{mesh @m has no axis 'tp'}}
  %0 = cleave.all_reduce sum %x over @m ["tp"] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @axis_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{mesh axis 'dp' appears twice}}
  %0 = cleave.all_reduce sum %x over @m ["dp", "dp"] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @no_axes(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{needs at least one mesh axis}}
  %0 = cleave.all_reduce sum %x over @m [] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @avg_int(%x: tensor<4xi32>) -> tensor<4xi32> {
  // expected-error @+1 {{avg needs a float element type, got 'i32'}}
  %0 = cleave.all_reduce avg %x over @m ["dp"] : tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @async_unwaited(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{is async: its result must have exactly one use, a cleave.done}}
  %0 = cleave.all_reduce sum %x over @m ["dp"] async : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @done_of_sync(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = cleave.all_reduce sum %x over @m ["dp"] : tensor<4xf32>
  // expected-error @+1 {{operand must be the result of an async collective}}
  %1 = cleave.done %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @gather_size(%x: tensor<4x6xf32>) -> tensor<6x6xf32> {
  // expected-error @+1 {{result dimension 0 is 6, expected 8}}
  %0 = cleave.all_gather %x over @m ["dp"] dim = 0 : tensor<4x6xf32> -> tensor<6x6xf32>
  return %0 : tensor<6x6xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @gather_dim(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{dim 2 is out of range for rank 2}}
  %0 = cleave.all_gather %x over @m ["dp"] dim = 2 : tensor<4x6xf32> -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @gather_type(%x: tensor<4x6xf32>) -> tensor<8x6xf16> {
  // expected-error @+1 {{result element type 'f16' differs from the operand's 'f32'}}
  %0 = cleave.all_gather %x over @m ["dp"] dim = 0 : tensor<4x6xf32> -> tensor<8x6xf16>
  return %0 : tensor<8x6xf16>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @gather_rank(%x: tensor<4x6xf32>) -> tensor<48xf32> {
  // expected-error @+1 {{result rank 1 differs from the operand's 2}}
  %0 = cleave.all_gather %x over @m ["dp"] dim = 0 : tensor<4x6xf32> -> tensor<48xf32>
  return %0 : tensor<48xf32>
}

// -----

cleave.mesh @m axes = ["dp", "tp"] shape = [2, 2]
func.func @scatter_divides(%x: tensor<6x6xf32>) -> tensor<1x6xf32> {
  // expected-error @+1 {{operand dimension 0 of size 6 does not divide by the group size 4 of mesh axes [dp, tp]}}
  %0 = cleave.reduce_scatter sum %x over @m ["dp", "tp"] dim = 0 : tensor<6x6xf32> -> tensor<1x6xf32>
  return %0 : tensor<1x6xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @scatter_size(%x: tensor<4x6xf32>) -> tensor<4x3xf32> {
  // expected-error @+1 {{result dimension 0 is 4, expected 2}}
  %0 = cleave.reduce_scatter sum %x over @m ["dp"] dim = 0 : tensor<4x6xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [4]
func.func @a2a_divides(%x: tensor<6x6xf32>) -> tensor<6x6xf32> {
  // expected-error @+1 {{split dimension 0 of size 6 does not divide by the group size 4 of mesh axes [dp]}}
  %0 = cleave.all_to_all %x over @m ["dp"] split = 0 concat = 0 : tensor<6x6xf32> -> tensor<6x6xf32>
  return %0 : tensor<6x6xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @a2a_size(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{result dimension 0 is 4, expected 2}}
  %0 = cleave.all_to_all %x over @m ["dp"] split = 0 concat = 1 : tensor<4x6xf32> -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @a2a_dim(%x: tensor<4x6xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{concat dim 3 is out of range for rank 2}}
  %0 = cleave.all_to_all %x over @m ["dp"] split = 0 concat = 3 : tensor<4x6xf32> -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @root(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{root 2 is not a group index (the group has 2 ranks)}}
  %0 = cleave.broadcast %x over @m ["dp"] root = 2 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @pairs_odd(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{pairs must list (source, target) pairs, got 3 indices}}
  %0 = cleave.collective_permute %x over @m ["dp"] pairs = [0, 1, 1] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [4]
func.func @pairs_source_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{source 0 appears twice}}
  %0 = cleave.collective_permute %x over @m ["dp"] pairs = [0, 1, 0, 2] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [4]
func.func @pairs_target_twice(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{target 1 appears twice}}
  %0 = cleave.collective_permute %x over @m ["dp"] pairs = [0, 1, 2, 1] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @pairs_range(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{target 5 is not a group index (the group has 2 ranks)}}
  %0 = cleave.collective_permute %x over @m ["dp"] pairs = [0, 5] : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["pp"] shape = [2]
func.func @send_self(%x: tensor<4xf32>) {
  // expected-error @+1 {{source and target are both group index 1}}
  cleave.send %x over @m ["pp"] from = 1 to = 1 : tensor<4xf32>
  return
}

// -----

cleave.mesh @m axes = ["pp"] shape = [2]
func.func @recv_range() -> tensor<4xf32> {
  // expected-error @+1 {{source 2 is not a group index (the group has 2 ranks)}}
  %0 = cleave.recv over @m ["pp"] from = 2 to = 0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [4]
func.func @slice_divides(%x: tensor<6x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{operand dimension 0 of size 6 does not divide by the group size 4 of mesh axes [dp]}}
  %0 = cleave.all_slice %x over @m ["dp"] dim = 0 : tensor<6x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @slice_size(%x: tensor<8x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{result dimension 0 is 2, expected 4}}
  %0 = cleave.all_slice %x over @m ["dp"] dim = 0 : tensor<8x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

cleave.mesh @m axes = ["dp"] shape = [2]
func.func @slice_async(%x: tensor<8x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{sends nothing, so it has no async form}}
  %0 = cleave.all_slice %x over @m ["dp"] dim = 0 async : tensor<8x4xf32> -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
