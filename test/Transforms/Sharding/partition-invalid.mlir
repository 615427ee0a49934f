// RUN: cleave-opt --cleave-partition -split-input-file -verify-diagnostics %s

// What the SPMD partitioner refuses: shardings it cannot turn into local
// shapes, programs over more than one mesh, and ops it cannot partition.

// An axis the mesh does not have.
cleave.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @below {{argument 0: mesh @mesh has no axis 'tp'}}
func.func @unknown_axis(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}]>}) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// An op's result split over axes that do not divide its dimension.
cleave.mesh @mesh axes = ["dp"] shape = [4]
func.func @indivisible(%x: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @below {{result 0: dimension 0 of size 6 does not divide over mesh axes [dp] (4 ranks)}}
  %0 = cleave.unary neg %x {cleave.sharding = [#cleave.sharding<@mesh, [{"dp"}]>]} : tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

// One axis splitting two dimensions of a function result.
cleave.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @below {{function result 0: mesh axis 'dp' shards more than one dimension}}
func.func @axis_twice(%x: tensor<8x8xf32>) -> (tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {"dp"}]>}) {
  return %x : tensor<8x8xf32>
}

// -----

// A sharding of another rank than its tensor.
cleave.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @below {{argument 0: sharding has 1 dimensions but the tensor 2}}
func.func @rank(%x: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}]>}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// A sharding over a mesh the program is not partitioned over.
cleave.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @below {{argument 0: sharding names mesh @other, but the program is partitioned over @mesh}}
func.func @other_mesh(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@other, [{"dp"}]>}) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// Two meshes.
cleave.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @below {{the SPMD partitioner works over one mesh}}
cleave.mesh @second axes = ["tp"] shape = [2]
func.func @two_meshes(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

// An op with a region.
cleave.mesh @mesh axes = ["dp"] shape = [2]
func.func @region(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}]>}) -> tensor<8xf32> {
  // expected-error @below {{cannot be partitioned: ops with regions are not supported by the SPMD partitioner}}
  %0 = scf.execute_region -> tensor<8xf32> {
    scf.yield %x : tensor<8xf32>
  }
  return %0 : tensor<8xf32>
}
