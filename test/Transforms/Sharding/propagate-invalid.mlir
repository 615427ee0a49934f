// RUN: cleave-opt --cleave-propagate-sharding -split-input-file -verify-diagnostics %s

// Stated shardings are checked against the mesh and the types first.

cleave.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @below {{argument 0: mesh @mesh has no axis 'tp'}}
func.func @unknown_axis(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"tp"}]>}) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

cleave.mesh @mesh axes = ["dp"] shape = [4]
// expected-error @below {{argument 0: dimension 0 of size 6 does not divide over mesh axes [dp] (4 ranks)}}
func.func @indivisible(%x: tensor<6xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}]>}) -> tensor<6xf32> {
  return %x : tensor<6xf32>
}

// -----

cleave.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @below {{argument 0: mesh axis 'dp' shards more than one dimension}}
func.func @axis_twice(%x: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}, {"dp"}]>}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

cleave.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @below {{argument 0: sharding has 1 dimensions but the tensor 2}}
func.func @rank(%x: tensor<8x8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}]>}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}

// -----

// expected-error @below {{shardings name mesh @nowhere, which is not declared}}
module {
  func.func @no_mesh(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@nowhere, [{"dp"}]>}) -> tensor<8xf32> {
    return %x : tensor<8xf32>
  }
}

// -----

cleave.mesh @a axes = ["dp"] shape = [2]
cleave.mesh @b axes = ["tp"] shape = [2]
// expected-error @below {{sharding propagation works over one mesh, but shardings name @a and @b}}
func.func @two_meshes(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@a, [{"dp"}]>},
                      %y: tensor<8xf32> {cleave.sharding = #cleave.sharding<@b, [{"tp"}]>}) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}

// -----

cleave.mesh @mesh axes = ["dp"] shape = [2]
// expected-error @below {{expected a priority such as 'p0'}}
func.func @bad_priority(%x: tensor<8xf32> {cleave.sharding = #cleave.sharding<@mesh, [{"dp"}q1]>}) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
